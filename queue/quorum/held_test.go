package quorum_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// gate is a consumer whose connection can be full: shut, it refuses.
type gate struct {
	mu    sync.Mutex
	shut  bool
	noAck bool
	got   []string
}

func (g *gate) Deliver(_ queue.Queue, e queue.Entry, _ any) queue.Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return queue.Refused
	}
	g.got = append(g.got, string(e.Msg.Body))
	if g.noAck {
		return queue.Settled
	}
	return queue.Pending
}

// RefusedBusy implements queue.Busy: shut, it is a full connection.
func (g *gate) RefusedBusy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shut
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
}

func (g *gate) bodies() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

// gatedQueue is a quorum queue on one node with g attached as consumer
// "c" with o's options.
func gatedQueue(t *testing.T, g *gate, o queue.ConsumeOptions) *quorum.Queue {
	t.Helper()
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir()})
	t.Cleanup(func() { typ.Close() })
	x, err := typ.New(queue.Decl{VHost: "/", Name: "held", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	o.Tag, o.Consumer = "c", g
	if err := q.AddConsumer(o); err != nil {
		t.Fatal(err)
	}
	return q
}

// A consumer with a prefetch that refuses (its connection's outbound
// buffer is full) keeps what it refused and what comes after it, still
// checked out to it, and a Kick offers them again in the queue's order:
// nothing goes back to the queue through the log, where the messages
// checked out meanwhile overtook it. Cancelled while it holds some,
// they go back to the queue, not redelivered.
func TestRefusedHeldInOrder(t *testing.T) {
	g := &gate{}
	q := gatedQueue(t, g, queue.ConsumeOptions{Prefetch: 100})
	var want []string
	pub := func(from, to int) {
		for i := from; i < to; i++ {
			publishWait(t, q, fmt.Sprint(i))
			want = append(want, fmt.Sprint(i))
		}
		if err := q.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	pub(0, 5)
	g.set(true)
	pub(5, 15)
	if st := q.Stats(); st.Ready != 0 || st.Unacked != 15 {
		t.Fatalf("refused deliveries: %+v, want all 15 still checked out to the consumer", st)
	}
	if got := g.bodies(); !slices.Equal(got, want[:5]) {
		t.Fatalf("before the refusals: %v", got)
	}
	g.set(false)
	q.Kick(nil)
	pub(15, 20)
	if got := g.bodies(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}

	// Refused again, then cancelled: what it held goes back, in order.
	g.set(true)
	pub(20, 25)
	q.RemoveConsumer("c", g)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 25; i++ {
		e, _, ok := q.Get(true)
		if !ok {
			t.Fatalf("get %d after the cancel: empty", i)
		}
		if string(e.Msg.Body) != fmt.Sprint(i) || e.Redelivered {
			t.Fatalf("get %d after the cancel: %q redelivered=%v", i, e.Msg.Body, e.Redelivered)
		}
	}
}

// A consumer without a prefetch (here no-ack) that refuses while busy
// keeps what it refused too, and is blocked in the machine until the
// Kick that delivers it: what comes meanwhile stays ready, and arrives
// after it, in order.
func TestRefusedHeldUnboundedInOrder(t *testing.T) {
	g := &gate{noAck: true}
	q := gatedQueue(t, g, queue.ConsumeOptions{NoAck: true})
	var want []string
	for i := range 12 {
		if i == 3 {
			g.set(true)
		}
		publishWait(t, q, fmt.Sprint(i))
		want = append(want, fmt.Sprint(i))
	}
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Ready+st.Unacked != 9 || st.Ready < 8 {
		t.Fatalf("after refusals: %+v, want 9 not delivered, at most the first refused checked out", st)
	}
	g.set(false)
	q.Kick(nil)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := g.bodies(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Ready != 0 || st.Unacked != 0 {
		t.Fatalf("after the Kick: %+v, want nothing left", st)
	}
}

// A consumer without a prefetch that attaches to a backlog while busy
// holds at most unlimitedCredit of it (its credit in the machine, as
// RabbitMQ's 2000); the rest comes after, in order.
func TestRefusedHeldUnboundedBounded(t *testing.T) {
	t.Cleanup(quorum.SetUnlimitedCredit(10))
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir()})
	t.Cleanup(func() { typ.Close() })
	x, err := typ.New(queue.Decl{VHost: "/", Name: "backlog", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	var want []string
	for i := range 50 {
		publishWait(t, q, fmt.Sprint(i))
		want = append(want, fmt.Sprint(i))
	}
	g := &gate{noAck: true, shut: true}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: g, NoAck: true}); err != nil {
		t.Fatal(err)
	}
	q.Kick(nil)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := quorum.HeldLen(q, "c"); n != 10 {
		t.Fatalf("the busy consumer holds %d, want 10 (its credit)", n)
	}
	if st := q.Stats(); st.Ready+st.Unacked != 50 || st.Unacked != 10 {
		t.Fatalf("after the refusals: %+v, want 40 ready and the 10 held checked out", st)
	}
	// A prefetch-0 consumer with acks is given as much.
	g2 := &gate{shut: true}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "c2", Consumer: g2}); err != nil {
		t.Fatal(err)
	}
	q.Kick(nil)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Unacked != 20 {
		t.Fatalf("with a second consumer without a prefetch: %+v, want 20 checked out", st)
	}
	q.RemoveConsumer("c2", g2)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	g.set(false)
	q.Kick(nil)
	// The rest comes as its deliveries are settled (no-ack: at once).
	waitUntil(t, "every message delivered", func() bool { return len(g.bodies()) >= len(want) })
	if got := g.bodies(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// A consumer cancelled (basic.cancel, a channel moving it elsewhere) in
// the same log entry as an enqueue the machine checked out to it just
// before the cancel: the delivery never reaches its channel, so it goes
// back to the queue. (It stayed checked out to the cancelled consumer
// for good: a confirmed message never delivered.)
func TestCancelledInTheEntryOfItsCheckout(t *testing.T) {
	g := &gate{}
	q := gatedQueue(t, g, queue.ConsumeOptions{Prefetch: 10})
	release := quorum.HoldProposer(q)
	confirmed := make(chan error, 1)
	q.Type().Publish(&queue.Message{Body: []byte("m"), Persistent: true}, []queue.Queue{q}, nil, func(err error) { confirmed <- err })
	q.RemoveConsumer("c", g)
	release()
	wantBackAfterCancel(t, q, g, confirmed)
	e, _, ok := q.Get(true)
	if !ok || string(e.Msg.Body) != "m" {
		t.Fatalf("get: %v %q", ok, e.Msg.Body)
	}
}

// A consumer cancelled while its attach waits to be applied, with an
// entry applied in between (another proposer's; here the held tick): the
// entry after its attach that checks a message out to it, before its
// cancel, delivers to no channel, so the message goes back. (It stayed
// checked out to the cancelled consumer: this replica had forgotten the
// cancel once an entry without the consumer was applied.)
func TestCancelledBeforeItsAttachApplied(t *testing.T) {
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir()})
	t.Cleanup(func() { typ.Close() })
	x, err := typ.New(queue.Decl{VHost: "/", Name: "attach", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	g := &gate{}
	release := quorum.HoldProposer(q)
	attached := make(chan error, 1)
	go func() { attached <- q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: g, Prefetch: 10}) }()
	waitUntil(t, "the attach proposed", func() bool { return quorum.InboxLen(q) == 1 })
	confirmed := make(chan error, 1)
	q.Type().Publish(&queue.Message{Body: []byte("m"), Persistent: true}, []queue.Queue{q}, nil, func(err error) { confirmed <- err })
	q.RemoveConsumer("c", g)
	release()
	if err := <-attached; err != nil {
		t.Fatal(err)
	}
	wantBackAfterCancel(t, q, g, confirmed)
	if _, n := q.Counts(); n != 0 {
		t.Fatalf("%d consumers counted, want none", n)
	}
}

