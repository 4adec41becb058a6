package server_test

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestMaxMessageSize checks that a message above the configured maximum
// closes the channel with 406 PRECONDITION_FAILED, as RabbitMQ does, and
// that one at the limit goes through.
func TestMaxMessageSize(t *testing.T) {
	url := servertest.Start(t, server.Config{MaxMessageSize: 1000})
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: make([]byte, 1000)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ch.Get(q.Name, true); err != nil || !ok {
		t.Fatalf("message at the limit: ok=%v err=%v", ok, err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: make([]byte, 1001)}); err != nil {
		t.Fatal(err)
	}
	e := <-closed
	var ae *amqp091.Error
	if e == nil || !errors.As(error(e), &ae) || ae.Code != 406 || ae.Server != true {
		t.Fatalf("close %v, want 406 from the server", e)
	}
	if conn.IsClosed() {
		t.Fatal("a too-large message closed the connection, want only the channel")
	}
}
