package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// Every node of a cluster learns the others' features from their
// node.started commands, and a quorum queue whose members all have
// fifoRules follows rabbit_fifo's reject-publish: the message that takes
// the queue over x-max-length is taken, the next one refused.
func TestClusterFeaturesTurnFifoRulesOn(t *testing.T) {
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	all := []string{"n1", "n2", "n3"}
	waitFor(t, 10*time.Second, "every node knows every node's features", func() bool {
		for _, n := range nodes {
			if !n.srv.meta.hasFeature(featureFifoRules, all) {
				return false
			}
		}
		return true
	})
	c, err := amqp091.Dial(nodes[1].url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "quorum", "x-max-length": int32(2), "x-overflow": "reject-publish"}
	if _, err := ch.QueueDeclare("limited", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "limited", false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		ok, err := dc.WaitContext(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ok)
	}
	if want := []bool{true, true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("confirms %v, want %v (RabbitMQ 3.10: ack, ack, ack, nack)", got, want)
	}
}
