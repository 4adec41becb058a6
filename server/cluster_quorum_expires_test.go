package server

import (
	"errors"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// A quorum queue with x-expires that is used only through another node
// (basic.get there, forwarded to the leader) does not expire: RabbitMQ's
// quorum queue keeps its last use in the replicated state, so a use on
// any node counts. Each replica timed its own node's uses alone, and the
// declaring node, which saw none, deleted the queue and its messages.
func TestQuorumExpiresUsedThroughAnotherNode(t *testing.T) {
	const qname, expires = "qexp", 3 * time.Second
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	dial := func(n *replicaNode) *amqp091.Channel {
		c, err := amqp091.Dial(n.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	ch1 := dial(nodes[0])
	if _, err := ch1.QueueDeclare(qname, true, false, false, false, amqp091.Table{
		"x-queue-type": "quorum", "x-expires": int32(expires.Milliseconds())}); err != nil {
		t.Fatal(err)
	}
	if err := ch1.Publish("", qname, false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	ch2 := dial(nodes[1])
	// A get and a requeue on n2 every expires/10, for twice x-expires:
	// the queue is in use all along.
	deadline := time.Now().Add(2 * expires)
	gets := 0
	for time.Now().Before(deadline) {
		d, ok, err := ch2.Get(qname, false)
		if err != nil {
			t.Fatalf("get on n2 after %d gets: %v", gets, err)
		}
		if ok {
			gets++
			if err := d.Nack(false, true); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(expires / 10)
	}
	if gets == 0 {
		t.Fatal("n2 never got the message")
	}
	q, err := ch1.QueueDeclarePassive(qname, true, false, false, false, nil)
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		t.Fatalf("after %d gets through n2 in %v (x-expires %v): %v", gets, 2*expires, expires, err)
	}
	if err != nil || q.Messages != 1 {
		t.Fatalf("passive declare on n1: %+v, %v; want 1 message", q, err)
	}
}
