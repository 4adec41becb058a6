package quorum_test

import (
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/quorum"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestContract runs the queue contract against quorum queues, one-voter
// Raft groups on a shared store. Settlements, kicks and consumer changes
// go through the log, so the harness's queues wait for them to be
// applied (synced) before the contract looks.
func TestContract(t *testing.T) {
	clk := &fakeClock{now: time.Now()}
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir(), Now: clk.Now, Log: func(err error, msg string) { t.Logf("%s: %v", msg, err) }})
	t.Cleanup(func() { typ.Close() })
	queuetest.Run(t, queuetest.Harness{Type: synced{typ}, Advance: clk.Advance, AwaitConfirms: true, Persistent: true,
		Features: queuetest.Features{TTL: true, MaxLength: true, DeadLetter: true, SingleActive: true, ConsumerPrio: true,
			RejectPastLimit: true, GetIsConsumer: true}}) // no ExclusiveUse: rabbit_fifo ignores the flag
}

// synced makes durable quorum queues whose settlements, kicks and
// consumer changes are applied before they return.
type synced struct{ *quorum.Type }

func (s synced) New(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	d.Durable = true
	q, err := s.Type.New(d, l, h)
	if err != nil {
		return nil, err
	}
	return &syncQueue{q.(*quorum.Queue)}, nil
}

func (s synced) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (bool, bool) {
	in := make([]queue.Queue, len(qs))
	for i, q := range qs {
		in[i] = q.(*syncQueue).Queue
	}
	return s.Type.Publish(m, in, ctx, done)
}

type syncQueue struct{ *quorum.Queue }

func (q *syncQueue) Type() queue.Type { return synced{q.Queue.Type().(*quorum.Type)} }

func (q *syncQueue) Settle(es []queue.Entry, op queue.SettleOp) {
	q.Queue.Settle(es, op)
	q.Queue.Sync()
}

func (q *syncQueue) Kick(ctx any) {
	q.Queue.Kick(ctx)
	q.Queue.Sync()
	q.Queue.Sync() // a refusal's return, proposed while applying
}

func (q *syncQueue) RemoveConsumer(tag string, c queue.Consumer) bool {
	ad := q.Queue.RemoveConsumer(tag, c)
	q.Queue.Sync()
	return ad
}

func (q *syncQueue) Stats() queue.Stats {
	q.Queue.Expire()
	q.Queue.Sync()
	return q.Queue.Stats()
}
