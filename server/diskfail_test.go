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

// TestStoreFailureNacks makes every store commit fail: a persistent
// publish to a durable queue is then nacked, not confirmed, while the
// broker keeps serving (transient messages still flow and are acked), and
// once the disk recovers persistent publishes are confirmed again.
func TestStoreFailureNacks(t *testing.T) {
	disk := persist.NewMemoryDisk()
	st, err := persist.OpenMemory(disk)
	if err != nil {
		t.Fatal(err)
	}
	url := servertest.Start(t, server.Config{Store: st})
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("dq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(mode uint8) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "dq", false, false, amqp091.Publishing{DeliveryMode: mode, Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
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
	disk := persist.NewMemoryDisk()
	st, err := persist.OpenMemory(disk)
	if err != nil {
		t.Fatal(err)
	}
	url := servertest.Start(t, server.Config{Store: st})
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("nacked", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(body string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "nacked", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
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
