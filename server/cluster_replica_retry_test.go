package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/amqpopen"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue/quorum"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// replicaNode is one in-process node of a test cluster.
type replicaNode struct {
	srv    *Server
	url    string
	cancel context.CancelFunc
	done   chan error
}

// stop shuts the node down and waits for it; stopping twice is harmless.
func (n *replicaNode) stop(t *testing.T) {
	if n.cancel == nil {
		return
	}
	n.cancel()
	if err := <-n.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	n.cancel = nil
}

// channel opens a channel on a connection of its own to n, closed when
// the test ends.
func (n *replicaNode) channel(t *testing.T) *amqp091.Channel {
	t.Helper()
	c, ch, err := amqpopen.Channel(func() (*amqp091.Connection, error) { return amqp091.Dial(n.url) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ch
}

// lockedBuf collects the nodes' logs, shown only when the test fails.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// startReplicaCluster starts len(hooks) nodes n1, n2, ... on loopback,
// together (each waits in Listen for the metadata to catch up), node i
// with openReplicaHook hooks[i] (nil: none). They stop when the test
// ends.
func startReplicaCluster(t *testing.T, hooks []func(vhost, name string) error) []*replicaNode {
	t.Helper()
	addrs := testaddr.FreeN(t, len(hooks))
	logs := &lockedBuf{}
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("node logs (warnings and errors):\n%s", logs.b.String())
			logs.mu.Unlock()
		}
	})
	nodes := make([]*replicaNode, len(hooks))
	errs := make([]error, len(hooks))
	var wg sync.WaitGroup
	for i := range hooks {
		name := fmt.Sprintf("n%d", i+1)
		log := zerolog.New(logs).Level(zerolog.WarnLevel).With().Str("node", name).Logger()
		srv, err := New(Config{
			Listen:  "127.0.0.1:0",
			DataDir: t.TempDir(),
			Log:     &log,
			// No resource alarm of this shared machine may block a
			// publisher.
			MemoryHighWatermarkBytes: 1 << 50,
			DiskFreeLimit:            1,
			Cluster:                  cluster.Config{NodeName: name, Listen: addrs[i], Seeds: addrs, Secret: "s3cret-s3cret"},
			hooks:                    testhooks.Hooks{Store: persist.NewMemory()},
		})
		if err != nil {
			t.Fatal(err)
		}
		srv.openReplicaHook = hooks[i]
		nodes[i] = &replicaNode{srv: srv}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = srv.Listen()
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if errs[i] != nil {
			for _, m := range nodes {
				m.srv.Close()
			}
			t.Fatalf("node %d: listen: %v", i+1, errs[i])
		}
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel, n.done = cancel, make(chan error, 1)
		n.url = fmt.Sprintf("amqp://guest:guest@%s/", n.srv.Addr())
		go func() { n.done <- n.srv.Serve(ctx) }()
		t.Cleanup(func() { n.stop(t) })
	}
	return nodes
}

// localQueue is what node s serves the queue name of vhost / with: its
// replica (*quorum.Queue) or a stand-in (*remoteQueue).
func localQueue(s *Server, name string) any {
	v := s.vhost("/")
	if v == nil {
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name]
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishConfirmed publishes bodies to the queue on ch (in confirm mode)
// and returns those confirmed (acked).
func publishConfirmed(t *testing.T, ch *amqp091.Channel, queue string, bodies []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	dcs := make([]*amqp091.DeferredConfirmation, len(bodies))
	for i, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)})
		if err != nil {
			t.Fatalf("publish %s: %v", b, err)
		}
		dcs[i] = dc
	}
	var ok []string
	for i, dc := range dcs {
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			t.Fatalf("confirm of %s: %v", bodies[i], err)
		}
		if acked {
			ok = append(ok, bodies[i])
		}
	}
	return ok
}

