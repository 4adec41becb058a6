// Package queuetest is the contract suite every queue type passes: what
// the channel relies on, whatever the type keeps its messages in. A type
// runs it from its own tests with a Harness that makes its queues; the
// suite drives them only through the queue package's interfaces, the way
// the broker does. Stub is a minimal type that passes it, proof that the
// seam carries a type that is not the classic queue.
package queuetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
)

// Harness makes queues of the type under test.
type Harness struct {
	// Type is the type under test; its New makes the queues.
	Type queue.Type
	// Now, when set, is the clock the type's queues were given, for the
	// expiry cases; Advance moves it.
	Advance func(d time.Duration)
	// Features lists what of RabbitMQ's classic queue the type does;
	// cases for the others are skipped.
	Features Features
	// Persistent publishes every message with delivery mode 2, so that a
	// type with a store stores them.
	Persistent bool
	// AwaitConfirms makes every publish wait for its confirm callback,
	// for types that make a message visible only once it is durable.
	AwaitConfirms bool
	// Prefetch is passed to every consumer (ConsumeOptions.Prefetch),
	// for types that need one.
	Prefetch uint16
	// Quiesce, when set, is called after each confirmed publish: it waits
	// until q has offered what it took to its consumers, for types that
	// deliver from a goroutine of their own.
	Quiesce func(q queue.Queue)
}

// Features are optional behaviours a type may have.
type Features struct {
	TTL            bool // x-message-ttl, expiry at the head
	MaxLength      bool // x-max-length with drop-head and reject-publish
	DeadLetter     bool // rejected and dropped messages reach Hooks.DeadLetter
	Priorities     bool // x-max-priority
	SingleActive   bool // x-single-active-consumer
	ConsumerPrio   bool // x-priority of consumers
	ExclusiveUse   bool // exclusive consumers
	RequeueInPlace bool // a requeued message returns to its place by age
	// RejectPastLimit: reject-publish takes the message that takes the
	// queue over its limit and refuses the next (RabbitMQ's quorum
	// queues); a classic queue refuses at the limit.
	RejectPastLimit bool
	// GetIsConsumer: a message basic.get took unsettled counts as a
	// consumer in Stats until it is settled (RabbitMQ's quorum queues:
	// rabbit_fifo checks it out to a consumer of its own).
	GetIsConsumer bool
	// Log: the type is a log (streams): every consumer reads every
	// message, acks keep it, and there is no get, purge, no-ack or
	// requeue. The cases of a queue's destructive consumption skip.
	Log bool
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	destructive := !h.Features.Log
	cases := []struct {
		name string
		need bool
		fn   func(t *testing.T, h *Harness)
	}{
		{"Order", destructive, testOrder},
		{"RoundRobin", destructive, testRoundRobin},
		{"Credit", destructive, testCredit},
		{"NoAck", destructive, testNoAck},
		{"Requeue", destructive, testRequeue},
		{"RequeueInPlace", h.Features.RequeueInPlace, testRequeueInPlace},
		{"Cancel", true, testCancel},
		{"AutoDelete", destructive, testAutoDelete},
		{"DeleteWithConsumers", destructive, testDeleteWithConsumers},
		{"DeleteConditions", destructive, testDeleteConditions},
		{"Get", destructive, testGet},
		{"Purge", destructive, testPurge},
		{"ConfirmCallback", true, testConfirmCallback},
		{"Exclusive", h.Features.ExclusiveUse, testExclusive},
		{"ConsumerPriority", h.Features.ConsumerPrio, testConsumerPriority},
		{"SingleActive", h.Features.SingleActive, testSingleActive},
		{"TTL", h.Features.TTL && h.Advance != nil, testTTL},
		{"MaxLength", h.Features.MaxLength, testMaxLength},
		{"DeadLetterReject", h.Features.DeadLetter, testDeadLetterReject},
		{"Priorities", h.Features.Priorities, testPriorities},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.need {
				t.Skip("the type does not have this feature")
			}
			c.fn(t, &h)
		})
	}
}

