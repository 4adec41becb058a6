package server_test

import (
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestDurableQueueMixedBacklogRestart: a durable queue whose backlog is
// past its window holds persistent messages (in the store) and transient
// ones (spilled); all come out in order, and after a restart the
// persistent ones do, in order, and the transient ones are gone, as in
// RabbitMQ.
func TestDurableQueueMixedBacklogRestart(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{QueueWindow: 4})
	publishAll := func() {
		conn, err := amqp091.Dial(b.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, _ := conn.Channel()
		if _, err := ch.QueueDeclare("mixed", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 64))
		for i := range 40 {
			mode := amqp091.Transient
			if i%2 == 0 {
				mode = amqp091.Persistent
			}
			if err := ch.Publish("", "mixed", false, false, amqp091.Publishing{DeliveryMode: mode, Body: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for range 40 {
			if c := <-confirms; !c.Ack {
				t.Fatal("nacked")
			}
		}
	}
	drain := func() []string {
		conn, err := amqp091.Dial(b.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, _ := conn.Channel()
		var got []string
		for {
			d, ok, err := ch.Get("mixed", true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return got
			}
			got = append(got, string(d.Body))
		}
	}
	var all, even []string
	for i := range 40 {
		all = append(all, fmt.Sprint(i))
		if i%2 == 0 {
			even = append(even, fmt.Sprint(i))
		}
	}
	publishAll()
	if got := drain(); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("got %v, want %v", got, all)
	}
	publishAll()
	b.Restart()
	if got := drain(); fmt.Sprint(got) != fmt.Sprint(even) {
		t.Fatalf("after a restart got %v, want the persistent ones %v", got, even)
	}
}
