package server_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestMemoryAlarmBlocksPublishers lowers the memory watermark to one byte,
// so the memory alarm is raised: a publishing connection gets
// connection.blocked and is no longer read from, while a consumer on
// another connection still drains what was queued before. Raising the
// watermark again unblocks the publisher and its messages arrive.
func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{MemoryHighWatermarkBytes: 1 << 40},
		servertest.WithAlarmInterval(5*time.Millisecond))
	srv := b.Server()
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	q, err := ch.QueueDeclare("", false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive(q.Name, false, true, false, false, nil); err != nil {
		t.Fatal(err) // a round trip: "before" is queued
	}

	srv.SetMemoryHighWatermark(1)
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	// The alarm is raised by the next check; publish until it bites.
	sent := 0
	deadline := time.After(5 * time.Second)
wait:
	for {
		if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("during")}); err != nil {
			t.Fatal(err)
		}
		sent++
		select {
		case bl := <-blocked:
			if !bl.Active || bl.Reason != "low on memory" {
				t.Fatalf("blocking %+v, want active, low on memory", bl)
			}
			break wait
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("no connection.blocked")
		}
	}

	// A consumer on another connection keeps draining during the alarm.
	cconn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer cconn.Close()
	cch, _ := cconn.Channel()
	deliveries, err := cch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	recv := func() string {
		select {
		case d := <-deliveries:
			return string(d.Body)
		case <-time.After(5 * time.Second):
			t.Fatal("no delivery")
			return ""
		}
	}
	if got := recv(); got != "before" {
		t.Fatalf("first delivery %q, want before", got)
	}

	srv.SetMemoryHighWatermark(1 << 40)
	select {
	case bl := <-blocked:
		if bl.Active {
			t.Fatalf("blocking %+v, want unblocked", bl)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.unblocked")
	}
	for i := 0; i < sent; i++ {
		if got := recv(); got != "during" {
			t.Fatalf("delivery %q, want during", got)
		}
	}
}