// Recorder is a consumer that takes deliveries while it has credit.
type Recorder struct {
	mu     sync.Mutex
	credit int // -1: unlimited
	noAck  bool
	got    []queue.Entry
	from   []queue.Queue
}

// NewRecorder returns a consumer with credit deliveries of room (-1: no
// limit); with noAck its deliveries need no settlement.
func NewRecorder(credit int, noAck bool) *Recorder { return &Recorder{credit: credit, noAck: noAck} }

// Deliver implements queue.Consumer.
func (r *Recorder) Deliver(q queue.Queue, e queue.Entry, _ any) queue.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.credit == 0 {
		return queue.Refused
	}
	if r.credit > 0 {
		r.credit--
	}
	r.got = append(r.got, e)
	r.from = append(r.from, q)
	if r.noAck {
		return queue.Settled
	}
	return queue.Pending
}

// Grant gives n more deliveries of room.
func (r *Recorder) Grant(n int) {
	r.mu.Lock()
	r.credit += n
	r.mu.Unlock()
}

// Stop makes the consumer refuse everything, as a closed channel does.
func (r *Recorder) Stop() {
	r.mu.Lock()
	r.credit = 0
	r.mu.Unlock()
}

// Take returns and forgets the deliveries so far.
func (r *Recorder) Take() []queue.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got, r.from = nil, nil
	return g
}

// Len is the number of deliveries not yet taken.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Bodies returns the bodies of es.
func Bodies(es []queue.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Msg.Body)
	}
	return out
}

func (h *Harness) newQueue(t *testing.T, name string, args map[string]any, hooks queue.Hooks) queue.Queue {
	t.Helper()
	d := queue.Decl{VHost: "/", Name: name, Args: args}
	l, err := queue.ParseArgs(args)
	if err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	q, err := h.Type.New(d, l, hooks)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { q.Delete(false, false) })
	return q
}

// publish hands one message to q through its type, as the broker does,
// and reports whether q took it.
func (h *Harness) publish(t *testing.T, q queue.Queue, body string, opts ...func(*queue.Message)) bool {
	t.Helper()
	m := &queue.Message{RoutingKey: q.Decl().Name, Body: []byte(body), Persistent: h.Persistent}
	for _, o := range opts {
		o(m)
	}
	var done func(error)
	confirmed := make(chan error, 1)
	if h.AwaitConfirms {
		done = func(err error) { confirmed <- err }
	}
	routed, dropped := q.Type().Publish(m, []queue.Queue{q}, nil, done)
	if h.AwaitConfirms {
		select {
		case err := <-confirmed:
			if err != nil {
				return false
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no confirm")
		}
		if h.Quiesce != nil {
			h.Quiesce(q)
		}
	}
	return routed && !dropped
}

func (h *Harness) publishN(t *testing.T, q queue.Queue, n int) {
	t.Helper()
	for i := range n {
		if !h.publish(t, q, fmt.Sprint(i)) {
			t.Fatalf("publish %d was not taken", i)
		}
	}
}

func (h *Harness) consume(t *testing.T, q queue.Queue, tag string, c queue.Consumer) {
	t.Helper()
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: tag, Consumer: c, Prefetch: h.Prefetch}); err != nil {
		t.Fatalf("AddConsumer %s: %v", tag, err)
	}
	q.Kick(nil)
}

func wantBodies(t *testing.T, what string, got []queue.Entry, want ...string) {
	t.Helper()
	if g := Bodies(got); !slices.Equal(g, want) {
		t.Fatalf("%s: got %q, want %q", what, g, want)
	}
}

