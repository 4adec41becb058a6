package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A quorum queue an earlier Warren ran on a classic stand-in kept its
// messages in the message store; after the upgrade they are in the
// queue's Raft log, in order, and no longer in the store (a second start
// does not enqueue them again).
func TestQuorumStandInMessagesMoved(t *testing.T) {
	dir := t.TempDir()
	st, err := persist.Open(dir, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := persist.QueueRecord{VHost: "/", Name: "old-qq", Durable: true, Args: persist.EncodeArgs(map[string]any{"x-queue-type": "quorum"})}
	if err := st.SaveQueue(&rec); err != nil {
		t.Fatal(err)
	}
	const n = 2500                 // more than one scan batch
	props := []byte{0x10, 0x00, 2} // delivery-mode 2
	for i := range n {
		done := make(chan error, 1)
		id := uint64(i + 1)
		st.Publish(id, persist.MessageRecord{RoutingKey: "old-qq", Props: props, Body: []byte(fmt.Sprint(i))},
			[]persist.QueueSeq{{QueueID: rec.ID, Seq: uint64(i + 1), MsgID: id}}, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	b := servertest.StartBroker(t, server.Config{DataDir: dir})
	check := func(want int) {
		t.Helper()
		conn, err := amqp091.Dial(b.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, _ := conn.Channel()
		q, err := ch.QueueDeclarePassive("old-qq", true, false, false, false, nil)
		if err != nil || q.Messages != want {
			t.Fatalf("after the upgrade: %d messages, %v; want %d", q.Messages, err, want)
		}
	}
	check(n)
	b.Restart()
	check(n)
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	ch.Qos(500, 0, false)
	ds, err := ch.Consume("old-qq", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case d := <-ds:
			if string(d.Body) != fmt.Sprint(i) {
				t.Fatalf("message %d is %q", i, d.Body)
			}
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d messages", i, n)
		}
	}
}
