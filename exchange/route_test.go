package exchange

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/warrenmq/warren/binding"
)

// vhost is a map of exchanges for tests.
type vhost map[string]*Exchange

func (v vhost) lookup(name string) *Exchange { return v[name] }

func (v vhost) decl(name string, k Kind, ae string) *Exchange {
	var args map[string]any
	if ae != "-" {
		args = map[string]any{"alternate-exchange": ae}
	}
	x := New(Decl{Name: name, Kind: k, Args: args})
	v[name] = x
	return x
}

func bindQ(t *testing.T, x *Exchange, queue, key string) {
	t.Helper()
	if _, err := x.Bind(binding.Binding{Dest: binding.Destination{Kind: binding.Queue, Name: queue}, Key: key}); err != nil {
		t.Fatal(err)
	}
}

func bindX(t *testing.T, x *Exchange, dest, key string) {
	t.Helper()
	if _, err := x.Bind(binding.Binding{Dest: binding.Destination{Kind: binding.Exchange, Name: dest}, Key: key}); err != nil {
		t.Fatal(err)
	}
}

func routeAll(v vhost, start, key string, s *Scratch) []string {
	got := RouteAll(v.lookup, v[start], key, nil, s, nil)
	slices.Sort(got)
	return got
}

// TestRouteAllRabbitMQ replays scenarios run against RabbitMQ 3.10.8.
func TestRouteAllRabbitMQ(t *testing.T) {
	var s Scratch
	check := func(name string, v vhost, start, key string, want ...string) {
		t.Helper()
		got := routeAll(v, start, key, &s)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	v := vhost{}
	bindQ(t, v.decl("aeX", Fanout, "-"), "q1", "")
	bindQ(t, v.decl("aeY", Fanout, "-"), "q2", "")
	x := v.decl("X", Direct, "aeX")
	y := v.decl("Y", Direct, "aeY")
	bindX(t, x, "Y", "k")
	// X routes k to Y, so X's AE is not used; Y matches nothing, so Y's AE is.
	check("e2e then AE of the bound exchange", v, "X", "k", "q2")
	check("unroutable at X", v, "X", "zz", "q1")
	bindX(t, y, "X", "k")
	check("cycle X<->Y", v, "X", "k")
	// AE chain: aeX (direct, nothing matches) -> its AE aeY (fanout) -> q2.
	v.decl("aeX", Direct, "aeY")
	check("AE chain", v, "X", "zz", "q2")
	// AE cycle: X -> aeX -> aeY -> X.
	v.decl("aeY", Direct, "X")
	check("AE cycle", v, "X", "zz")
	v.decl("X", Direct, "nonexistent")
	check("AE missing", v, "X", "zz")
	v.decl("X", Direct, "")
	check("AE is the default exchange", v, "X", "p.q3")
	internal := New(Decl{Name: "int", Kind: Fanout, Internal: true})
	v["int"] = internal
	bindQ(t, internal, "qae", "")
	v.decl("X", Direct, "int")
	check("AE internal", v, "X", "zz", "qae")
	v.decl("Y", Direct, "-")
	x = v.decl("X", Direct, "int")
	bindX(t, x, "Y", "k")
	check("bound exchange routes nothing, X's AE unused", v, "X", "k")
	bindQ(t, x, "q1", "k")
	bindQ(t, v["Y"], "q1", "k")
	check("queue reached twice, listed once", v, "X", "k", "q1")
	bindX(t, x, "X", "k")
	check("self binding", v, "X", "k", "q1")
}

func TestRouteAllMore(t *testing.T) {
	var s Scratch
	v := vhost{}
	// A diamond: a -> b, a -> c, b -> d, c -> d; d -> q.
	a, b, c, d := v.decl("a", Fanout, "-"), v.decl("b", Fanout, "-"), v.decl("c", Topic, "-"), v.decl("d", Direct, "-")
	bindX(t, a, "b", "")
	bindX(t, a, "c", "")
	bindX(t, b, "d", "")
	bindX(t, c, "d", "#")
	bindQ(t, d, "q", "r")
	bindQ(t, c, "qc", "r.#")
	bindQ(t, a, "qa", "")
	if got := routeAll(v, "a", "r", &s); !slices.Equal(got, []string{"q", "qa", "qc"}) {
		t.Errorf("diamond: %q", got)
	}
	if got := routeAll(v, "a", "s", &s); !slices.Equal(got, []string{"qa"}) {
		t.Errorf("diamond, key s: %q", got)
	}
	// A long e2e chain with an AE at the end.
	v2 := vhost{}
	for i := range 50 {
		x := v2.decl(fmt.Sprint(i), Direct, "-")
		if i < 49 {
			bindX(t, x, fmt.Sprint(i+1), "k")
		}
	}
	v2.decl("49", Direct, "ae")
	bindQ(t, v2.decl("ae", Fanout, "-"), "end", "")
	if got := routeAll(v2, "0", "k", &s); !slices.Equal(got, []string{"end"}) {
		t.Errorf("chain: %q", got)
	}
	// Nil start and nil scratch.
	if got := RouteAll(v.lookup, nil, "k", nil, nil, nil); got != nil {
		t.Errorf("nil start: %q", got)
	}
	if got := RouteAll(v.lookup, a, "r", nil, nil, []string{"pre"}); len(got) != 4 || got[0] != "pre" {
		t.Errorf("nil scratch, prefilled out: %q", got)
	}
	// Headers exchange in a chain.
	v3 := vhost{}
	h := v3.decl("h", Headers, "ae")
	bindQ(t, v3.decl("ae", Fanout, "-"), "unroutable", "")
	if _, err := h.Bind(binding.Binding{Dest: binding.Destination{Kind: binding.Queue, Name: "red"},
		Args: map[string]any{"colour": "red"}}); err != nil {
		t.Fatal(err)
	}
	got := RouteAll(v3.lookup, h, "", map[string]any{"colour": "red"}, &s, nil)
	if !slices.Equal(got, []string{"red"}) {
		t.Errorf("headers: %q", got)
	}
	got = RouteAll(v3.lookup, h, "", map[string]any{"colour": "blue"}, &s, nil)
	if !slices.Equal(got, []string{"unroutable"}) {
		t.Errorf("headers AE: %q", got)
	}
}

func TestRouteAllDoesNotAllocate(t *testing.T) {
	v := vhost{}
	a := v.decl("a", Topic, "ae")
	bindQ(t, v.decl("ae", Fanout, "-"), "qae", "")
	b := v.decl("b", Fanout, "-")
	bindX(t, a, "b", "x.#")
	bindQ(t, a, "q1", "x.*")
	bindQ(t, b, "q1", "")
	bindQ(t, b, "q2", "")
	var s Scratch
	out := make([]string, 0, 8)
	for _, key := range []string{"x.y", "nothing"} {
		n := testing.AllocsPerRun(100, func() {
			out = RouteAll(v.lookup, a, key, nil, &s, out[:0])
		})
		if n != 0 || len(out) == 0 {
			t.Errorf("key %q: %v allocs, out %q", key, n, out)
		}
	}
}

// TestConcurrentRouteAll routes from several goroutines, each with its own
// Scratch, as channels do under the vhost's read lock.
func TestConcurrentRouteAll(t *testing.T) {
	v := vhost{}
	a := v.decl("a", Topic, "ae")
	bindQ(t, v.decl("ae", Fanout, "-"), "qae", "")
	b := v.decl("b", Fanout, "a")
	bindX(t, a, "b", "x.#")
	bindQ(t, a, "q1", "x.*")
	bindQ(t, b, "q1", "")
	bindQ(t, b, "q2", "")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var s Scratch
			var out []string
			for i := range 1000 {
				key := "x.y"
				if i%2 == 1 {
					key = "z"
				}
				out = RouteAll(v.lookup, a, key, nil, &s, out[:0])
				if len(out) == 0 {
					t.Error("routed nowhere")
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestRouteAllManyQueues crosses the small-set thresholds of Scratch, and
// reuses one Scratch across calls of different sizes.
func TestRouteAllManyQueues(t *testing.T) {
	v := vhost{}
	a := v.decl("a", Fanout, "-")
	for _, n := range []string{"b", "c"} {
		e := v.decl(n, Fanout, "-")
		bindX(t, a, n, "")
		for i := range 30 {
			bindQ(t, e, fmt.Sprint(n, i%20), "")
			bindQ(t, e, fmt.Sprint("shared", i), "")
		}
	}
	small := v.decl("small", Direct, "-")
	bindQ(t, small, "only", "k")
	var s Scratch
	for range 3 {
		got := RouteAll(v.lookup, a, "", nil, &s, nil)
		seen := map[string]bool{}
		for _, q := range got {
			if seen[q] {
				t.Fatalf("%s twice", q)
			}
			seen[q] = true
		}
		if len(got) != 70 {
			t.Fatalf("got %d queues, want 70", len(got))
		}
		if got := RouteAll(v.lookup, small, "k", nil, &s, nil); !slices.Equal(got, []string{"only"}) {
			t.Fatalf("small after large: %q", got)
		}
	}
}
