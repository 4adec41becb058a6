package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestStreamKill9 kills the broker with SIGKILL while publishers append
// to a stream with confirms (small segments, so that it rolls), restarts
// it, and reads the stream from the first offset: every confirmed message
// is there, offsets are dense from 0, and the stream takes new messages
// after them.
func TestStreamKill9(t *testing.T) {
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	args := amqp091.Table{"x-queue-type": "stream", "x-stream-max-segment-size-bytes": int32(4096)}
	confirmed := map[string]bool{}
	var mu sync.Mutex
	for round := range rounds {
		b.start()
		declareAfterStart(t, url, "crash-stream", args)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for p := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				confirmingPublisher(ctx, url, "crash-stream", func(i int) amqp091.Publishing {
					body := fmt.Sprintf("r%d-p%d-%d", round, p, i)
					return amqp091.Publishing{Body: []byte(body)}
				}, func(body string) {
					mu.Lock()
					confirmed[body] = true
					mu.Unlock()
				})
			}()
		}
		time.Sleep(time.Duration(200+round*97) * time.Millisecond)
		b.kill()
		cancel()
		wg.Wait()
	}
	b.start()
	defer b.kill()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	q, err := ch.QueueDeclare("crash-stream", true, false, false, false, args)
	if err != nil {
		t.Fatal(err)
	}
	if len(confirmed) == 0 || q.Messages < len(confirmed) {
		t.Fatalf("%d messages after the crashes, %d confirmed", q.Messages, len(confirmed))
	}
	ch.Qos(500, 0, false)
	ds, err := ch.Consume("crash-stream", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for want := int64(0); want < int64(q.Messages); want++ {
		select {
		case d := <-ds:
			if off, _ := d.Headers["x-stream-offset"].(int64); off != want {
				t.Fatalf("offset %v, want %d (dense)", d.Headers["x-stream-offset"], want)
			}
			seen[string(d.Body)] = true
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("stream ended at offset %d of %d", want, q.Messages)
		}
	}
	for body := range confirmed {
		if !seen[body] {
			t.Fatalf("confirmed message %s is missing after the crashes", body)
		}
	}
	t.Logf("%d confirmed, %d in the stream after %d kills", len(confirmed), q.Messages, rounds)
}
