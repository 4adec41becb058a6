package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestWatermarkTable(t *testing.T) {
	w := NewWatermark(10, 1)
	if w.Committed() != 10 || w.High() != 10 {
		t.Fatalf("start: %d %d", w.Committed(), w.High())
	}
	for _, off := range []int64{10, 11, 12, 14} { // 13 filtered out
		if err := w.Deliver(off); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, committed int64, inFlight, pending int) {
		t.Helper()
		if w.Committed() != committed || w.InFlight() != inFlight || w.Pending() != pending {
			t.Fatalf("%s: committed %d in flight %d pending %d; want %d %d %d", step,
				w.Committed(), w.InFlight(), w.Pending(), committed, inFlight, pending)
		}
	}
	check("delivered", 10, 4, 0)
	if !w.Ack(1, 12) {
		t.Fatal("ack 12")
	}
	check("ack above the lowest", 10, 3, 0)
	if w.Ack(1, 12) {
		t.Fatal("repeated ack counted")
	}
	if w.Ack(0, 10) {
		t.Fatal("ack of an old generation counted")
	}
	check("fenced", 10, 3, 0)
	w.Ack(1, 10)
	check("ack lowest", 11, 2, 0)
	w.Nack(1, 11, true)
	check("requeue", 11, 1, 1)
	if off, ok := w.NextRedelivery(); !ok || off != 11 {
		t.Fatalf("redelivery %d %v", off, ok)
	}
	if _, ok := w.NextRedelivery(); ok {
		t.Fatal("second redelivery")
	}
	check("redelivered", 11, 2, 0)
	w.Nack(1, 11, false)
	check("reject counts as processed", 14, 1, 0)
	w.Ack(1, 14)
	check("all acked: one past the highest delivered", 15, 0, 0)
	w.Pass(20)
	check("passed a filtered tail", 21, 0, 0)
	if err := w.Deliver(3); !errors.Is(err, ErrDeliveryOrder) {
		t.Fatalf("deliver below high: %v", err)
	}
	// Handover: what is in flight waits for the new owner; the old owner's
	// acks are fenced.
	w.Deliver(21)
	w.Deliver(22)
	if err := w.Handover(2); err != nil {
		t.Fatal(err)
	}
	check("handover", 21, 0, 2)
	if w.Ack(1, 21) {
		t.Fatal("old owner's ack after handover moved the offset")
	}
	if err := w.Handover(2); !errors.Is(err, ErrGeneration) {
		t.Fatalf("handover to the same generation: %v", err)
	}
	a, _ := w.NextRedelivery()
	b, _ := w.NextRedelivery()
	if a != 21 || b != 22 {
		t.Fatalf("redeliveries %d %d", a, b)
	}
	w.Ack(2, 22)
	w.Ack(2, 21)
	check("new owner acks", 23, 0, 0)
}

// refWatermark is the slow model: a map from every delivered offset to its
// state, the committed offset by a scan.
type refWatermark struct {
	state map[int64]slotState
	high  int64
	gen   Generation
}

func (r *refWatermark) committed() int64 {
	c := r.high
	for off, s := range r.state {
		if s != done && off < c {
			c = off
		}
	}
	return c
}

func (r *refWatermark) count(s slotState) int {
	n := 0
	for _, x := range r.state {
		if x == s {
			n++
		}
	}
	return n
}

func (r *refWatermark) lowestPending() (int64, bool) {
	best, ok := int64(0), false
	for off, s := range r.state {
		if s == pending && (!ok || off < best) {
			best, ok = off, true
		}
	}
	return best, ok
}

