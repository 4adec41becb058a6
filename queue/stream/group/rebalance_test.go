package group

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func evKinds(evs []Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Kind.String())
	}
	return s
}

func TestRebalanceRevokeWaitsForSettlements(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	inFlight := make([]int, 4)
	r := NewRebalancer(4, clock, func(p int) int { return inFlight[p] })

	evs := r.Join(1, 5*time.Second)
	if len(evs) != 4 {
		t.Fatalf("first join: %v", evs)
	}
	for p, e := range evs {
		if e.Kind != Move || e.Partition != p || e.From != NoMember || e.To != 1 || e.Gen != 1 {
			t.Fatalf("first join event %d: %+v", p, e)
		}
	}
	inFlight[2], inFlight[3] = 1, 2
	evs = r.Join(2, time.Second)
	if len(evs) != 2 || evs[0] != (Event{Kind: Revoke, Partition: 2, From: 1, To: 2, Gen: 1}) || evs[1].Partition != 3 || evs[1].Kind != Revoke {
		t.Fatalf("second join: %+v", evs)
	}
	if m, g, ok := r.Owner(2); m != 1 || g != 1 || ok {
		t.Fatalf("revoked partition: owner %d gen %d deliverable %v", m, g, ok)
	}
	if m, _, ok := r.Owner(0); m != 1 || !ok {
		t.Fatalf("kept partition: %d %v", m, ok)
	}
	if d, ok := r.NextDeadline(); !ok || !d.Equal(clock.t.Add(5*time.Second)) {
		t.Fatalf("deadline %v %v: the old owner's timeout applies", d, ok)
	}
	// The old owner settles partition 2: it moves, not timed out.
	inFlight[2] = 0
	if evs := r.Settled(2); len(evs) != 1 || evs[0] != (Event{Kind: Move, Partition: 2, From: 1, To: 2, Gen: 2}) {
		t.Fatalf("settled: %+v", evs)
	}
	inFlight[3] = 1
	if evs := r.Settled(3); len(evs) != 0 {
		t.Fatalf("partial settle moved: %+v", evs)
	}
	clock.Advance(5*time.Second - time.Nanosecond)
	if evs := r.Tick(); len(evs) != 0 {
		t.Fatalf("tick before the deadline: %+v", evs)
	}
	clock.Advance(time.Nanosecond)
	if evs := r.Tick(); len(evs) != 1 || evs[0] != (Event{Kind: Move, Partition: 3, From: 1, To: 2, Gen: 2, TimedOut: true}) {
		t.Fatalf("tick at the deadline: %+v", evs)
	}
	if _, ok := r.NextDeadline(); ok {
		t.Fatal("deadline left after all moves")
	}
	if got := r.Owners(); !slices.Equal(got, []Member{1, 1, 2, 2}) {
		t.Fatalf("owners %v", got)
	}
}

func TestRebalanceOwnerGoneMovesAtOnce(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	inFlight := make([]int, 2)
	r := NewRebalancer(2, clock, func(p int) int { return inFlight[p] })
	r.Join(1, time.Minute)
	inFlight[0], inFlight[1] = 3, 3
	if evs := r.Join(2, time.Minute); len(evs) != 1 || evs[0].Kind != Revoke || evs[0].Partition != 1 {
		t.Fatalf("join: %+v", evs)
	}
	// Member 1 dies with deliveries in flight: both partitions go to 2 now.
	evs := r.Leave(1)
	if len(evs) != 2 {
		t.Fatalf("leave: %+v", evs)
	}
	for p, e := range evs {
		if e.Kind != Move || e.Partition != p || e.From != 1 || e.To != 2 || e.Gen != 2 || e.TimedOut {
			t.Fatalf("leave event %d: %+v", p, e)
		}
	}
	if evs := r.Leave(1); evs != nil {
		t.Fatalf("second leave: %+v", evs)
	}
	// The last member leaves: the partitions are unowned under a new
	// generation (acks of the gone member are fenced).
	evs = r.Leave(2)
	if len(evs) != 2 || evs[0].To != NoMember || evs[0].Gen != 3 {
		t.Fatalf("last leave: %+v", evs)
	}
	if _, _, ok := r.Owner(0); ok {
		t.Fatal("unowned partition deliverable")
	}
}

