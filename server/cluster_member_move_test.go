package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// A quorum queue's consumers go on through membership changes of its
// node, as RabbitMQ's do: none is cancelled. A consumer on the node
// without a replica (served through a stand-in) stays when that node is
// added as a member (grow), when it is deleted again (shrink), and when
// the member its stand-in forwards to is deleted; a consumer on a member
// stays when its own node is deleted. A publisher goes on throughout:
// every message confirmed is delivered, in the order published but for
// redeliveries, and those acknowledged once are not delivered again
// unless redelivered.
func TestQuorumConsumersFollowMembershipChanges(t *testing.T) {
	const qname = "moving"
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	n1 := nodes[0]
	dial := func(n *replicaNode) *amqp091.Connection {
		c, err := amqp091.Dial(n.url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial(n1)
	ch1, err := c1.Channel()
	if err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(2)}
	if _, err := ch1.QueueDeclare(qname, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	members := func(n *replicaNode) []string {
		v := n.srv.vhost("/")
		v.mu.RLock()
		defer v.mu.RUnlock()
		if r := v.replicas[qname]; r != nil {
			return slices.Clone(r.members)
		}
		return nil
	}
	ms := members(n1)
	if len(ms) != 2 || !slices.Contains(ms, "n1") {
		t.Fatalf("members %v, want n1 and one other", ms)
	}
	var outside, other *replicaNode
	for i, n := range nodes {
		name := fmt.Sprintf("n%d", i+1)
		switch {
		case !slices.Contains(ms, name):
			outside = n
		case n != n1:
			other = n
		}
	}
	outName := outside.srv.meta.self
	waitFor(t, 10*time.Second, "a stand-in on the node without a replica", func() bool {
		_, ok := localQueue(outside.srv, qname).(*remoteQueue)
		return ok
	})

	// Consumers: one on the node without a replica, one on n1.
	type delivery struct {
		body        string
		redelivered bool
	}
	type watcher struct {
		name      string
		mu        sync.Mutex
		got       []delivery
		cancelled []string
	}
	consume := func(n *replicaNode, w *watcher) {
		ch, err := dial(n).Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Qos(20, 0, false); err != nil {
			t.Fatal(err)
		}
		cancels := ch.NotifyCancel(make(chan string, 4))
		ds, err := ch.Consume(qname, w.name, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for tag := range cancels {
				w.mu.Lock()
				w.cancelled = append(w.cancelled, tag)
				w.mu.Unlock()
			}
		}()
		go func() {
			for d := range ds {
				w.mu.Lock()
				w.got = append(w.got, delivery{string(d.Body), d.Redelivered})
				w.mu.Unlock()
				d.Ack(false)
			}
		}()
	}
	onOutside := &watcher{name: "on-" + outName}
	onN1 := &watcher{name: "on-n1"}
	consume(outside, onOutside)
	consume(n1, onN1)

	// A publisher on the third node... on the member that stays: other.
	pubCh, err := dial(other).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := pubCh.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var pmu sync.Mutex
	var confirmed []string
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				pubDone <- nil
				return
			default:
			}
			b := fmt.Sprintf("m-%06d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			dc, err := pubCh.PublishWithDeferredConfirmWithContext(ctx, "", qname, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)})
			if err == nil {
				var ok bool
				if ok, err = dc.WaitContext(ctx); err == nil && ok {
					pmu.Lock()
					confirmed = append(confirmed, b)
					pmu.Unlock()
				}
			}
			cancel()
			if err != nil {
				pubDone <- fmt.Errorf("publish %s: %w", b, err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	count := func(w *watcher) int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.got)
	}
	// progress waits until both consumers got more deliveries.
	progress := func(what string) {
		t.Helper()
		a, b := count(onOutside), count(onN1)
		waitFor(t, 20*time.Second, "both consumers get deliveries "+what, func() bool {
			return count(onOutside) >= a+20 && count(onN1) >= b+20
		})
	}
	progress("before any change")

	change := func(add bool, node string) {
		t.Helper()
		var err error
		waitFor(t, 10*time.Second, "the change is made", func() bool {
			if add {
				err = other.srv.AddQuorumMember("/", qname, node)
			} else {
				err = other.srv.DeleteQuorumMember("/", qname, node)
			}
			// A node is running for the others once they heard from it.
			return !errors.Is(err, ErrNodeNotRunning)
		})
		if err != nil {
			t.Fatalf("add %v %s: %v", add, node, err)
		}
		waitFor(t, 10*time.Second, "every node applies the change", func() bool {
			for _, n := range nodes {
				if slices.Contains(members(n), node) != add {
					return false
				}
			}
			return true
		})
	}

	// The node without a replica gets one: its consumer moves from the
	// stand-in to it.
	change(true, outName)
	waitFor(t, 20*time.Second, "a replica on "+outName, func() bool {
		_, ok := localQueue(outside.srv, qname).(*quorum.Queue)
		return ok
	})
	progress("after " + outName + " was added")

	// Its replica is deleted again: the consumer moves to a stand-in.
	change(false, outName)
	waitFor(t, 20*time.Second, "a stand-in on "+outName, func() bool {
		_, ok := localQueue(outside.srv, qname).(*remoteQueue)
		return ok
	})
	progress("after " + outName + " was deleted")

	// n1 is deleted: its own consumer moves to a stand-in, and the
	// stand-in on the node without a replica, if it forwarded to n1,
	// moves to one that forwards to the member left.
	change(true, outName)
	change(false, "n1")
	waitFor(t, 20*time.Second, "a stand-in on n1", func() bool {
		_, ok := localQueue(n1.srv, qname).(*remoteQueue)
		return ok
	})
	progress("after n1 was deleted")
	change(false, outName)
	progress("after " + outName + " was deleted again")

	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	pmu.Lock()
	want := slices.Clone(confirmed)
	pmu.Unlock()
	missing := func() []string {
		seen := map[string]bool{}
		for _, w := range []*watcher{onOutside, onN1} {
			w.mu.Lock()
			for _, d := range w.got {
				seen[d.body] = true
			}
			w.mu.Unlock()
		}
		var out []string
		for _, b := range want {
			if !seen[b] {
				out = append(out, b)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		for _, w := range []*watcher{onOutside, onN1} {
			w.mu.Lock()
			t.Logf("%s: %d deliveries, cancelled %v", w.name, len(w.got), w.cancelled)
			w.mu.Unlock()
		}
		t.Fatalf("%d of %d confirmed messages never delivered: %v", len(m), len(want), m[:min(len(m), 20)])
	}
	for _, w := range []*watcher{onOutside, onN1} {
		w.mu.Lock()
		if len(w.cancelled) > 0 {
			t.Errorf("consumer %s cancelled: %v", w.name, w.cancelled)
		}
		// In order but for redeliveries; nothing twice unless redelivered.
		last, dup, outOfOrder, redelivered := -1, 0, 0, 0
		seen := map[string]bool{}
		for _, d := range w.got {
			n, _ := strconv.Atoi(strings.TrimPrefix(d.body, "m-"))
			if d.redelivered {
				redelivered++
			} else {
				if seen[d.body] {
					dup++
				}
				if n < last {
					outOfOrder++
				}
				last = n
			}
			seen[d.body] = true
		}
		t.Logf("%s: %d deliveries, %d redelivered", w.name, len(w.got), redelivered)
		if dup > 0 || outOfOrder > 0 {
			t.Errorf("%s: %d delivered twice without the redelivered flag, %d out of order", w.name, dup, outOfOrder)
		}
		w.mu.Unlock()
	}
	t.Logf("%d confirmed", len(want))
}

// consumerQueue is the queue object the consumer tag of a client
// connection of s consumes from (nil: no such consumer).
func consumerQueue(s *Server, tag string) queue.Queue {
	for _, c := range s.clientConns() {
		for _, k := range consumerSnapshot(c) {
			if k.tag == tag {
				return k.queue()
			}
		}
	}
	return nil
}

// A consumer on a node without a replica of a quorum queue goes on when
// the member its stand-in forwards to stops: it moves to a stand-in that
// forwards to a running member (RabbitMQ's consumer stays too), and every
// message confirmed is delivered to it.
func TestQuorumStandInConsumerFollowsToRunningMember(t *testing.T) {
	const qname = "follow"
	// A node that stops within startGrace of a leader's start may be
	// taken for running until then (it was never seen up): not what is
	// tested here.
	old := startGrace
	startGrace = time.Second
	t.Cleanup(func() { startGrace = old }) // after the nodes stop
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil, nil})
	dial := func(n *replicaNode) *amqp091.Channel { return n.channel(t) }
	ch1 := dial(nodes[0])
	args := amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(3)}
	if _, err := ch1.QueueDeclare(qname, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	var outside *replicaNode
	waitFor(t, 10*time.Second, "a stand-in on the node without a replica", func() bool {
		for _, n := range nodes {
			if _, ok := localQueue(n.srv, qname).(*remoteQueue); ok {
				outside = n
				return true
			}
		}
		return false
	})
	home := localQueue(outside.srv, qname).(*remoteQueue).home
	var homeNode, pubNode *replicaNode
	for _, n := range nodes {
		switch {
		case n.srv.meta.self == home:
			homeNode = n
		case n != outside && pubNode == nil:
			pubNode = n
		}
	}

	cons := dial(outside)
	if err := cons.Qos(20, 0, false); err != nil {
		t.Fatal(err)
	}
	cancels := cons.NotifyCancel(make(chan string, 1))
	ds, err := cons.Consume(qname, "follower", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]int{}
	var order []string // not redelivered, in arrival order
	go func() {
		for d := range ds {
			mu.Lock()
			got[string(d.Body)]++
			if !d.Redelivered {
				order = append(order, string(d.Body))
			}
			mu.Unlock()
			d.Ack(false)
		}
	}()
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}

	pub := dial(pubNode)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var confirmed []string
	publish := func(prefix string, n int) {
		var bodies []string
		for i := range n {
			bodies = append(bodies, fmt.Sprintf("%s-%04d", prefix, i))
		}
		confirmed = append(confirmed, publishConfirmed(t, pub, qname, bodies)...)
	}
	publish("a", 100)
	waitFor(t, 20*time.Second, "the first messages delivered through the stand-in", func() bool { return delivered() >= 100 })

	start := time.Now()
	homeNode.stop(t)
	t.Logf("%s stopped in %v", home, time.Since(start))
	waitFor(t, 30*time.Second, "the consumer moves to a stand-in forwarding to a running member", func() bool {
		rq, ok := consumerQueue(outside.srv, "follower").(*remoteQueue)
		return ok && rq.home != home
	})
	t.Logf("moved %v after the stop began", time.Since(start))
	publish("b", 100)
	t.Logf("published %v after the stop began", time.Since(start))
	waitFor(t, 30*time.Second, "every confirmed message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range confirmed {
			if got[b] == 0 {
				return false
			}
		}
		return true
	})
	select {
	case tag := <-cancels:
		t.Fatalf("consumer %s cancelled", tag)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSorted(order) {
		t.Errorf("deliveries not redelivered came out of order: %v", order)
	}
	t.Logf("%d confirmed, %d delivered", len(confirmed), len(got))
}