// Random deliveries, out-of-order acks, nacks with and without requeue,
// redeliveries, stale-generation acks and handovers, checked against the
// model after every step; the committed offset never passes an
// unprocessed delivery and never goes back.
func TestWatermarkRandom(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		start := int64(r.IntN(1000))
		w := NewWatermark(start, 1)
		ref := &refWatermark{state: map[int64]slotState{}, high: start, gen: 1}
		type del struct {
			off int64
			gen Generation
		}
		var out []del // deliveries the "client" holds, unsettled
		last := w.Committed()
		for step := 0; step < 400; step++ {
			switch op := r.IntN(100); {
			case op < 35: // new delivery, sometimes after a gap
				off := ref.high + int64(r.IntN(3))
				if err := w.Deliver(off); err != nil {
					t.Fatal(err)
				}
				ref.state[off] = inFlight
				ref.high = off + 1
				out = append(out, del{off, ref.gen})
			case op < 40:
				off := ref.high + int64(r.IntN(4))
				w.Pass(off)
				if off >= ref.high {
					ref.high = off + 1
				}
			case op < 75 && len(out) > 0: // settle a random held delivery
				i := r.IntN(len(out))
				d := out[i]
				out = append(out[:i], out[i+1:]...)
				var got bool
				kind := r.IntN(10)
				switch {
				case kind < 6:
					got = w.Ack(d.gen, d.off)
				case kind < 8:
					got = w.Nack(d.gen, d.off, true)
				default:
					got = w.Nack(d.gen, d.off, false)
				}
				want := d.gen == ref.gen && ref.state[d.off] == inFlight
				if got != want {
					t.Fatalf("seed %d step %d: settle %v = %v, want %v", seed, step, d, got, want)
				}
				if want {
					if kind >= 6 && kind < 8 {
						ref.state[d.off] = pending
					} else {
						ref.state[d.off] = done
					}
				}
			case op < 85: // redeliver
				off, ok := w.NextRedelivery()
				roff, rok := ref.lowestPending()
				if ok != rok || off != roff {
					t.Fatalf("seed %d step %d: redelivery %d %v, want %d %v", seed, step, off, ok, roff, rok)
				}
				if ok {
					ref.state[off] = inFlight
					out = append(out, del{off, ref.gen})
				}
			case op < 88: // handover to a new owner
				ref.gen++
				if err := w.Handover(ref.gen); err != nil {
					t.Fatal(err)
				}
				for off, s := range ref.state {
					if s == inFlight {
						ref.state[off] = pending
					}
				}
			case op < 92 && len(out) > 0: // a repeated ack of something settled or stale
				d := out[r.IntN(len(out))]
				if ref.state[d.off] != inFlight || d.gen != ref.gen {
					if w.Ack(d.gen, d.off) {
						t.Fatalf("seed %d: repeated/stale ack counted", seed)
					}
				}
			}
			if got, want := w.Committed(), ref.committed(); got != want {
				t.Fatalf("seed %d step %d: committed %d, model %d", seed, step, got, want)
			}
			if w.Committed() < last {
				t.Fatalf("seed %d step %d: committed went back from %d to %d", seed, step, last, w.Committed())
			}
			last = w.Committed()
			if w.InFlight() != ref.count(inFlight) || w.Pending() != ref.count(pending) || w.High() != ref.high {
				t.Fatalf("seed %d step %d: in flight %d pending %d high %d; model %d %d %d", seed, step,
					w.InFlight(), w.Pending(), w.High(), ref.count(inFlight), ref.count(pending), ref.high)
			}
		}
	}
}

// Many outstanding deliveries acked in random order: the window does not
// cost O(n) per ack (this would take minutes at O(n^2) with n = 200,000
// under -race; it is a cost check, not a timing assertion) and memory is
// given back.
func TestWatermarkManyOutstanding(t *testing.T) {
	const n = 200000
	w := NewWatermark(0, 1)
	for i := int64(0); i < n; i++ {
		w.Deliver(i)
	}
	r := rand.New(rand.NewPCG(3, 4))
	perm := r.Perm(n)
	acked := make([]bool, n)
	low := 0
	for _, i := range perm {
		w.Ack(1, int64(i))
		acked[i] = true
		for low < n && acked[low] {
			low++
		}
		if w.Committed() != int64(low) {
			t.Fatalf("committed %d, want %d", w.Committed(), low)
		}
	}
	if w.Committed() != n || w.Outstanding() != 0 || cap(w.win) != 0 {
		t.Fatalf("end: committed %d outstanding %d window %d", w.Committed(), w.Outstanding(), len(w.win))
	}
}

func BenchmarkWatermarkAck(b *testing.B) {
	b.ReportAllocs()
	w := NewWatermark(0, 1)
	const window = 1000
	for i := int64(0); i < window; i++ {
		w.Deliver(i)
	}
	next := int64(window)
	for i := 0; i < b.N; i++ {
		// ack the second-oldest, then the oldest: one out of order each time
		c := w.Committed()
		w.Ack(1, c+1)
		w.Ack(1, c)
		w.Deliver(next)
		w.Deliver(next + 1)
		next += 2
	}
}

// Processed lists what is done above the committed offset, skipped
// offsets included, and nothing once the committed offset passes them.
func TestWatermarkProcessedAndSkip(t *testing.T) {
	w := NewWatermark(10, 1)
	for _, o := range []int64{10, 11, 12} {
		if err := w.Deliver(o); err != nil {
			t.Fatal(err)
		}
	}
	w.Ack(1, 12)
	if err := w.Skip(13); err != nil {
		t.Fatal(err)
	}
	w.Pass(14)
	if err := w.Deliver(15); err != nil {
		t.Fatal(err)
	}
	w.Ack(1, 15)
	if got := fmt.Sprint(w.Processed(nil)); got != "[12 13 15]" || w.Committed() != 10 {
		t.Fatalf("Processed = %s, Committed = %d", got, w.Committed())
	}
	if err := w.Skip(3); err == nil {
		t.Fatal("Skip below High accepted")
	}
	w.Ack(1, 10)
	w.Nack(1, 11, false)
	if got := w.Processed(nil); len(got) != 0 || w.Committed() != 16 {
		t.Fatalf("after all settled: Processed = %v, Committed = %d", got, w.Committed())
	}
	// With nothing outstanding a skipped offset just moves the watermark.
	if err := w.Skip(20); err != nil || w.Committed() != 21 || len(w.Processed(nil)) != 0 {
		t.Fatalf("Skip with nothing outstanding: committed %d, %v", w.Committed(), err)
	}
}