func TestRebalanceResumeAndZeroTimeout(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	inFlight := []int{0, 0}
	r := NewRebalancer(2, clock, func(p int) int { return inFlight[p] })
	r.Join(1, time.Minute)
	inFlight[1] = 1
	if evs := r.Join(2, time.Minute); evs[0].Kind != Revoke {
		t.Fatalf("%v", evKinds(evs))
	}
	// Member 2 leaves before the move: partition 1 stays with 1.
	if evs := r.Leave(2); len(evs) != 1 || evs[0] != (Event{Kind: Resume, Partition: 1, From: 1, To: 1, Gen: 1}) {
		t.Fatalf("resume: %+v", evs)
	}
	if _, g, ok := r.Owner(1); !ok || g != 1 {
		t.Fatal("resumed partition not deliverable under its generation")
	}
	// With a zero timeout a revoked partition moves at once, timed out.
	r2 := NewRebalancer(2, clock, func(p int) int { return inFlight[p] })
	r2.Join(1, 0)
	if evs := r2.Join(2, 0); len(evs) != 1 || evs[0].Kind != Move || !evs[0].TimedOut {
		t.Fatalf("zero timeout: %+v", evs)
	}
	// A negative timeout is the default.
	r3 := NewRebalancer(2, clock, func(p int) int { return inFlight[p] })
	r3.Join(1, -1)
	r3.Join(2, -1)
	if d, ok := r3.NextDeadline(); !ok || !d.Equal(clock.t.Add(DefaultRebalanceTimeout)) {
		t.Fatalf("default timeout deadline %v %v", d, ok)
	}
}

// A simulated group: members join and leave, the broker delivers each
// partition's offsets in order to its deliverable owner, members settle
// their deliveries (promptly or not), the clock moves. Checked throughout:
//   - a delivery goes only to the partition's deliverable owner;
//   - a Move happens only when the old owner has nothing in flight, timed
//     out, or is gone; generations grow by one per move;
//   - an offset is delivered twice only if it was requeued, or was in
//     flight at a timed-out move or when its member left;
//   - every partition's committed offset never passes an unsettled one;
//   - once quiet, owners are Assign's balanced answer.
func TestRebalanceSimulation(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		simulate(t, seed)
	}
}

type held struct {
	p   int
	off int64
	gen Generation
}