func seq(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func wantStats(t *testing.T, q queue.Queue, ready, unacked, consumers int) {
	t.Helper()
	st := q.Stats()
	if st.Ready != ready || st.Unacked != unacked || st.Consumers != consumers {
		t.Fatalf("stats = ready %d unacked %d consumers %d, want %d %d %d",
			st.Ready, st.Unacked, st.Consumers, ready, unacked, consumers)
	}
}

func testOrder(t *testing.T, h *Harness) {
	q := h.newQueue(t, "order", nil, queue.Hooks{})
	h.publishN(t, q, 10)
	wantStats(t, q, 10, 0, 0)
	r := NewRecorder(-1, false)
	h.consume(t, q, "c", r)
	got := r.Take()
	wantBodies(t, "deliveries", got, seq(10)...)
	for _, e := range got {
		if e.Redelivered {
			t.Fatalf("a first delivery is marked redelivered: %q", e.Msg.Body)
		}
	}
	wantStats(t, q, 0, 10, 1)
	q.Settle(got, queue.Ack)
	wantStats(t, q, 0, 0, 1)
	if ms := q.MessageStats(); ms.Ack != 10 || ms.Deliver != 10 {
		t.Fatalf("message stats = %+v, want 10 delivered and 10 acked", ms)
	}
}

func testRoundRobin(t *testing.T, h *Harness) {
	q := h.newQueue(t, "rr", nil, queue.Hooks{})
	a, b := NewRecorder(-1, true), NewRecorder(-1, true)
	h.consume(t, q, "a", a)
	h.consume(t, q, "b", b)
	h.publishN(t, q, 6)
	ga, gb := a.Take(), b.Take()
	if len(ga) != 3 || len(gb) != 3 {
		t.Fatalf("round robin: a got %q, b got %q", Bodies(ga), Bodies(gb))
	}
}

func testCredit(t *testing.T, h *Harness) {
	q := h.newQueue(t, "credit", nil, queue.Hooks{})
	r := NewRecorder(2, false)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 5)
	got := r.Take()
	wantBodies(t, "with credit 2", got, "0", "1")
	wantStats(t, q, 3, 2, 1)
	q.Settle(got, queue.Ack)
	q.Kick(nil)
	if r.Len() != 0 {
		t.Fatal("a consumer without credit got a delivery")
	}
	r.Grant(3)
	q.Kick(nil)
	wantBodies(t, "after more credit and a kick", r.Take(), "2", "3", "4")
}

func testNoAck(t *testing.T, h *Harness) {
	q := h.newQueue(t, "noack", nil, queue.Hooks{})
	r := NewRecorder(-1, true)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 3)
	wantBodies(t, "no-ack deliveries", r.Take(), seq(3)...)
	wantStats(t, q, 0, 0, 1)
}

func testRequeue(t *testing.T, h *Harness) {
	q := h.newQueue(t, "requeue", nil, queue.Hooks{})
	r := NewRecorder(1, false)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 2)
	first := r.Take()
	wantBodies(t, "first delivery", first, "0")
	q.Settle(first, queue.Requeue)
	r.Grant(1)
	q.Kick(nil)
	again := r.Take()
	wantBodies(t, "after requeue", again, "0")
	if !again[0].Redelivered {
		t.Fatal("a requeued message came back without the redelivered flag")
	}
	q.Settle(again, queue.Ack)
	r.Grant(1)
	q.Kick(nil)
	next := r.Take()
	wantBodies(t, "the next", next, "1")
	if next[0].Redelivered {
		t.Fatal("a first delivery is marked redelivered")
	}
}

func testRequeueInPlace(t *testing.T, h *Harness) {
	q := h.newQueue(t, "inplace", nil, queue.Hooks{})
	r := NewRecorder(3, false)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 5)
	got := r.Take() // 0 1 2
	// Requeued out of order, they return to their places, ahead of 3 and 4.
	q.Settle([]queue.Entry{got[2], got[0]}, queue.Requeue)
	q.Settle([]queue.Entry{got[1]}, queue.Requeue)
	r.Grant(5)
	q.Kick(nil)
	wantBodies(t, "after requeues", r.Take(), "0", "1", "2", "3", "4")
}

