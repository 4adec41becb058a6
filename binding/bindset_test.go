package binding

import (
	"fmt"
	"testing"
)

// TestBindSetManyKeysOneDest: binding, re-binding and unbinding keys of one
// destination with many bindings compares a bounded number of stored
// entries per call, not every binding the destination already has.
func TestBindSetManyKeysOneDest(t *testing.T) {
	const n = 5000
	var s bindSet
	d := Destination{Kind: Queue, Name: "one"}
	other := Destination{Kind: Queue, Name: "two"}
	for i := range n {
		if _, ok := s.add(Binding{Dest: d, Key: fmt.Sprint("k", i)}); !ok {
			t.Fatalf("key %d not new", i)
		}
	}
	s.add(Binding{Dest: d, Key: "k1", Args: map[string]any{"x": 1}})
	s.add(Binding{Dest: other, Key: "k1"})
	if s.n != n+2 {
		t.Fatalf("n = %d, want %d", s.n, n+2)
	}
	s.probes = 0
	ops := 0
	for i := range n {
		b := Binding{Dest: d, Key: fmt.Sprint("k", i)}
		if _, ok := s.add(b); ok {
			t.Fatalf("key %d added twice", i)
		}
		if _, ok := s.remove(b); !ok {
			t.Fatalf("key %d not removed", i)
		}
		ops += 2
	}
	if s.probes > 2*ops {
		t.Fatalf("%d entries compared for %d operations", s.probes, ops)
	}
	if s.n != 2 {
		t.Fatalf("n = %d after removing, want 2", s.n)
	}
	if _, ok := s.remove(Binding{Dest: d, Key: "k1"}); ok {
		t.Fatal("k1 without args removed twice")
	}
	got := s.list()
	if len(got) != 2 || got[0].Args == nil && got[1].Args == nil {
		t.Fatalf("left %v", got)
	}
	if es := s.removeDest(d); len(es) != 1 || es[0].key != "k1" || es[0].args["x"] != 1 {
		t.Fatalf("removeDest: %v", es)
	}
	if s.n != 1 {
		t.Fatalf("n = %d, want 1", s.n)
	}
}