// delete_member of the node a consumer's replica is on leaves that
// consumer what it was delivered, as RabbitMQ does: nothing it holds
// unacknowledged is delivered again, to it or to another consumer; its
// acknowledgements after the move settle those messages, and what it
// still holds when its node restarts comes back then, redelivered.
func TestQuorumDeleteMemberKeepsDeliveries(t *testing.T) {
	const qname = "keep"
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	pub := n1.channel(t)
	if _, err := pub.QueueDeclare(qname, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(bodies ...string) {
		t.Helper()
		for _, b := range bodies {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", qname, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)})
			if err == nil {
				var ok bool
				if ok, err = dc.WaitContext(ctx); err == nil && !ok {
					err = errors.New("nacked")
				}
			}
			cancel()
			if err != nil {
				t.Fatalf("publish %s: %v", b, err)
			}
		}
	}
	waitFor(t, 10*time.Second, "a replica on n3", func() bool {
		_, ok := localQueue(n3.srv, qname).(*quorum.Queue)
		return ok
	})
	type got struct {
		d    amqp091.Delivery
		from string
	}
	deliveries := make(chan got, 100)
	consume := func(n *replicaNode, tag string) {
		ch := n.channel(t)
		if err := ch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume(qname, tag, false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for d := range ds {
				deliveries <- got{d, tag}
			}
		}()
	}
	next := func(what string) got {
		t.Helper()
		select {
		case g := <-deliveries:
			return g
		case <-time.After(20 * time.Second):
			t.Fatalf("no delivery within 20s: %s", what)
		}
		return got{}
	}
	consume(n3, "on-n3")
	publish("m0", "m1", "m2", "m3", "m4")
	held := map[string]amqp091.Delivery{}
	for range 5 {
		g := next("m0 to m4 on n3")
		held[string(g.d.Body)] = g.d
	}
	consume(n2, "on-n2")

	var err error
	waitFor(t, 10*time.Second, "delete_member n3", func() bool {
		err = n1.srv.DeleteQuorumMember("/", qname, "n3")
		return !errors.Is(err, ErrNodeNotRunning)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a stand-in on n3", func() bool {
		_, ok := localQueue(n3.srv, qname).(*remoteQueue)
		return ok
	})

	// What comes next goes to the two consumers; nothing n3's holds
	// comes again.
	publish("m5", "m6", "m7", "m8", "m9")
	for range 5 {
		g := next("m5 to m9")
		if g.d.Redelivered || held[string(g.d.Body)].Body != nil {
			t.Fatalf("%s got %s (redelivered %v) after n3's replica went: n3's consumer holds m0 to m4", g.from, g.d.Body, g.d.Redelivered)
		}
		if err := g.d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"m0", "m1", "m2"} {
		if err := held[b].Ack(false); err != nil {
			t.Fatalf("ack %s on n3 after the move: %v", b, err)
		}
	}
	leader := func() *quorum.Queue {
		for _, n := range nodes {
			if q, ok := localQueue(n.srv, qname).(*quorum.Queue); ok && q.Leads() {
				return q
			}
		}
		return nil
	}
	var lq *quorum.Queue
	waitFor(t, 20*time.Second, "n3's acks of m0 to m2 applied by the leader", func() bool {
		lq = leader()
		if lq == nil {
			return false
		}
		st := lq.Stats()
		return st.Ready == 0 && st.Unacked == 2
	})

	// The leader's question to a node that is not a voter (askOrphans,
	// over "quorum.holds"): n3 still holds its kept consumer, and no
	// key it never had (once its replica has finished leaving: until
	// then it claims every key).
	var kept uint64
	for _, h := range lq.ConsumerHolds() {
		if h.Node == "n3" {
			kept = h.Key
		}
	}
	if kept == 0 {
		t.Fatalf("no consumer of n3 in the leader's machine: %+v", lq.ConsumerHolds())
	}
	var holds []uint64
	waitFor(t, 20*time.Second, "n3 to hold its kept consumer alone", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := n1.srv.cluster.Call(ctx, "n3", "quorum.holds", encodeUint64s([]uint64{lq.GroupID(), kept, kept + 1}))
		if err != nil {
			t.Fatalf("quorum.holds to n3: %v", err)
		}
		if holds, err = decodeUint64s(resp); err != nil {
			t.Fatal(err)
		}
		return len(holds) == 1 && holds[0] == kept
	})

	// n3 restarts (as its peers see it): m3 and m4, still held by its
	// consumer of before, come back.
	for _, n := range []*replicaNode{n1, n2} {
		if q, ok := localQueue(n.srv, qname).(*quorum.Queue); ok && q == lq {
			n.srv.peerRestarted("n3")
		}
	}
	again := map[string]bool{}
	for range 2 {
		g := next("m3 and m4 again")
		if !g.d.Redelivered || (string(g.d.Body) != "m3" && string(g.d.Body) != "m4") {
			t.Fatalf("%s got %s (redelivered %v), want m3 or m4 redelivered", g.from, g.d.Body, g.d.Redelivered)
		}
		again[string(g.d.Body)] = true
		g.d.Ack(false)
	}
	if len(again) != 2 {
		t.Fatalf("redelivered %v, want m3 and m4", again)
	}
}
