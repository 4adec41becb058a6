package server

import (
	"errors"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/queue/queuetest"
)

// TestSecondQueueType runs a queue type that is not the classic queue
// through the broker over AMQP: declared by x-queue-type, bound, fed by a
// fanout next to a classic queue (one publish, two types, one confirm),
// consumed with acks and requeues, purged and deleted. Only the seam
// (package queue) connects it to the channel.
func TestSecondQueueType(t *testing.T) {
	s := newTestServer(t, Config{Users: map[string]string{"guest": "guest"}})
	s.types.Register(&queuetest.StubType{Name: "stub"})
	conn, err := dialFrom(s, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stub"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("c", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"s", "c"} {
		if err := ch.QueueBind(q, "", "amq.fanout", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	for _, body := range []string{"a", "b", "c"} {
		if err := ch.Publish("amq.fanout", "", false, false, amqp091.Publishing{Body: []byte(body), DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d nacked", i+1)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no confirm for publish %d", i+1)
		}
	}
	for _, q := range []string{"s", "c"} {
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil || st.Messages != 3 {
			t.Fatalf("queue %s: %+v %v, want 3 messages", q, st, err)
		}
	}

	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("s", "k", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func() amqp091.Delivery {
		t.Helper()
		select {
		case d := <-ds:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery")
		}
		panic("unreachable")
	}
	d1, d2 := next(), next()
	if string(d1.Body) != "a" || string(d2.Body) != "b" {
		t.Fatalf("deliveries %q %q, want a b", d1.Body, d2.Body)
	}
	// Prefetch 2: the third waits for credit; a requeue gives it back.
	d1.Nack(false, true)
	d3 := next()
	if string(d3.Body) != "a" || !d3.Redelivered {
		t.Fatalf("after requeue: %q redelivered %v, want a redelivered", d3.Body, d3.Redelivered)
	}
	d2.Ack(false)
	d3.Ack(false)
	if d := next(); string(d.Body) != "c" {
		t.Fatalf("last delivery %q, want c", d.Body)
	} else {
		d.Ack(false)
	}
	if err := ch.Cancel("k", false); err != nil {
		t.Fatal(err)
	}
	if n, err := ch.QueuePurge("c", false); err != nil || n != 3 {
		t.Fatalf("purge of the classic queue: %d %v", n, err)
	}
	if n, err := ch.QueueDelete("s", false, false, false); err != nil || n != 0 {
		t.Fatalf("delete of the stub queue: %d %v", n, err)
	}
	// Declaring with an argument the stub refuses is a channel error.
	_, err = ch.QueueDeclare("s2", true, false, false, false, amqp091.Table{"x-queue-type": "stub", "x-max-length": 1})
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 406 {
		t.Fatalf("declare with a refused argument: %v, want 406", err)
	}
}
