package server

import (
	"errors"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
)

// A stream of another node refuses basic.get, a consumer without
// basic.qos and an automatic-ack consumer as the stream does on its own
// node (RabbitMQ's replies), not with a 541 or a get-ok.
func TestRemoteStreamRefusals(t *testing.T) {
	const qname = "remote-stream"
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	dial := func(n *replicaNode) *amqp091.Connection {
		c, err := amqp091.Dial(n.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(nodes[0]), dial(nodes[1])
	ch1, err := c1.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclare(qname, true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	// On n2 once its metadata has the stream.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ch, err := c2.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.QueueDeclarePassive(qname, false, false, false, false, nil)
		if err == nil {
			ch.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("passive declare on n2: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	refused := func(what string, op func(ch *amqp091.Channel) error, code int, reason string) {
		t.Helper()
		// A fresh connection each: 540 closes the connection.
		ch, err := dial(nodes[1]).Channel()
		if err != nil {
			t.Fatal(err)
		}
		err = op(ch)
		var ae *amqp091.Error
		if !errors.As(err, &ae) || ae.Code != code || ae.Reason != reason {
			t.Errorf("%s on n2: %v, want %d %s", what, err, code, reason)
		}
	}
	refused("basic.get", func(ch *amqp091.Channel) error { _, _, err := ch.Get(qname, false); return err },
		540, "NOT_IMPLEMENTED - basic.get not supported by stream queues queue '"+qname+"' in vhost '/'")
	refused("consume without basic.qos", func(ch *amqp091.Channel) error {
		_, err := ch.Consume(qname, "", false, false, false, false, nil)
		return err
	}, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue '"+qname+"' in vhost '/''")
	refused("automatic-ack consume", func(ch *amqp091.Channel) error {
		if err := ch.Qos(10, 0, false); err != nil {
			return err
		}
		_, err := ch.Consume(qname, "", true, false, false, false, nil)
		return err
	}, 540, "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue '"+qname+"' in vhost '/'")
}
