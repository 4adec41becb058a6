package server

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// sleepLog records the delays a throttle asked for, without sleeping.
type sleepLog struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *sleepLog) sleep(d time.Duration, _ <-chan struct{}) bool {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
	return true
}

func (l *sleepLog) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	ds := l.ds
	l.ds = nil
	return ds
}

// TestFailedLoginsAreThrottled checks that repeated wrong passwords from
// one address get their refusal (RabbitMQ's 403 text, unchanged) held back
// longer each time, and that a correct password from another address is
// not held back at all.
func TestFailedLoginsAreThrottled(t *testing.T) {
	slept := &sleepLog{}
	th := auth.NewThrottle(auth.ThrottleConfig{Free: 1, Base: 100 * time.Millisecond, Max: time.Second, Sleep: slept.sleep})
	s := newTestServer(t, Config{Users: map[string]string{"ops": "pw"}, hooks: testhooks.Hooks{LoginThrottle: th}})
	if s.LoginThrottle() != th {
		t.Fatal("LoginThrottle is not the configured one")
	}
	guesser := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}
	for i := range 3 {
		_, err := dialFrom(s, guesser, "ops", fmt.Sprintf("guess%d", i))
		var ae *amqp091.Error
		if !errors.As(err, &ae) || ae.Code != 403 {
			t.Fatalf("guess %d: %v, want 403", i, err)
		}
	}
	if got := rawLoginClose(t, s, guesser, "ops", "guess3"); got != "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile." {
		t.Fatalf("connection.close %q", got)
	}
	if got, want := fmt.Sprint(slept.take()), "[100ms 200ms 400ms]"; got != want {
		t.Fatalf("delays of four failures = %s, want %s", got, want)
	}
	other := &net.TCPAddr{IP: net.ParseIP("192.0.2.8"), Port: 40000}
	c, err := dialFrom(s, other, "ops", "pw")
	if err != nil {
		t.Fatalf("correct password from another address: %v", err)
	}
	c.Close()
	// The failing address is slowed, not locked out.
	c, err = dialFrom(s, guesser, "ops", "pw")
	if err != nil {
		t.Fatalf("correct password from the failing address: %v", err)
	}
	c.Close()
	if ds := slept.take(); len(ds) != 0 {
		t.Fatalf("correct passwords were held back: %v", ds)
	}
}
