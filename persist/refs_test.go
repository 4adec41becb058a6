package persist

import (
	"math/rand/v2"
	"testing"
)

// TestRefTableMatchesMap drives the run-based table and a plain map with
// the same random operations and compares them.
func TestRefTableMatchesMap(t *testing.T) {
	rt := newRefTable()
	want := map[uint64]int64{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		id := uint64(r.IntN(500))
		n := int64(r.IntN(4))
		rt.set(id, n)
		if n == 0 {
			delete(want, id)
		} else {
			want[id] = n
		}
	}
	for id := uint64(0); id < 520; id++ {
		if got := rt.get(id); got != want[id] {
			t.Fatalf("id %d: got %d, want %d", id, got, want[id])
		}
	}
	for i := 1; i < len(rt.runs); i++ {
		if rt.runs[i-1].hi+1 >= rt.runs[i].lo {
			t.Fatalf("runs %v and %v overlap or touch", rt.runs[i-1], rt.runs[i])
		}
	}
}

// TestRefTableBacklogIsOneRun checks the point of the structure: a long
// backlog of single-entry messages costs one run, and draining it in order
// leaves nothing.
func TestRefTableBacklogIsOneRun(t *testing.T) {
	rt := newRefTable()
	for id := uint64(1); id <= 1_000_000; id++ {
		rt.set(id, 1)
	}
	if len(rt.runs) != 1 || len(rt.multi) != 0 {
		t.Fatalf("%d runs, %d multi for a contiguous backlog", len(rt.runs), len(rt.multi))
	}
	for id := uint64(1); id <= 1_000_000; id++ {
		rt.set(id, 0)
	}
	if len(rt.runs) != 0 {
		t.Fatalf("%d runs left after draining", len(rt.runs))
	}
}
