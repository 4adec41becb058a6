package clusterproc

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// queue.declare-ok and queue.delete-ok count a quorum queue as its
// leader has it, on every node, as RabbitMQ's (rabbit_quorum_queue:stat
// asks the leader): a passive declare on another node right after a
// publish is confirmed counts it, the consumers of every node are
// counted, and a delete from a node that does not lead answers the
// leader's ready messages (not the one a consumer holds). Both on a
// follower (a queue of three members) and on a node without a replica
// (a queue of two, its stand-in asks a member).
func TestQuorumCountsFromLeader(t *testing.T) {
	c := newCluster(t, 3)
	n1 := c.nodes[0]
	for _, size := range []int{3, 2} {
		name := fmt.Sprintf("counts-%d", size)
		t.Run(name, func(t *testing.T) {
			ch := c.channel(n1)
			if _, err := ch.QueueDeclare(name, true, false, false, false,
				amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": size}); err != nil {
				t.Fatal(err)
			}
			// n1 declared it and leads it; pub is a member that does
			// not lead, other the third node (a follower, or without a
			// replica).
			var members []string
			waitFor(t, waitTimeout, name+"'s members and leader", func() (bool, string) {
				members = c.queueMembers(n1, name)
				l := c.queueLeader(n1, name)
				return len(members) == size && l == "n1", fmt.Sprintf("members %v leader %q", members, l)
			})
			var pub, other *node
			for _, nd := range c.nodes[1:] {
				if pub == nil && slices.Contains(members, nd.name) {
					pub = nd
				} else {
					other = nd
				}
			}
			t.Logf("members %v: publishing on %s, counting on %s", members, pub.name, other.name)
			// Every node's management API names the leader, also the
			// one without a replica (it asks the member it forwards to).
			for _, nd := range c.nodes {
				if l := c.queueLeader(nd, name); l != "n1" {
					t.Errorf("GET /api/queues on %s: leader %q, want n1", nd.name, l)
				}
				code, body := c.mgmtCall(nd, "GET", "/api/cluster", "")
				var cl struct {
					QuorumQueues []quorumReplica `json:"quorum_queues"`
				}
				if code != 200 || json.Unmarshal([]byte(body), &cl) != nil {
					t.Fatalf("GET /api/cluster on %s: %d %s", nd.name, code, body)
				}
				i := slices.IndexFunc(cl.QuorumQueues, func(q quorumReplica) bool { return q.Name == name })
				if i < 0 || cl.QuorumQueues[i].Leader != "n1" || len(cl.QuorumQueues[i].Members) != size {
					t.Errorf("GET /api/cluster on %s: %s", nd.name, body)
				}
			}

			pch := c.channel(pub)
			if err := pch.Confirm(false); err != nil {
				t.Fatal(err)
			}
			confirms := pch.NotifyPublish(make(chan amqp091.Confirmation, 1))
			const n = 15
			for i := range n {
				if err := pch.Publish("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(fmt.Sprint("m", i))}); err != nil {
					t.Fatal(err)
				}
				select {
				case cf := <-confirms:
					if !cf.Ack {
						t.Fatalf("publish %d nacked", i)
					}
				case <-time.After(waitTimeout):
					t.Fatalf("publish %d: no confirm", i)
				}
				q, err := c.passive(other, name)
				if err != nil {
					t.Fatal(err)
				}
				if q.Messages != i+1 {
					t.Errorf("passive on %s right after the confirm of publish %d on %s: messages=%d, want %d", other.name, i+1, pub.name, q.Messages, i+1)
				}
			}

			// A consumer on pub holds one message unacknowledged.
			cch := c.channel(pub)
			if err := cch.Qos(1, 0, false); err != nil {
				t.Fatal(err)
			}
			ds, err := cch.Consume(name, "holder", false, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-ds:
			case <-time.After(waitTimeout):
				t.Fatal("no delivery to the consumer")
			}
			for _, nd := range c.nodes {
				q, err := c.passive(nd, name)
				if err != nil {
					t.Fatal(err)
				}
				if q.Messages != n-1 || q.Consumers != 1 {
					t.Errorf("passive on %s with the consumer on %s: messages=%d consumers=%d, want %d and 1", nd.name, pub.name, q.Messages, q.Consumers, n-1)
				}
			}

			// Deleted from the node that does not lead the queue: the
			// ready ones.
			dch := c.channel(other)
			got, err := dch.QueueDelete(name, false, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if got != n-1 {
				t.Errorf("delete-ok on %s: messages=%d, want %d (the ready ones)", other.name, got, n-1)
			}
		})
	}
}

// quorumReplica is a quorum queue of /api/cluster's quorum_queues.
type quorumReplica struct {
	Name    string   `json:"name"`
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
}
