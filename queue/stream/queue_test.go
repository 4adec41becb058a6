package stream_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/stream"
)

func publishN(t *testing.T, q queue.Queue, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		done := make(chan error, 1)
		q.Type().Publish(&queue.Message{Body: []byte(fmt.Sprint(i))}, []queue.Queue{q}, nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	q.(*stream.Queue).Quiesce()
}

// Every consumer reads the whole stream from its offset, acks keep the
// messages, credit limits deliveries, and the log survives a stop and a
// recovery with its offsets.
func TestStreamConsumersAndRecover(t *testing.T) {
	dir := t.TempDir()
	typ := stream.NewType(stream.Config{Dir: dir})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 7, Args: map[string]any{"x-stream-max-segment-size-bytes": int64(100)}}
	l, _ := queue.ParseArgs(nil)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false)}); !errors.Is(err, queue.ErrPrefetchRequired) {
		t.Fatalf("consumer without prefetch: %v", err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, NoAck: true}); !errors.Is(err, queue.ErrNoAckRefused) {
		t.Fatalf("no-ack consumer: %v", err)
	}
	var oe *queue.OffsetError
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, Args: map[string]any{"x-stream-offset": "bogus"}}); !errors.As(err, &oe) {
		t.Fatalf("unknown offset: %v", err)
	}
	publishN(t, q, 0, 20)
	a, b := queuetest.NewRecorder(3, false), queuetest.NewRecorder(-1, false)
	q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Prefetch: 3, Args: map[string]any{"x-stream-offset": "first"}})
	q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: b, Prefetch: 100, Args: map[string]any{"x-stream-offset": int64(15)}})
	q.Kick(nil)
	ga := a.Take()
	if fmt.Sprint(queuetest.Bodies(ga)) != "[0 1 2]" || ga[2].Seq != 2 {
		t.Fatalf("a got %v", queuetest.Bodies(ga))
	}
	if got := queuetest.Bodies(b.Take()); fmt.Sprint(got) != "[15 16 17 18 19]" {
		t.Fatalf("b got %v", got)
	}
	q.Settle(ga, queue.Ack)
	a.Grant(3)
	q.Kick(nil)
	if got := queuetest.Bodies(a.Take()); fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("a after acks got %v", got)
	}
	if st := q.Stats(); st.Ready != 20 || st.Consumers != 2 {
		t.Fatalf("stats %+v", st)
	}
	q.(queue.Stopper).Stop()

	q2, n, err := stream.NewType(stream.Config{Dir: dir}).Recover(d, l, queue.Hooks{})
	if err != nil || n != 20 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	if q2.(*stream.Queue).Log().Segments() < 5 {
		t.Fatal("the stream did not roll its small segments")
	}
	publishN(t, q2, 20, 22)
	c := queuetest.NewRecorder(-1, false)
	q2.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Prefetch: 100, Args: map[string]any{"x-stream-offset": int64(18)}})
	q2.Kick(nil)
	got := c.Take()
	if fmt.Sprint(queuetest.Bodies(got)) != "[18 19 20 21]" || got[3].Seq != 21 {
		t.Fatalf("after recovery got %v", queuetest.Bodies(got))
	}
	if _, _, err := q2.Delete(false, true); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)  { c.ns.Add(int64(d)) }
func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.ns.Store(t.UnixNano()); return c }

// fakeTicker hands out one tick channel per stream and records its
// period and whether it was stopped.
type fakeTicker struct {
	mu      sync.Mutex
	c       chan time.Time
	every   time.Duration
	stopped bool
}

func (f *fakeTicker) start(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.c, f.every, f.stopped = make(chan time.Time), d, false
	c := f.c
	return c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.c == c {
			f.stopped = true
		}
	}
}