// A member whose replica of a quorum queue did not open serves the queue
// through a stand-in (publish with confirms, consume), asks again at most
// once per replicaRetrySpacing, and once the open succeeds has a replica
// in the stand-in's place (to which the stand-in's consumers move;
// publishes go on) that caught up: with the first node stopped
// it delivers every message confirmed and not acknowledged before, and
// none acknowledged.
func TestQuorumReplicaRetriedAfterFailedOpen(t *testing.T) {
	// The spacing is three reconciliations (quorumReconcile), so that a
	// retry spaced by the reconcile period alone would show.
	const spacing = 3 * quorumReconcile
	old := replicaRetrySpacing
	replicaRetrySpacing = spacing
	t.Cleanup(func() { replicaRetrySpacing = old }) // after the nodes stop (cleanups run last first)

	const qname = "retried"
	errInjected := errors.New("injected: replica open fails")
	var failing atomic.Bool
	failing.Store(true)
	var attemptsMu sync.Mutex
	var attempts []time.Time // every open of n3's replica, and whether it failed
	var failed []bool
	hook := func(_, name string) error {
		if name != qname {
			return nil
		}
		f := failing.Load()
		attemptsMu.Lock()
		attempts, failed = append(attempts, time.Now()), append(failed, f)
		attemptsMu.Unlock()
		if f {
			return errInjected
		}
		return nil
	}
	snapshot := func() ([]time.Time, []bool) {
		attemptsMu.Lock()
		defer attemptsMu.Unlock()
		return append([]time.Time(nil), attempts...), append([]bool(nil), failed...)
	}
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, hook})
	n1, n3 := nodes[0], nodes[2]

	// Declared from n1 with a member on every node.
	c1, err := amqp091.Dial(n1.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	ch1, err := c1.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.QueueDeclare(qname, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(3)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "n3 applies the declaration with a stand-in", func() bool {
		_, ok := localQueue(n3.srv, qname).(*remoteQueue)
		return ok
	})
	v3 := n3.srv.vhost("/")
	v3.mu.RLock()
	members := append([]string(nil), v3.replicas[qname].members...)
	v3.mu.RUnlock()
	if len(members) != 3 {
		t.Fatalf("members %v, want all three nodes", members)
	}
	if a, _ := snapshot(); len(a) == 0 {
		t.Fatal("n3 has a stand-in without having tried to open its replica")
	}

	// Through the stand-in: publishes confirmed, and consumed.
	c3, err := amqp091.Dial(n3.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	pub, err := c3.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range 60 {
		bodies = append(bodies, fmt.Sprintf("m-%03d", i))
	}
	confirmed := publishConfirmed(t, pub, qname, bodies[:40])
	if len(confirmed) != 40 {
		t.Fatalf("%d of 40 publishes through the stand-in confirmed", len(confirmed))
	}
	acked := map[string]bool{}
	{
		ch, err := c3.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Qos(5, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume(qname, "first", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		timeout := time.After(15 * time.Second)
		for len(acked) < 20 {
			select {
			case d, ok := <-ds:
				if !ok {
					t.Fatal("consumer on the stand-in cancelled")
				}
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
				acked[string(d.Body)] = true
			case <-timeout:
				t.Fatalf("through the stand-in: %d of 20 deliveries", len(acked))
			}
		}
		// The acks are sent before the close, on the same channel: the
		// unacknowledged ones go back to the queue.
		ch.Close()
	}
	confirmed = append(confirmed, publishConfirmed(t, pub, qname, bodies[40:])...)
	if len(confirmed) != 60 {
		t.Fatalf("%d of 60 publishes through the stand-in confirmed", len(confirmed))
	}

	// A consumer on the stand-in while the replica opens, holding
	// unacknowledged deliveries.
	held, err := c3.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	heldDs, err := held.Consume(qname, "held", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		select {
		case <-heldDs:
		case <-time.After(15 * time.Second):
			t.Fatal("no delivery to the consumer on the stand-in")
		}
	}

	// Retries: the first one at the next reconciliation, then at most one
	// per spacing. The gaps are measured between the opens, each of which
	// lags its retry's decision by the retry's proposal through the
	// metadata group: a reconciliation's period of slack is left for that
	// (without the spacing, a retry would come every reconciliation).
	waitFor(t, 10*spacing, "n3 tries to open its replica 3 times after the first", func() bool {
		a, _ := snapshot()
		return len(a) >= 4
	})
	a, _ := snapshot()
	for i := 2; i < len(a); i++ {
		if gap := a[i].Sub(a[i-1]); gap < spacing-quorumReconcile {
			t.Fatalf("retry %d came %v after the one before, spacing %v", i, gap, spacing)
		}
	}
	if _, ok := localQueue(n3.srv, qname).(*remoteQueue); !ok {
		t.Fatalf("n3 serves the queue with %T while its replica fails to open", localQueue(n3.srv, qname))
	}

	// A publisher on n3 goes on through the replacement of its stand-in:
	// whatever is confirmed must be delivered at the end.
	stopPub := make(chan struct{})
	pubDone := make(chan error, 1)
	var during []string // the publisher's, read after pubDone
	var published atomic.Int64
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				pubDone <- nil
				return
			default:
			}
			b := fmt.Sprintf("d-%04d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", qname, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(b)})
			if err == nil {
				var ok bool
				ok, err = dc.WaitContext(ctx)
				if err == nil && !ok {
					err = fmt.Errorf("%s nacked", b)
				}
			}
			cancel()
			if err != nil {
				pubDone <- fmt.Errorf("publish %s while the replica opens: %w", b, err)
				return
			}
			during = append(during, b)
			published.Add(1)
			time.Sleep(5 * time.Millisecond) // a steady trickle, not a flood
		}
	}()

	// The open succeeds at the next retry: n3 has a replica, a voter of
	// the group that caught up with n1's.
	failing.Store(false)
	waitFor(t, 3*spacing+10*time.Second, "n3 opens its replica of the queue", func() bool {
		_, ok := localQueue(n3.srv, qname).(*quorum.Queue)
		return ok
	})
	// A few publishes through the new replica, then the publisher stops.
	n := published.Load()
	waitFor(t, 10*time.Second, "publishes go on on n3 once its replica is open", func() bool {
		select {
		case err := <-pubDone:
			pubDone <- err
			return true
		default:
		}
		return published.Load() >= n+20
	})
	close(stopPub)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	confirmed = append(confirmed, during...)
	t.Logf("%d publishes confirmed on n3 while its replica opened", len(during))

	q1, ok := localQueue(n1.srv, qname).(*quorum.Queue)
	if !ok {
		t.Fatalf("n1 serves the queue with %T", localQueue(n1.srv, qname))
	}
	// Caught up: the same messages, ready and checked out. (Not raft's
	// applied index: a follower learns that the leader's last entry, its
	// nudge's barrier, is committed only a commit timeout later, and the
	// barrier changes nothing.)
	var rs quorum.ReplicaState
	waitFor(t, 15*time.Second, "n3's replica catches up with n1's", func() bool {
		q3 := localQueue(n3.srv, qname).(*quorum.Queue)
		rs = q3.Replica()
		s1, s3 := q1.Stats(), q3.Stats()
		return rs.Leader != "" && len(rs.Members) == 3 && s1.Ready == s3.Ready && s1.Unacked == s3.Unacked
	})
	t.Logf("n3's replica: %+v (n1's: %+v)", rs, q1.Replica())

	// The stand-in's consumer moves to the replica, not cancelled; what
	// it holds goes back to the queue when its channel closes.
	waitFor(t, 10*time.Second, "the stand-in's consumer moves to n3's replica", func() bool {
		_, ok := consumerQueue(n3.srv, "held").(*quorum.Queue)
		return ok
	})
	held.Close()
	for range heldDs {
	}

	// n3's replica serves without n1: n3 is a voter that has every
	// message confirmed and not acknowledged.
	n1.stop(t)
	want := map[string]bool{}
	for _, b := range confirmed {
		if !acked[b] {
			want[b] = true
		}
	}
	got := map[string]bool{}
	again := 0
	ch, err := c3.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(qname, "after", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for missing := len(want); missing > 0; {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatal("consumer on n3's replica cancelled")
			}
			b := string(d.Body)
			if acked[b] {
				again++
			} else if want[b] && !got[b] {
				got[b] = true
				missing--
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			var lost []string
			for b := range want {
				if !got[b] {
					lost = append(lost, b)
				}
			}
			t.Fatalf("lost %d confirmed messages (delivered %d of %d): %v", len(lost), len(got), len(want), lost)
		}
	}
	if again > 0 {
		t.Errorf("%d messages acknowledged through the stand-in delivered again", again)
	}

	// Once the replica is open, n3 stops asking.
	a, f := snapshot()
	if f[len(f)-1] || len(a) > 1 && !f[len(f)-2] {
		t.Fatalf("opens of n3's replica (failed: %v): the last one should be the only one that succeeded", f)
	}
}

