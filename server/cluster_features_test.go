package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/queue/quorum"
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
			if !n.srv.meta.hasFeature(quorum.FeatureFifoRules, all) {
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

// A node of an earlier build, without a feature every member of a quorum
// queue has, is refused as a new member of it (add_member, grow): its
// replica would apply the group's log by the earlier rules. Upgraded, it
// is taken.
func TestAddMemberRefusesNodeWithoutTheMembersFeatures(t *testing.T) {
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	all := []string{"n1", "n2", "n3"}
	waitFor(t, 10*time.Second, "every node knows every node's features", func() bool {
		return nodes[0].srv.meta.hasFeature(quorum.FeatureFifoRules, all)
	})
	c, err := amqp091.Dial(nodes[0].url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("two", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(2)}); err != nil {
		t.Fatal(err)
	}
	_, r, err := nodes[0].srv.quorumRecord("/", "two")
	if err != nil {
		t.Fatal(err)
	}
	var outside string
	for _, n := range all {
		if !slices.Contains(r.members, n) {
			outside = n
		}
	}
	srv := nodes[0].srv
	waitFor(t, 10*time.Second, outside+" running as n1 sees it", func() bool {
		_, up := srv.running(outside)
		return up
	})
	srv.meta.setFeatures(outside, nil) // as an earlier build's node.started has none
	err = srv.AddQuorumMember("/", "two", outside)
	if !errors.Is(err, ErrNodeLacksFeature) || !strings.Contains(err.Error(), quorum.FeatureFifoRules) {
		t.Fatalf("add_member of %s without %s: %v, want ErrNodeLacksFeature naming it", outside, quorum.FeatureFifoRules, err)
	}
	changes, err := srv.GrowQuorum(outside, ".*", ".*", false)
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0].Result, "node_lacks_feature") {
		t.Fatalf("grow onto %s: %+v %v, want the queue refused", outside, changes, err)
	}
	if _, r, _ := srv.quorumRecord("/", "two"); len(r.members) != 2 {
		t.Fatalf("members after the refusals: %v", r.members)
	}
	srv.meta.setFeatures(outside, nodeFeatures)
	if err := srv.AddQuorumMember("/", "two", outside); err != nil {
		t.Fatalf("add_member of the upgraded %s: %v", outside, err)
	}
}