func simulate(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	const n = 6
	clock := &fakeClock{t: time.Unix(0, 0)}
	wms := make([]*Watermark, n)
	for p := range wms {
		wms[p] = NewWatermark(0, 0)
	}
	rb := NewRebalancer(n, clock, func(p int) int { return wms[p].InFlight() })
	holding := map[Member][]held{}
	prompt := map[Member]bool{}
	delivered := make([]map[int64]int, n)
	mayDup := make([]map[int64]bool, n)
	for p := range delivered {
		delivered[p], mayDup[p] = map[int64]int{}, map[int64]bool{}
	}
	gens := make([]Generation, n)
	var members []Member
	next := Member(1)

	apply := func(evs []Event, gone Member) {
		for _, e := range evs {
			switch e.Kind {
			case Move:
				w := wms[e.Partition]
				if w.InFlight() > 0 && !e.TimedOut && e.From != gone {
					t.Fatalf("seed %d: move of %d with %d in flight, not timed out, owner present", seed, e.Partition, w.InFlight())
				}
				if e.Gen != gens[e.Partition]+1 {
					t.Fatalf("seed %d: generation %d after %d", seed, e.Gen, gens[e.Partition])
				}
				gens[e.Partition] = e.Gen
				for _, h := range holding[e.From] {
					if h.p == e.Partition && h.gen == w.Generation() && w.InFlight() > 0 {
						mayDup[h.p][h.off] = true
					}
				}
				if err := w.Handover(e.Gen); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	settle := func(m Member, i int) {
		h := holding[m][i]
		holding[m] = append(holding[m][:i], holding[m][i+1:]...)
		w := wms[h.p]
		if r.IntN(5) == 0 {
			if w.Nack(h.gen, h.off, true) {
				mayDup[h.p][h.off] = true // requeued: redelivered=true
			}
		} else {
			w.Ack(h.gen, h.off)
		}
		apply(rb.Settled(h.p), NoMember)
	}
	for step := 0; step < 600; step++ {
		switch op := r.IntN(100); {
		case op < 6 && len(members) < 9:
			m := next
			next++
			members = append(members, m)
			prompt[m] = r.IntN(3) > 0
			apply(rb.Join(m, time.Duration(1+r.IntN(5))*time.Second), NoMember)
		case op < 10 && len(members) > 0:
			i := r.IntN(len(members))
			m := members[i]
			members = append(members[:i], members[i+1:]...)
			for _, h := range holding[m] {
				if h.gen == wms[h.p].Generation() {
					mayDup[h.p][h.off] = true
				}
			}
			apply(rb.Leave(m), m)
			delete(holding, m) // the dead member's tags are gone
		case op < 55: // the broker delivers on a random partition
			p := r.IntN(n)
			owner, gen, ok := rb.Owner(p)
			if !ok {
				break
			}
			w := wms[p]
			if gen != w.Generation() {
				t.Fatalf("seed %d: owner generation %d, watermark %d", seed, gen, w.Generation())
			}
			off, redo := w.NextRedelivery()
			if !redo {
				off = w.High()
				if err := w.Deliver(off); err != nil {
					t.Fatal(err)
				}
			}
			delivered[p][off]++
			if delivered[p][off] > 1 && !mayDup[p][off] {
				t.Fatalf("seed %d: offset %d of %d delivered twice, never requeued nor handed over unsettled", seed, off, p)
			}
			holding[owner] = append(holding[owner], held{p, off, gen})
		case op < 90: // a member settles one of its deliveries
			if len(members) == 0 {
				break
			}
			m := members[r.IntN(len(members))]
			if len(holding[m]) > 0 && (prompt[m] || r.IntN(4) == 0) {
				settle(m, r.IntN(len(holding[m])))
			}
		default:
			clock.Advance(time.Duration(r.IntN(1500)) * time.Millisecond)
			apply(rb.Tick(), NoMember)
		}
	}
	// Quiesce: everyone settles everything, deadlines pass.
	for _, m := range members {
		for len(holding[m]) > 0 {
			settle(m, 0)
		}
	}
	clock.Advance(time.Hour)
	apply(rb.Tick(), NoMember)
	owners := rb.Owners()
	if want := Assign(n, members, owners); !slices.Equal(owners, want) {
		t.Fatalf("seed %d: quiet owners %v, Assign says %v", seed, owners, want)
	}
	if len(members) > 0 && !balanced(n, members, owners) {
		t.Fatalf("seed %d: unbalanced %v", seed, owners)
	}
	for p, w := range wms {
		if w.InFlight() != 0 {
			t.Fatalf("seed %d: partition %d still has %d in flight", seed, p, w.InFlight())
		}
	}
}

// A retired member (basic.cancel) keeps the partitions with deliveries in
// flight until they are settled or its timeout passes; the others move at
// once, and it is forgotten once it owns nothing.
func TestRebalanceRetireWaitsForInFlight(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	inFlight := make([]int, 4)
	r := NewRebalancer(4, clock, func(p int) int { return inFlight[p] })
	r.Join(1, 3*time.Second)
	r.Join(2, time.Second) // 1 owns 0 1, 2 owns 2 3
	inFlight[0] = 2
	evs := r.Retire(1)
	if len(evs) != 2 || evs[0] != (Event{Kind: Revoke, Partition: 0, From: 1, To: 2, Gen: 1}) || evs[1].Kind != Move || evs[1].Partition != 1 || evs[1].To != 2 {
		t.Fatalf("retire: %+v", evs)
	}
	if d, ok := r.NextDeadline(); !ok || !d.Equal(clock.t.Add(3*time.Second)) {
		t.Fatalf("deadline %v %v: the retired member's timeout applies", d, ok)
	}
	if got := r.Members(); !slices.Equal(got, []Member{2}) {
		t.Fatalf("members %v", got)
	}
	inFlight[0] = 0
	if evs := r.Settled(0); len(evs) != 1 || evs[0].Kind != Move || evs[0].To != 2 || evs[0].TimedOut {
		t.Fatalf("settled: %+v", evs)
	}
	if len(r.retiring) != 0 {
		t.Fatalf("retired member not forgotten: %v", r.retiring)
	}
	// The last member retires with nothing in flight: everything is
	// unowned at once; a retire of a non-member does nothing.
	if evs := r.Retire(2); len(evs) != 4 || slices.ContainsFunc(evs, func(e Event) bool { return e.Kind != Move || e.To != NoMember }) {
		t.Fatalf("last retire: %+v", evs)
	}
	if evs := r.Retire(7); evs != nil {
		t.Fatalf("retire of a stranger: %+v", evs)
	}
}
