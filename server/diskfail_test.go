package server_test

import (
	"context"
	"errors"
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