func (f *fakeTicker) state() (chan time.Time, time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.c, f.every, f.stopped
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func segFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// x-max-length-bytes: a roll drops the oldest segments; Stats and
// declare-ok count what is retained (at most the limit and the active
// segment: as in RabbitMQ, retention runs when a segment rolls); a consumer holding a delivery in a
// dropped segment continues at the first retained offset.
func TestStreamRetentionByBytes(t *testing.T) {
	dir := t.TempDir()
	typ := stream.NewType(stream.Config{Dir: dir})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1,
		Args: map[string]any{"x-stream-max-segment-size-bytes": int64(200), "x-max-length-bytes": int64(600)}}
	l, _ := queue.ParseArgs(d.Args)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Delete(false, false)
	a := queuetest.NewRecorder(1, false)
	q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Prefetch: 1, Args: map[string]any{"x-stream-offset": "first"}})
	q.Kick(nil)
	publishN(t, q, 0, 50)
	got := a.Take()
	if len(got) != 1 || got[0].Seq != 0 {
		t.Fatalf("a got %v", queuetest.Bodies(got))
	}
	sq := q.(*stream.Queue)
	first, end, _ := sq.Log().Bounds()
	st := q.Stats()
	if first == 0 || end != 50 || st.Ready != int(end-first) || st.ReadyBytes > 600+200 {
		t.Fatalf("after 50 publishes: bounds %d..%d, stats %+v", first, end, st)
	}
	if n := segFiles(t, dir); n != sq.Log().Segments() {
		t.Fatalf("%d segment files for %d segments", n, sq.Log().Segments())
	}
	if m, c := sq.DeclareCounts(); m != st.Ready || c != 0 {
		t.Fatalf("declare counts %d %d, want %d 0", m, c, st.Ready)
	}
	q.Settle(got, queue.Ack)
	a.Grant(1)
	q.Kick(nil)
	if got := a.Take(); len(got) != 1 || got[0].Seq != first {
		t.Fatalf("after the drop a got %v, want offset %d", got, first)
	}
}

// x-max-age: the stream's ticker (period a tenth of the age, between a
// second and a minute) drops the segments that became too old on the injected clock;
// Delete stops the ticker.
func TestStreamRetentionByAge(t *testing.T) {
	clock := newFakeClock(time.Unix(1_700_000_000, 0))
	tk := &fakeTicker{}
	dir := t.TempDir()
	typ := stream.NewType(stream.Config{Dir: dir, Now: clock.now, Ticker: tk.start})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1,
		Args: map[string]any{"x-stream-max-segment-size-bytes": int64(200), "x-max-age": "1h"}}
	l, _ := queue.ParseArgs(d.Args)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	sq := q.(*stream.Queue)
	publishN(t, q, 0, 20)
	segs := sq.Log().Segments()
	if segs < 3 {
		t.Fatalf("%d segments", segs)
	}
	waitFor(t, "the ticker", func() bool { c, _, _ := tk.state(); return c != nil })
	c, every, _ := tk.state()
	if every != time.Minute {
		t.Fatalf("ticker period %v, want 1m", every)
	}
	c <- clock.now() // nothing is old yet
	clock.add(30 * time.Minute)
	publishN(t, q, 20, 21)
	clock.add(31 * time.Minute) // the first 20 are 61 minutes old, the last 31
	c <- clock.now()
	// The files go right after the log drops the segments.
	waitFor(t, "the age drop", func() bool {
		return (sq.Log().Segments() == 1 || q.Stats().Ready == 1) && segFiles(t, dir) == sq.Log().Segments()
	})
	if first, end, _ := sq.Log().Bounds(); end-first > 2 || segFiles(t, dir) != sq.Log().Segments() {
		t.Fatalf("after the age drop: %d..%d in %d segments", first, end, sq.Log().Segments())
	}
	q.Delete(false, false)
	if _, _, stopped := tk.state(); !stopped {
		t.Fatal("the ticker runs on after Delete")
	}
}

// A policy's max-length-bytes wins over the argument and applies at once
// (SetLimits); its max-age starts the ticker, Stop stops it.
func TestStreamRetentionByPolicy(t *testing.T) {
	tk := &fakeTicker{}
	typ := stream.NewType(stream.Config{Dir: t.TempDir(), Ticker: tk.start})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1,
		Args: map[string]any{"x-stream-max-segment-size-bytes": int64(200), "x-max-length-bytes": int64(1 << 30)}}
	l, _ := queue.ParseArgs(d.Args)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	sq := q.(*stream.Queue)
	publishN(t, q, 0, 30)
	if sq.Log().Segments() < 3 {
		t.Fatalf("%d segments", sq.Log().Segments())
	}
	l.Policy = &queue.Policy{Name: "p", Definition: map[string]any{"max-length-bytes": float64(1), "max-age": "7D",
		"stream-max-segment-size-bytes": int64(100_000)}}
	sq.SetLimits(l)
	if s := sq.Settings(); s.MaxLengthBytes != 1 || s.MaxAge != 7*24*time.Hour || s.SegmentSize != 100_000 {
		t.Fatalf("settings %+v", s)
	}
	waitFor(t, "the policy's drop", func() bool { return sq.Log().Segments() == 1 })
	waitFor(t, "the policy's ticker", func() bool { _, every, _ := tk.state(); return every == time.Minute })
	q.(queue.Stopper).Stop()
	if _, _, stopped := tk.state(); !stopped {
		t.Fatal("the ticker runs on after Stop")
	}
}
