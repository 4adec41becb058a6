package server

import (
	"errors"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestTxTooLarge: a transaction whose messages the store could not hold in
// one commit is refused with 406 before commit-ok and before any of it
// takes effect: none of its publishes reach the queue, and the message it
// acknowledged is requeued with the channel. A smaller one still commits.
func TestTxTooLarge(t *testing.T) {
	old := txMaxBytes
	txMaxBytes = 1 << 20
	t.Cleanup(func() { txMaxBytes = old })
	s := newTestServer(t, Config{})
	cl, err := dialFrom(s, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ch, err := cl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("txq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "txq", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	var d amqp091.Delivery
	for deadline := time.Now().Add(5 * time.Second); ; {
		var ok bool
		if d, ok, err = ch.Get("txq", false); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first message never arrived")
		}
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 400<<10)
	for range 3 {
		if err := ch.Publish("", "txq", false, false, amqp091.Publishing{DeliveryMode: 2, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	err = ch.TxCommit()
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 406 {
		t.Fatalf("commit of 1.2 MB over a 1 MiB limit: %v, want 406", err)
	}
	ch2, err := cl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch2.QueueDeclarePassive("txq", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 1 {
		t.Fatalf("queue holds %d messages after the refused commit, want the requeued first one only", q.Messages)
	}
	got, ok, err := ch2.Get("txq", true)
	if err != nil || !ok || string(got.Body) != "first" || !got.Redelivered {
		t.Fatalf("get = %q redelivered=%v ok=%v err=%v, want the requeued first message", got.Body, got.Redelivered, ok, err)
	}
	if err := ch2.Tx(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ch2.Publish("", "txq", false, false, amqp091.Publishing{DeliveryMode: 2, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch2.TxCommit(); err != nil {
		t.Fatalf("commit under the limit: %v", err)
	}
	if q, err = ch2.QueueDeclarePassive("txq", true, false, false, false, nil); err != nil || q.Messages != 2 {
		t.Fatalf("after the commit: %d messages, %v; want 2", q.Messages, err)
	}
}
