package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A quorum queue's consumer whose deliveries fill the connection's
// outbound buffer is refused and blocked, and is unblocked when the
// buffer drains: it gets every message. (The Kick's unblock was proposed
// before the refusal's unassign when it won the race to the proposer; the
// consumer then stayed blocked after a few thousand deliveries. The
// upgrade test found it: server/upgrade.)
func TestQuorumConsumerRefusedThenKicked(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{DataDir: t.TempDir()})
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 8000 // 8 MiB: several times the outbound buffer's high water
	body := make([]byte, 1024)
	var dcs []*amqp091.DeferredConfirmation
	for range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "qq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish not confirmed: %v %v", ok, err)
		}
	}
	for round := range 40 {
		c, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Qos(n+1, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Consume("qq", "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for got := 0; got < n; got++ {
			select {
			case <-ds:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: %d of %d deliveries, then none for 10 s", round, got, n)
			}
		}
		c.Close() // all back to the queue
	}
}
