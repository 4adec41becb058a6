package queuetest

import (
	"errors"
	"slices"
	"sync"

	"github.com/warrenmq/warren/queue"
)

// StubType is a minimal in-memory queue type: a FIFO whose requeued
// messages go back to the front, with round-robin dispatch, basic.get and
// purge, and none of the classic queue's optional features. It stores
// nothing. It exists to show that the seam carries a type that is not the
// classic queue; tests may register it in a broker.
type StubType struct{ Name string }

// Info implements queue.Type.
func (t *StubType) Info() queue.TypeInfo {
	return queue.TypeInfo{Name: t.Name, Module: "warren_stub_queue"}
}

// ErrStubArgs: the stub takes no queue arguments beyond its type.
var ErrStubArgs = errors.New("queuetest: the stub type takes no arguments")

// New implements queue.Type.
func (t *StubType) New(d queue.Decl, _ queue.Limits, _ queue.Hooks) (queue.Queue, error) {
	for k := range d.Args {
		if k != "x-queue-type" {
			return nil, &queue.ArgError{Arg: k, Reason: ErrStubArgs.Error()}
		}
	}
	return &stubQueue{typ: t, decl: d}, nil
}

// Publish implements queue.Type: the message is in every queue at once.
func (t *StubType) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	for _, x := range qs {
		if x.(*stubQueue).enqueue(m, ctx) {
			routed = true
		}
	}
	if done != nil {
		done(nil)
	}
	return routed, false
}

type stubConsumer struct {
	tag string
	c   queue.Consumer
}

type stubQueue struct {
	typ  *StubType
	decl queue.Decl

	mu        sync.Mutex
	ready     []queue.Entry
	seq       uint64
	unacked   int
	consumers []stubConsumer
	next      int
	deleted   bool
	ever      bool // had a consumer
	stats     queue.MessageStats
}

func (q *stubQueue) Decl() *queue.Decl { return &q.decl }
func (q *stubQueue) Type() queue.Type  { return q.typ }

func (q *stubQueue) enqueue(m *queue.Message, ctx any) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return false
	}
	q.seq++
	q.ready = append(q.ready, queue.Entry{Seq: q.seq, Msg: m})
	q.stats.Publish++
	q.dispatch(ctx)
	return true
}

// dispatch offers the head to the consumers, round-robin, until none
// takes it. q.mu is held.
func (q *stubQueue) dispatch(ctx any) {
	for len(q.ready) > 0 && len(q.consumers) > 0 {
		taken := false
		for i := range q.consumers {
			k := (q.next + i) % len(q.consumers)
			switch q.consumers[k].c.Deliver(q, q.ready[0], ctx) {
			case queue.Refused:
				continue
			case queue.Pending:
				q.unacked++
				q.stats.Deliver++
			case queue.Settled:
				q.stats.DeliverNoAck++
			}
			q.ready = q.ready[1:]
			q.next = k + 1
			taken = true
			break
		}
		if !taken {
			return
		}
	}
}

func (q *stubQueue) AddConsumer(o queue.ConsumeOptions) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return queue.ErrDeleted
	}
	q.consumers = append(q.consumers, stubConsumer{o.Tag, o.Consumer})
	q.ever = true
	return nil
}

func (q *stubQueue) RemoveConsumer(tag string, c queue.Consumer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.consumers = slices.DeleteFunc(q.consumers, func(s stubConsumer) bool { return s.tag == tag && s.c == c })
	q.dispatch(nil)
	return q.decl.AutoDelete && q.ever && len(q.consumers) == 0 && !q.deleted
}

func (q *stubQueue) Kick(ctx any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dispatch(ctx)
}

func (q *stubQueue) Settle(entries []queue.Entry, op queue.SettleOp) {
	op = op.Requeued()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unacked -= len(entries)
	switch op {
	case queue.Ack:
		q.stats.Ack += uint64(len(entries))
	case queue.Requeue:
		back := make([]queue.Entry, len(entries))
		for i, e := range entries {
			e.Redelivered = true
			back[i] = e
		}
		q.ready = append(back, q.ready...)
		q.dispatch(nil)
	}
}

func (q *stubQueue) Get(noAck bool) (queue.Entry, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ready) == 0 {
		q.stats.GetEmpty++
		return queue.Entry{}, 0, false
	}
	e := q.ready[0]
	q.ready = q.ready[1:]
	if noAck {
		q.stats.GetNoAck++
	} else {
		q.stats.Get++
		q.unacked++
	}
	return e, len(q.ready), true
}

func (q *stubQueue) Purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.ready)
	q.ready = nil
	return n
}

func (q *stubQueue) Delete(ifUnused, ifEmpty bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return 0, nil, nil
	case ifUnused && len(q.consumers) > 0:
		return 0, nil, queue.ErrInUse
	case ifEmpty && len(q.ready) > 0:
		return 0, nil, queue.ErrNotEmpty
	}
	q.deleted = true
	n := len(q.ready)
	q.ready = nil
	var refs []queue.ConsumerRef
	for _, s := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: s.tag, Consumer: s.c})
	}
	q.consumers = nil
	return n, refs, nil
}

func (q *stubQueue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

func (q *stubQueue) Touch() {}

func (q *stubQueue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	var bytes int64
	for _, e := range q.ready {
		bytes += e.Msg.Size()
	}
	return queue.Stats{Ready: len(q.ready), ReadyBytes: bytes, Unacked: q.unacked, Consumers: len(q.consumers),
		InMemory: len(q.ready), InMemoryBytes: bytes}
}

func (q *stubQueue) MessageStats() queue.MessageStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

func (q *stubQueue) DeliveryProps(e queue.Entry) []byte { return e.Msg.Props }
