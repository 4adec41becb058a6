package classic_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/classic"
	"github.com/warrenmq/warren/queue/queuetest"
)

// fakeClock is a settable clock for the expiry cases.
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

var allFeatures = queuetest.Features{
	TTL: true, MaxLength: true, DeadLetter: true, Priorities: true, SingleActive: true,
	ConsumerPrio: true, ExclusiveUse: true, RequeueInPlace: true,
}

// TestContract runs the queue contract against classic queues held in
// memory, and against durable ones on a store with a small window, so
// that paging and spilling are in play.
func TestContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		clk := &fakeClock{now: time.Unix(1000, 0)}
		typ := classic.NewType(classic.Config{Now: clk.Now})
		queuetest.Run(t, queuetest.Harness{Type: typ, Advance: clk.Advance, Features: allFeatures})
	})
	t.Run("stored", func(t *testing.T) {
		st := persist.NewMemory()
		t.Cleanup(func() { st.Close() })
		clk := &fakeClock{now: time.Unix(1000, 0)}
		var ids atomic.Uint64
		typ := classic.NewType(classic.Config{
			Store: st, Window: 2, SpillDir: t.TempDir(), Now: clk.Now,
			NextMessageID: func() uint64 { return ids.Add(1) },
			Log:           func(err error, msg string) { t.Errorf("%s: %v", msg, err) },
		})
		queuetest.Run(t, queuetest.Harness{Type: durable{typ}, Advance: clk.Advance, Features: allFeatures, Persistent: true})
		if err := persist.Check(st); err != nil {
			t.Errorf("store invariants after the contract: %v", err)
		}
	})
}

// durable makes every queue of the contract a durable one.
type durable struct{ *classic.Type }

func (d durable) New(dc queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	dc.Durable = true
	return d.Type.New(dc, l, h)
}
