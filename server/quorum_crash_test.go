package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestQuorumKill9 kills the broker with SIGKILL while publishers put
// confirmed messages into a quorum queue and a consumer takes and acks
// some of them, restarts it, and drains the queue: every confirmed
// message that was not acknowledged is there.
func TestQuorumKill9(t *testing.T) {
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	args := amqp091.Table{"x-queue-type": "quorum"}
	confirmed, acked := map[string]bool{}, map[string]bool{}
	var mu sync.Mutex
	for round := range rounds {
		b.start()
		declareAfterStart(t, url, "crash-quorum", args)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for p := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				confirmingPublisher(ctx, url, "crash-quorum", func(i int) amqp091.Publishing {
					body := fmt.Sprintf("r%d-p%d-%d", round, p, i)
					return amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}
				}, func(body string) {
					mu.Lock()
					confirmed[body] = true
					mu.Unlock()
				})
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := amqp091.Dial(url)
			if err != nil {
				return
			}
			defer conn.Close()
			ch, _ := conn.Channel()
			ch.Qos(50, 0, false)
			ds, err := ch.Consume("crash-quorum", "", false, false, false, false, nil)
			if err != nil {
				return
			}
			for i := 0; ; i++ {
				select {
				case d, ok := <-ds:
					if !ok {
						return
					}
					if i%3 == 0 {
						mu.Lock()
						acked[string(d.Body)] = true
						mu.Unlock()
						d.Ack(false)
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		time.Sleep(time.Duration(300+round*97) * time.Millisecond)
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
	q, err := ch.QueueDeclare("crash-quorum", true, false, false, false, args)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("crash-quorum", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range q.Messages {
		select {
		case d := <-ds:
			seen[string(d.Body)] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages delivered", len(seen), q.Messages)
		}
	}
	missing := 0
	for body := range confirmed {
		if !seen[body] && !acked[body] {
			missing++
			if missing < 5 {
				t.Errorf("confirmed message %s is missing after the crashes", body)
			}
		}
	}
	if len(confirmed) == 0 || missing > 0 {
		t.Fatalf("%d confirmed, %d missing", len(confirmed), missing)
	}
	t.Logf("%d confirmed, %d acked, %d in the queue after %d kills", len(confirmed), len(acked), q.Messages, rounds)
}