func testCancel(t *testing.T, h *Harness) {
	q := h.newQueue(t, "cancel", nil, queue.Hooks{})
	a, b := NewRecorder(-1, true), NewRecorder(-1, true)
	h.consume(t, q, "a", a)
	h.consume(t, q, "b", b)
	if q.RemoveConsumer("a", a) {
		t.Fatal("a queue that is not auto-delete asked to be deleted")
	}
	h.publishN(t, q, 4)
	if a.Len() != 0 {
		t.Fatal("a cancelled consumer got deliveries")
	}
	wantBodies(t, "the remaining consumer", b.Take(), seq(4)...)
	if h.Features.Log {
		wantStats(t, q, 4, 0, 1) // a log keeps what it delivered
	} else {
		wantStats(t, q, 0, 0, 1)
	}
}

func testAutoDelete(t *testing.T, h *Harness) {
	d := queue.Decl{VHost: "/", Name: "auto", AutoDelete: true}
	l, _ := queue.ParseArgs(nil)
	q, err := h.Type.New(d, l, queue.Hooks{})
	if err != nil {
		t.Skipf("the type takes no auto-delete queues: %v", err)
	}
	t.Cleanup(func() { q.Delete(false, false) })
	a, b := NewRecorder(-1, true), NewRecorder(-1, true)
	h.consume(t, q, "a", a)
	h.consume(t, q, "b", b)
	if q.RemoveConsumer("a", a) {
		t.Fatal("auto-delete asked for while a consumer is left")
	}
	if !q.RemoveConsumer("b", b) {
		t.Fatal("auto-delete not asked for after the last consumer left")
	}
}

func testDeleteWithConsumers(t *testing.T, h *Harness) {
	q := h.newQueue(t, "delete", nil, queue.Hooks{})
	a := NewRecorder(0, false)
	h.consume(t, q, "a", a)
	h.publishN(t, q, 3)
	n, refs, err := q.Delete(false, false)
	if err != nil || n != 3 || len(refs) != 1 || refs[0].Tag != "a" || refs[0].Consumer != a {
		t.Fatalf("Delete = %d %v %v, want 3 ready and consumer a", n, refs, err)
	}
	if !q.Deleted() {
		t.Fatal("not Deleted after Delete")
	}
	if h.publish(t, q, "late") {
		t.Fatal("a deleted queue took a publish")
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: NewRecorder(-1, true)}); !errors.Is(err, queue.ErrDeleted) {
		t.Fatalf("AddConsumer on a deleted queue = %v, want ErrDeleted", err)
	}
	if n, refs, err := q.Delete(false, false); n != 0 || refs != nil || err != nil {
		t.Fatalf("second Delete = %d %v %v, want zero values", n, refs, err)
	}
}

func testDeleteConditions(t *testing.T, h *Harness) {
	q := h.newQueue(t, "cond", nil, queue.Hooks{})
	h.publishN(t, q, 1)
	if _, _, err := q.Delete(false, true); !errors.Is(err, queue.ErrNotEmpty) {
		t.Fatalf("if-empty delete of a queue with a message = %v, want ErrNotEmpty", err)
	}
	r := NewRecorder(-1, false)
	h.consume(t, q, "c", r)
	if _, _, err := q.Delete(true, false); !errors.Is(err, queue.ErrInUse) {
		t.Fatalf("if-unused delete of a queue with a consumer = %v, want ErrInUse", err)
	}
	if q.Deleted() {
		t.Fatal("a refused Delete deleted the queue")
	}
}