// The declaring node, the new queue's first leader, fails to open its
// replica: it asks the other members to bootstrap the group at once
// (quorum.bootstrap), instead of their waiting for it (ten minutes here,
// so that the publish below could not be confirmed without the ask).
// Publishes through it are confirmed by the group the others formed.
func TestQuorumFirstLeaderFailedOpenAsksMembers(t *testing.T) {
	old := quorumBootstrapWait
	quorumBootstrapWait = 10 * time.Minute
	t.Cleanup(func() { quorumBootstrapWait = old })
	const qname = "firstfails"
	hook := func(_, name string) error {
		if name == qname {
			return errors.New("injected: replica open fails")
		}
		return nil
	}
	nodes := startReplicaCluster(t, []func(string, string) error{hook, nil, nil})
	c1, err := amqp091.Dial(nodes[0].url)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	ch, err := c1.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(qname, true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(3)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := localQueue(nodes[0].srv, qname).(*remoteQueue); !ok {
		t.Fatalf("n1 serves %s with %T, want a stand-in (its replica did not open)", qname, localQueue(nodes[0].srv, qname))
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if got := publishConfirmed(t, ch, qname, []string{"m"}); len(got) != 1 {
		t.Fatal("a publish through n1 was not confirmed: n2 and n3 did not bootstrap the group")
	}
	waitFor(t, 10*time.Second, "n2 or n3 leads", func() bool {
		for _, n := range nodes[1:] {
			if q, ok := localQueue(n.srv, qname).(*quorum.Queue); ok && q.Leads() {
				return true
			}
		}
		return false
	})
}
