package amqpopen

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A dial that fails is the error, with nothing to close.
func TestChannelDialFails(t *testing.T) {
	refused := errors.New("refused")
	conn, ch, err := Channel(func() (*amqp091.Connection, error) { return nil, refused })
	if !errors.Is(err, refused) || conn != nil || ch != nil {
		t.Fatalf("%v %v %v", conn, ch, err)
	}
}

// A channel on a live broker; closing the connection closes it. A
// connection whose channel cannot open is closed.
func TestChannel(t *testing.T) {
	url := servertest.Start(t, server.Config{DataDir: t.TempDir()})
	conn, ch, err := Channel(func() (*amqp091.Connection, error) { return amqp091.Dial(url) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("amqpopen", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !ch.IsClosed() {
		t.Fatal("the channel is open after its connection closed")
	}

	// A connection already closed cannot open a channel: Channel closes
	// it and says why.
	var dialed *amqp091.Connection
	_, _, err = Channel(func() (*amqp091.Connection, error) {
		c, err := amqp091.Dial(url)
		if err == nil {
			c.Close()
		}
		dialed = c
		return c, err
	})
	if err == nil || !dialed.IsClosed() {
		t.Fatalf("channel on a closed connection: %v", err)
	}
}