func testGet(t *testing.T, h *Harness) {
	q := h.newQueue(t, "get", nil, queue.Hooks{})
	g, ok := q.(queue.Getter)
	if !ok {
		t.Skip("the type has no basic.get")
	}
	h.publishN(t, q, 3)
	e, left, ok := g.Get(false)
	if !ok || string(e.Msg.Body) != "0" || left != 2 {
		t.Fatalf("Get = %q %d %v, want 0 with 2 left", e.Msg.Body, left, ok)
	}
	getConsumers := 0
	if h.Features.GetIsConsumer {
		getConsumers = 1
	}
	wantStats(t, q, 2, 1, getConsumers)
	q.Settle([]queue.Entry{e}, queue.Requeue)
	e, _, _ = g.Get(true)
	if string(e.Msg.Body) != "0" || !e.Redelivered {
		t.Fatalf("Get after requeue = %q redelivered %v, want 0 redelivered", e.Msg.Body, e.Redelivered)
	}
	wantStats(t, q, 2, 0, 0)
	g.Get(true)
	g.Get(true)
	if _, _, ok := g.Get(true); ok {
		t.Fatal("Get on an empty queue found a message")
	}
	if ms := q.MessageStats(); ms.Get != 1 || ms.GetNoAck != 3 || ms.GetEmpty != 1 {
		t.Fatalf("message stats = %+v, want 1 get, 3 no-ack gets, 1 empty", ms)
	}
}

func testPurge(t *testing.T, h *Harness) {
	q := h.newQueue(t, "purge", nil, queue.Hooks{})
	p, ok := q.(queue.Purger)
	if !ok {
		t.Skip("the type has no purge")
	}
	r := NewRecorder(1, false)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 4)
	if n := p.Purge(); n != 3 {
		t.Fatalf("Purge = %d, want 3 (one is delivered)", n)
	}
	wantStats(t, q, 0, 1, 1)
	// The delivered one is not purged: requeued, it is there again.
	q.Settle(r.Take(), queue.Requeue)
	wantStats(t, q, 1, 0, 1)
}

func testConfirmCallback(t *testing.T, h *Harness) {
	q := h.newQueue(t, "confirm", nil, queue.Hooks{})
	done := make(chan error, 1)
	m := &queue.Message{Body: []byte("x"), Persistent: true}
	q.Type().Publish(m, []queue.Queue{q}, nil, func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("confirm callback: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the confirm callback never ran")
	}
	select {
	case <-done:
		t.Fatal("the confirm callback ran twice")
	default:
	}
}

func testExclusive(t *testing.T, h *Harness) {
	q := h.newQueue(t, "excl", nil, queue.Hooks{})
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: NewRecorder(-1, true), Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: NewRecorder(-1, true)}); !errors.Is(err, queue.ErrExclusiveConsumer) {
		t.Fatalf("a second consumer of an exclusive one = %v, want ErrExclusiveConsumer", err)
	}
	q2 := h.newQueue(t, "excl2", nil, queue.Hooks{})
	h.consume(t, q2, "a", NewRecorder(-1, true))
	if err := q2.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: NewRecorder(-1, true), Exclusive: true}); !errors.Is(err, queue.ErrHasConsumers) {
		t.Fatalf("an exclusive consumer next to another = %v, want ErrHasConsumers", err)
	}
}

func testConsumerPriority(t *testing.T, h *Harness) {
	q := h.newQueue(t, "cprio", nil, queue.Hooks{})
	low, high := NewRecorder(-1, true), NewRecorder(2, true)
	q.AddConsumer(queue.ConsumeOptions{Tag: "low", Consumer: low})
	q.AddConsumer(queue.ConsumeOptions{Tag: "high", Consumer: high, Priority: 5})
	h.publishN(t, q, 4)
	wantBodies(t, "the higher priority consumer", high.Take(), "0", "1")
	wantBodies(t, "the lower one, once the higher is full", low.Take(), "2", "3")
}

