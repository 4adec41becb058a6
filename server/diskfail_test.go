package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// failingStore starts a broker on a memory store whose commits the test
// can make fail, declares durable queue q on a confirming channel, and
// returns the disk and a publish that reports whether the broker
// confirmed (true) or nacked.
func failingStore(t *testing.T, q string) (*persist.MemoryDisk, *amqp091.Channel, func(mode uint8, body string) bool) {
	t.Helper()
	disk := persist.NewMemoryDisk()
	st, err := persist.OpenMemory(disk)
	if err != nil {
		t.Fatal(err)
	}
	url := servertest.Start(t, server.Config{}, servertest.WithStore(st))
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(mode uint8, body string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{DeliveryMode: mode, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	return disk, ch, publish
}

// TestStoreFailureNacks makes every store commit fail: a persistent
// publish to a durable queue is then nacked, not confirmed, while the
// broker keeps serving (transient messages still flow and are acked), and
// once the disk recovers persistent publishes are confirmed again.
func TestStoreFailureNacks(t *testing.T) {
	disk, _, pub := failingStore(t, "dq")
	publish := func(mode uint8) bool { t.Helper(); return pub(mode, "m") }
	disk.FailCommits(func() error { return errors.New("disk on fire") })
	if publish(amqp091.Persistent) {
		t.Fatal("a persistent publish was confirmed although the store failed")
	}
	if !publish(amqp091.Transient) {
		t.Fatal("a transient publish was nacked: the broker stopped serving")
	}
	disk.FailCommits(nil)
	if !publish(amqp091.Persistent) {
		t.Fatal("a persistent publish was nacked after the store recovered")
	}
}

// TestNackedNotDelivered: persistent messages the store failed to write
// are nacked, and then neither counted in the queue's depth nor delivered,
// whether they wait in the queue or a consumer comes later; the message
// that was stored is.
func TestNackedNotDelivered(t *testing.T) {
	disk, ch, pub := failingStore(t, "nacked")
	publish := func(body string) bool { t.Helper(); return pub(amqp091.Persistent, body) }
	if !publish("kept-1") {
		t.Fatal("nacked before the failure")
	}
	disk.FailCommits(func() error { return errors.New("disk full") })
	for i := range 12 {
		if publish(fmt.Sprintf("nacked-%d", i)) {
			t.Fatalf("publish %d confirmed although the store failed", i)
		}
	}
	disk.FailCommits(nil)
	if !publish("kept-2") {
		t.Fatal("nacked after the store recovered")
	}
	// The withdrawal runs behind the nack: wait for the depth to settle.
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := ch.QueueDeclarePassive("nacked", true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %d with 2 messages stored and 12 nacked", q.Messages)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var got []string
	for {
		d, ok, err := ch.Get("nacked", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(d.Body))
	}
	if len(got) != 2 || got[0] != "kept-1" || got[1] != "kept-2" {
		t.Fatalf("delivered %q, want the two stored messages only", got)
	}
}
