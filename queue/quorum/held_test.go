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
	mu   sync.Mutex
	shut bool
	got  []string
}

func (g *gate) Deliver(_ queue.Queue, e queue.Entry, _ any) queue.Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return queue.Refused
	}
	g.got = append(g.got, string(e.Msg.Body))
	return queue.Pending
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

// A consumer with a prefetch that refuses (its connection's outbound
// buffer is full) keeps what it refused and what comes after it, still
// checked out to it, and a Kick offers them again in the queue's order:
// nothing goes back to the queue through the log, where the messages
// checked out meanwhile overtook it. Cancelled while it holds some,
// they go back to the queue, not redelivered.
func TestRefusedHeldInOrder(t *testing.T) {
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir()})
	defer typ.Close()
	x, err := typ.New(queue.Decl{VHost: "/", Name: "held", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	g := &gate{}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: g, Prefetch: 100}); err != nil {
		t.Fatal(err)
	}
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
