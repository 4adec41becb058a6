package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A policy's max-length-bytes reaches a stream that exists (and wins over
// its argument, as in RabbitMQ 3.10): the old segments go at once and a
// consumer from "first" starts after them. Bad stream keys are refused
// with RabbitMQ's texts.
func TestStreamPolicyRetention(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv := b.Server()
	for def, want := range map[string]map[string]any{
		`<<"1x">> is not a valid max age`:     {"max-age": "1x"},
		`5 is not a valid max age`:            {"max-age": int64(5)},
		`-1 is not a valid segment size`:      {"stream-max-segment-size-bytes": int64(-1)},
		`<<"a">> is not a valid segment size`: {"stream-max-segment-size-bytes": "a"},
	} {
		err := srv.SetPolicy("/", server.Policy{Name: "bad", Pattern: ".", Definition: want})
		if err == nil || !strings.Contains(err.Error(), def) {
			t.Errorf("policy %v: %v, want %q", want, err, def)
		}
	}
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	args := amqp091.Table{"x-queue-type": "stream", "x-stream-max-segment-size-bytes": int32(300), "x-max-length-bytes": int64(1 << 30)}
	if _, err := ch.QueueDeclare("events", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	ch.Confirm(false)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	for i := range 30 {
		ch.Publish("", "events", false, false, amqp091.Publishing{Body: []byte(fmt.Sprintf("%02d-%s", i, strings.Repeat("x", 50)))})
		if c := <-confirms; !c.Ack {
			t.Fatal("nack")
		}
	}
	if ok, _ := ch.QueueDeclarePassive("events", true, false, false, false, nil); ok.Messages != 30 {
		t.Fatalf("before the policy: %d messages", ok.Messages)
	}
	if err := srv.SetPolicy("/", server.Policy{Name: "small", Pattern: "^events$", ApplyTo: "queues",
		Definition: map[string]any{"max-length-bytes": int64(1), "max-age": "7D"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var left int
	for {
		ok, err := ch.QueueDeclarePassive("events", true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if left = ok.Messages; left > 0 && left < 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the policy: %d messages, want fewer than 30", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cch, _ := conn.Channel()
	cch.Qos(10, 0, false)
	ds, err := cch.Consume("events", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		if off := d.Headers["x-stream-offset"].(int64); off != int64(30-left) || !strings.HasPrefix(string(d.Body), fmt.Sprintf("%02d-", off)) {
			t.Fatalf("first delivery: offset %d body %.3s, want offset %d", off, d.Body, 30-left)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery from first")
	}
}
