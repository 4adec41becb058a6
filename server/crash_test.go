package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/server"
)

// The crash test runs the broker in a child process (this test binary,
// re-executed with WARREN_CRASH_CHILD set) so that it can be killed with
// SIGKILL at a random moment.

func TestMain(m *testing.M) {
	if dir := os.Getenv("WARREN_CRASH_CHILD"); dir != "" {
		runChildBroker(dir, os.Getenv("WARREN_CRASH_ADDR"))
		return
	}
	os.Exit(m.Run())
}

func runChildBroker(dir, addr string) {
	srv, err := server.New(server.Config{Listen: addr, DataDir: dir, QueueWindow: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child broker:", err)
		os.Exit(2)
	}
	// SIGTERM stops it cleanly (childBroker.stop), SIGKILL not.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child broker:", err)
		os.Exit(2)
	}
}

type childBroker struct {
	t    *testing.T
	dir  string
	addr string
	cmd  *exec.Cmd
}

func (b *childBroker) start() {
	b.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WARREN_CRASH_CHILD="+b.dir, "WARREN_CRASH_ADDR="+b.addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("child broker did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *childBroker) kill() {
	b.cmd.Process.Signal(syscall.SIGKILL)
	b.cmd.Wait()
}

// stop stops the child broker cleanly (SIGTERM: Serve's shutdown).
func (b *childBroker) stop() {
	b.t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := b.cmd.Wait(); err != nil {
		b.t.Fatalf("child broker's clean stop: %v", err)
	}
}

func freeAddr(t *testing.T) string { return testaddr.Free(t) }

// crashLedger is what the clients know for sure before the crash.
type crashLedger struct {
	mu        sync.Mutex
	confirmed map[string]bool // persistent messages whose publish was confirmed
	received  map[string]bool // delivered to the consumer before a confirmed marker
	acked     map[string]bool // acked before a confirmed marker: durable
	ackSent   map[string]bool // acked at all: its ack may or may not be durable
}

// TestCrashKill9 kills the broker with SIGKILL at random moments while
// publishers use confirms and a consumer acks some messages, then checks
// after each restart that every confirmed message is there exactly once
// unless its ack was durable, that delivered-but-unacked ones come back
// redelivered, and that no message with a durable ack reappears. An ack is
// known durable once a later publish on the same connection is confirmed:
// the broker writes in order, so that fsync covered the ack.
func TestCrashKill9(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	for round := 0; round < rounds; round++ {
		b.start()
		ledger := &crashLedger{confirmed: map[string]bool{}, received: map[string]bool{}, acked: map[string]bool{}, ackSent: map[string]bool{}}
		queues := []string{"crash-a", "crash-b"}
		setup, err := amqp091.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		sch, _ := setup.Channel()
		for _, q := range append(queues, "crash-markers") {
			if _, err := sch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := sch.QueuePurge(q, false); err != nil {
				t.Fatal(err)
			}
		}
		setup.Close()

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for p := 0; p < 3; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashPublisher(ctx, url, fmt.Sprintf("r%d-p%d", round, p), queues, ledger)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashConsumer(ctx, url, queues[0], ledger)
		}()
		time.Sleep(time.Duration(50+rand.IntN(400)) * time.Millisecond)
		b.kill()
		cancel()
		wg.Wait()

		b.start()
		checkAfterCrash(t, url, queues, ledger)
		b.kill()
	}
}

func crashPublisher(ctx context.Context, url, id string, queues []string, l *crashLedger) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil || ch.Confirm(false) != nil {
		return
	}
	for n := 0; ctx.Err() == nil; n++ {
		body := fmt.Sprintf("%s-%d", id, n)
		q := queues[n%len(queues)]
		dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
		if err != nil {
			return
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return
		}
		l.mu.Lock()
		l.confirmed[body] = true
		l.mu.Unlock()
	}
}

func crashConsumer(ctx context.Context, url, queue string, l *crashLedger) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil || ch.Qos(20, 0, false) != nil || ch.Confirm(false) != nil {
		return
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	var received, acked []string
	for n := 0; ; n++ {
		var d amqp091.Delivery
		select {
		case <-ctx.Done():
			return
		case dd, ok := <-deliveries:
			if !ok {
				return
			}
			d = dd
		}
		received = append(received, string(d.Body))
		if n%2 == 0 {
			l.mu.Lock()
			l.ackSent[string(d.Body)] = true
			l.mu.Unlock()
			if d.Ack(false) != nil {
				return
			}
			acked = append(acked, string(d.Body))
		}
		if n%5 == 4 {
			// A confirmed marker makes everything before it durable.
			dc, err := ch.PublishWithDeferredConfirm("", "crash-markers", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("m")})
			if err != nil {
				return
			}
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return
			}
			l.mu.Lock()
			for _, b := range received {
				l.received[b] = true
			}
			for _, b := range acked {
				l.acked[b] = true
			}
			l.mu.Unlock()
			received, acked = received[:0], acked[:0]
		}
	}
}

func checkAfterCrash(t *testing.T, url string, queues []string, l *crashLedger) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, q := range queues {
		for {
			d, ok, err := ch.Get(q, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			body := string(d.Body)
			if seen[body] {
				t.Errorf("%s: message %s recovered twice", q, body)
			}
			seen[body] = true
			if l.acked[body] {
				t.Errorf("%s: message %s reappeared although its ack was durable", q, body)
			}
			if l.received[body] && !l.acked[body] && !d.Redelivered {
				t.Errorf("%s: message %s was delivered before the crash but is not marked redelivered", q, body)
			}
		}
	}
	missing := 0
	for body := range l.confirmed {
		// A confirmed message may only be missing if it was acked.
		if !seen[body] && !l.ackSent[body] {
			missing++
			if missing < 5 {
				t.Errorf("confirmed message %s lost", body)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d confirmed messages lost in all", missing)
	}
	t.Logf("recovered %d messages; %d confirmed, %d durably acked", len(seen), len(l.confirmed), len(l.acked))
}

// declareAfterStart declares queue name with args on the child broker at
// url, as every round of a kill test does after its start.
func declareAfterStart(t *testing.T, url, name string, args amqp091.Table) {
	t.Helper()
	setup, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	sch, _ := setup.Channel()
	if _, err := sch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
}

// confirmingPublisher publishes to queue on its own connection until ctx
// ends or the broker dies: message i is msg(i), and confirmed(body) is
// called for each message the broker acked.
func confirmingPublisher(ctx context.Context, url, queue string, msg func(i int) amqp091.Publishing, confirmed func(body string)) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if ch.Confirm(false) != nil {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		m := msg(i)
		dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, m)
		if err != nil {
			return
		}
		if ok, err := dc.WaitContext(ctx); err == nil && ok {
			confirmed(string(m.Body))
		}
	}
}
