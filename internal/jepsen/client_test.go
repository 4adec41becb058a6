package jepsen

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A consumer's session that the broker ends says how: a basic.cancel
// (its queue deleted) and a connection closed by the broker are told
// apart, with the broker's reason.
func TestConsumerSessionEnding(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	url := b.URL()
	target := Target{Node: "n1", Dial: func() (*amqp091.Connection, error) { return amqp091.Dial(url) }}
	conn, ch, err := target.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &Consumer{Name: "c1", Queue: "jq", Prefetch: 1, History: &History{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// session runs c's session and returns how it ended once the
	// consumer is on the queue and end has run.
	session := func(end func()) error {
		t.Helper()
		if _, err := ch.QueueDeclare("jq", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.session(ctx, target) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			q, err := ch.QueueDeclarePassive("jq", false, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q.Consumers == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the consumer did not start within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		end()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			t.Fatal("the session did not end")
			return nil
		}
	}

	err = session(func() {
		if _, err := ch.QueueDelete("jq", false, false, false); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), `consumer "c1" cancelled by the broker`) {
		t.Fatalf("after its queue's deletion the session ended with %v", err)
	}

	err = session(func() {
		// The operator closes the session's connection (the newest).
		newest := b.Server().Connections()[0]
		for _, ci := range b.Server().Connections() {
			if ci.ID > newest.ID {
				newest = ci
			}
		}
		if err := b.Server().CloseConnection(newest.Name, "closed by the test"); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "closed by the test") {
		t.Fatalf("after the broker closed its connection the session ended with %v", err)
	}
}
