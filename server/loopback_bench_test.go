package server_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// BenchmarkLoopbackPublishConsume publishes transient messages on one
// connection and consumes them with no-ack on another, over loopback, with
// an unmodified client. One op is one message published and received.
func BenchmarkLoopbackPublishConsume(b *testing.B) {
	url := servertest.Start(b, server.Config{})
	pc, err := amqp091.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	cc, err := amqp091.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	pch, _ := pc.Channel()
	cch, _ := cc.Channel()
	q, err := cch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	deliveries, err := cch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			if err := pch.Publish("", q.Name, false, false, amqp091.Publishing{Body: body}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	timeout := time.After(time.Minute)
	for i := 0; i < b.N; i++ {
		select {
		case <-deliveries:
		case <-timeout:
			b.Fatalf("received %d of %d within a minute", i, b.N)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