func testSingleActive(t *testing.T, h *Harness) {
	q := h.newQueue(t, "sac", map[string]any{"x-single-active-consumer": true}, queue.Hooks{})
	a, b := NewRecorder(-1, false), NewRecorder(-1, false)
	h.consume(t, q, "a", a)
	h.consume(t, q, "b", b)
	h.publishN(t, q, 3)
	got := a.Take()
	wantBodies(t, "the active consumer", got, seq(3)...)
	if b.Len() != 0 {
		t.Fatal("the standby consumer got deliveries")
	}
	// The active one goes (its channel closed: it takes nothing more), its
	// messages requeued first: b takes over, in order.
	a.Stop()
	q.Settle(got, queue.Requeue)
	q.RemoveConsumer("a", a)
	q.Kick(nil)
	wantBodies(t, "the new active consumer", b.Take(), seq(3)...)
}

func testTTL(t *testing.T, h *Harness) {
	var dead []queue.Dead
	var mu sync.Mutex
	hooks := queue.Hooks{DeadLetter: func(_ queue.Queue, d []queue.Dead) { mu.Lock(); dead = append(dead, d...); mu.Unlock() }}
	q := h.newQueue(t, "ttl", map[string]any{"x-message-ttl": int32(1000), "x-dead-letter-exchange": "dlx"}, hooks)
	h.publishN(t, q, 2)
	h.Advance(2 * time.Second)
	wantStats(t, q, 0, 0, 0)
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 2 || dead[0].Reason != queue.Expired || dead[0].Exchange != "dlx" {
		t.Fatalf("dead letters = %+v, want 2 expired to dlx", dead)
	}
}

func testMaxLength(t *testing.T, h *Harness) {
	q := h.newQueue(t, "maxlen", map[string]any{"x-max-length": int32(2)}, queue.Hooks{})
	h.publishN(t, q, 4)
	g, ok := q.(queue.Getter)
	if !ok {
		t.Skip("no basic.get to look")
	}
	e1, _, _ := g.Get(true)
	e2, _, _ := g.Get(true)
	wantBodies(t, "drop-head keeps the newest", []queue.Entry{e1, e2}, "2", "3")

	r := h.newQueue(t, "reject", map[string]any{"x-max-length": int32(1), "x-overflow": "reject-publish"}, queue.Hooks{})
	if h.Features.RejectPastLimit {
		if !h.publish(t, r, "a") || !h.publish(t, r, "b") || h.publish(t, r, "c") {
			t.Fatal("reject-publish past the limit: want the first two taken and the third refused")
		}
		return
	}
	if !h.publish(t, r, "a") || h.publish(t, r, "b") {
		t.Fatal("reject-publish: want the first taken and the second refused")
	}
}

func testDeadLetterReject(t *testing.T, h *Harness) {
	var dead []queue.Dead
	hooks := queue.Hooks{DeadLetter: func(_ queue.Queue, d []queue.Dead) { dead = append(dead, d...) }}
	q := h.newQueue(t, "dlx", map[string]any{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k"}, hooks)
	r := NewRecorder(-1, false)
	h.consume(t, q, "c", r)
	h.publishN(t, q, 2)
	q.Settle(r.Take(), queue.Reject)
	if len(dead) != 2 || dead[0].Reason != queue.Rejected || dead[0].Exchange != "dlx" || !dead[0].HasRoutingKey || dead[0].RoutingKey != "k" {
		t.Fatalf("dead letters = %+v", dead)
	}
	wantStats(t, q, 0, 0, 1)
}

func testPriorities(t *testing.T, h *Harness) {
	q := h.newQueue(t, "prio", map[string]any{"x-max-priority": int32(5)}, queue.Hooks{})
	for i, p := range []uint8{1, 5, 3, 9} {
		h.publish(t, q, fmt.Sprint(i), func(m *queue.Message) { m.Priority = p })
	}
	r := NewRecorder(-1, true)
	h.consume(t, q, "c", r)
	// 9 counts as the maximum, 5; equal priorities keep their order.
	wantBodies(t, "by priority", r.Take(), "1", "3", "2", "0")
}
