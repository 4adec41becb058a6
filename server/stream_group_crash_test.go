package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// TestStreamGroupKill9 kills the broker with -9 while producers publish
// keyed messages with confirms to a partitioned stream and a group member
// acks in transactions, several times; then a member of the group drains
// it to a marker published last to each partition. History checks: every
// confirmed message reached the group, and no message whose ack's
// tx.commit-ok arrived was delivered to the group again.
func TestStreamGroupKill9(t *testing.T) {
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	const parts = 3
	b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	args := amqp091.Table{"x-queue-type": "stream", "x-stream-partitions": int32(parts), "x-stream-max-segment-size-bytes": int32(8192)}
	group := amqp091.Table{"x-stream-group": "crash", "x-stream-offset": "first"}
	var mu sync.Mutex
	confirmed := map[string]bool{}
	delivered := map[string]bool{}
	committed := map[string]bool{} // bodies whose ack's commit-ok arrived
	var again []string

	// consume takes deliveries of the group and acks them in transactions
	// of up to 10, until ctx ends, the connection dies or stopAt says so.
	consume := func(ctx context.Context, stopAt func(body string) bool) {
		conn, err := amqp091.Dial(url)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, _ := conn.Channel()
		ch.Qos(50, 0, false)
		if ch.Tx() != nil {
			return
		}
		ds, err := ch.Consume("crash-groups", "", false, false, false, false, group)
		if err != nil {
			return
		}
		var batch []string
		for {
			select {
			case <-ctx.Done():
				return
			case d, ok := <-ds:
				if !ok {
					return
				}
				body := string(d.Body)
				mu.Lock()
				if committed[body] {
					again = append(again, body)
				}
				delivered[body] = true
				mu.Unlock()
				if d.Ack(false) != nil {
					return
				}
				batch = append(batch, body)
				stop := stopAt != nil && stopAt(body)
				if len(batch) == 10 || stop {
					if ch.TxCommit() != nil {
						return
					}
					mu.Lock()
					for _, x := range batch {
						committed[x] = true
					}
					mu.Unlock()
					batch = batch[:0]
				}
				if stop {
					return
				}
			}
		}
	}

	for round := range rounds {
		b.start()
		declareAfterStart(t, url, "crash-groups", args)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for p := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				confirmingPublisher(ctx, url, "crash-groups", func(i int) amqp091.Publishing {
					body := fmt.Sprintf("r%d-p%d-%d", round, p, i)
					return amqp091.Publishing{Body: []byte(body),
						Headers: amqp091.Table{"x-stream-partition-key": body}}
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
			consume(ctx, nil)
		}()
		time.Sleep(time.Duration(300+round*113) * time.Millisecond)
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
	ch.Confirm(false)
	for p := range parts {
		dc, err := ch.PublishWithDeferredConfirm("", "crash-groups", false, false, amqp091.Publishing{Body: []byte(fmt.Sprint("end-", p)),
			Headers: amqp091.Table{"x-stream-partition": int32(p)}})
		if err != nil || !dc.Wait() {
			t.Fatalf("end marker %d: %v", p, err)
		}
	}
	ends := 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consume(ctx, func(body string) bool {
		if len(body) > 4 && body[:4] == "end-" {
			ends++
		}
		return ends == parts
	})
	if ends != parts {
		t.Fatalf("the group reached %d of %d end markers in a minute", ends, parts)
	}
	mu.Lock()
	defer mu.Unlock()
	for body := range confirmed {
		if !delivered[body] {
			t.Fatalf("confirmed message %s never reached the group", body)
		}
	}
	if len(again) > 0 {
		t.Fatalf("%d messages delivered again after their ack's tx.commit-ok, e.g. %s", len(again), again[0])
	}
	if len(confirmed) == 0 || len(committed) == 0 {
		t.Fatalf("nothing happened: %d confirmed, %d committed", len(confirmed), len(committed))
	}
	t.Logf("%d confirmed, %d delivered, %d acks committed, over %d kills", len(confirmed), len(delivered), len(committed), rounds)
}