// wantBackAfterCancel waits for the publish's confirm and the entries'
// apply, and checks that the cancelled consumer g was delivered nothing
// and the message is ready again.
func wantBackAfterCancel(t *testing.T, q *quorum.Queue, g *gate, confirmed chan error) {
	t.Helper()
	if err := <-confirmed; err != nil {
		t.Fatal(err)
	}
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := g.bodies(); len(got) != 0 {
		t.Fatalf("the cancelled consumer was delivered %v", got)
	}
	if st := q.Stats(); st.Ready != 1 || st.Unacked != 0 {
		t.Fatalf("after the entries: %+v, want the message ready again", st)
	}
}

// closingGate is a gate that can tell whether its channel closed
// (queue.ChannelCloser).
type closingGate struct {
	gate
	closed bool
}

func (g *closingGate) ChannelClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// A consumer cancelled by basic.cancel keeps what is checked out to it
// until it is settled (RabbitMQ 3.10's quorum queues); one removed with
// its closed channel (which requeued what it knew it held first) keeps
// nothing: what is still checked out to it, say because its settlement
// was lost, goes back at once, redelivered.
func TestClosedChannelConsumerHoldsNothing(t *testing.T) {
	for _, closed := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
			g := &closingGate{}
			q := gatedQueue(t, &g.gate, queue.ConsumeOptions{Prefetch: 10})
			// Attach the closing gate in the gate's place: one consumer.
			q.RemoveConsumer("c", &g.gate)
			if err := q.AddConsumer(queue.ConsumeOptions{Tag: "k", Consumer: g, Prefetch: 10}); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				publishWait(t, q, fmt.Sprint(i))
			}
			if err := q.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := g.bodies(); len(got) != 3 {
				t.Fatalf("delivered %v", got)
			}
			g.mu.Lock()
			g.closed = closed
			g.mu.Unlock()
			q.RemoveConsumer("k", g) // nothing settled: as if its settlements were lost
			if err := q.Sync(); err != nil {
				t.Fatal(err)
			}
			st := q.Stats()
			if !closed {
				if st.Unacked != 3 || st.Ready != 0 {
					t.Fatalf("cancelled: %+v, want the 3 still checked out to it", st)
				}
				return
			}
			if st.Unacked != 0 || st.Ready != 3 {
				t.Fatalf("its channel closed: %+v, want the 3 back", st)
			}
			e, _, ok := q.Get(true)
			if !ok || !e.Redelivered {
				t.Fatalf("after the close: %v redelivered=%v", ok, e.Redelivered)
			}
		})
	}
}
