package binding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// refHeadersMatch follows the shape of RabbitMQ's algorithm: a merge of the
// binding arguments and the headers, both sorted by name, with the all/any
// flags carried along; it shares only ValueEqual with Headers.
func refHeadersMatch(args, hdrs map[string]any) bool {
	mode := "all"
	if s, ok := args["x-match"].(string); ok {
		mode = s
	}
	withX := strings.HasSuffix(mode, "-with-x")
	anyMode := strings.HasPrefix(mode, "any")
	var pk, dk []string
	for k := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		pk = append(pk, k)
	}
	for k := range hdrs {
		dk = append(dk, k)
	}
	slices.Sort(pk)
	slices.Sort(dk)
	all, anyOK := true, false
	i, j := 0, 0
	for i < len(pk) {
		switch {
		case j == len(dk) || pk[i] < dk[j]:
			all = false
			i++
		case pk[i] > dk[j]:
			j++
		default:
			pv, dv := args[pk[i]], hdrs[dk[j]]
			if pv == nil || ValueEqual(pv, dv) {
				anyOK = true
			} else {
				all = false
			}
			i++
			j++
		}
	}
	if anyMode {
		return anyOK
	}
	return all
}

var modelValues = []any{nil, true, false, int8(1), uint8(1), int16(-1), int32(1), int64(1), uint64(1),
	float32(1), float64(1), float64(0.5), "1", "a", []byte("a"), time.Unix(1, 0), []any{int32(1)},
	[]any{int64(1)}, map[string]any{"k": "a"}, table{"k": "a"}, decimal{0, 1}}

func randTable(r *rand.Rand, withMatch bool) map[string]any {
	names := []string{"a", "b", "c", "x-a", "x-b"}
	t := map[string]any{}
	for range r.IntN(4) {
		t[names[r.IntN(len(names))]] = modelValues[r.IntN(len(modelValues))]
	}
	if withMatch && r.IntN(4) > 0 {
		t["x-match"] = []string{"all", "any", "all-with-x", "any-with-x"}[r.IntN(4)]
	}
	return t
}

func randTopicKey(r *rand.Rand, pattern bool) string {
	words := []string{"a", "b", "", "*", "#"}
	if !pattern {
		words = words[:3]
	}
	n := r.IntN(5)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[r.IntN(len(words))]
	}
	return strings.Join(ws, ".")
}

// TestMatchersAgainstModel applies random Add/Remove/RemoveDest sequences to
// each matcher and to a plain list of bindings, and compares Match, Len and
// Bindings with brute force over the list after every step.
func TestMatchersAgainstModel(t *testing.T) {
	kinds := []struct {
		name  string
		new   func() Matcher
		match func(b Binding, key string, hdrs map[string]any) bool
	}{
		{"direct", func() Matcher { return NewDirect() }, func(b Binding, key string, _ map[string]any) bool { return b.Key == key }},
		{"fanout", func() Matcher { return NewFanout() }, func(Binding, string, map[string]any) bool { return true }},
		{"topic", func() Matcher { return NewTopic() }, func(b Binding, key string, _ map[string]any) bool {
			return refTopicMatch(refSplit(b.Key), refSplit(key))
		}},
		{"headers", func() Matcher { return NewHeaders() }, func(b Binding, _ string, hdrs map[string]any) bool {
			return refHeadersMatch(b.Args, hdrs)
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(kind.name))))
			for round := range 80 {
				m := kind.new()
				var model []Binding
				for step := range 60 {
					d := Destination{Kind: Kind(r.IntN(2)), Name: fmt.Sprint(r.IntN(6))}
					b := Binding{Dest: d, Key: randTopicKey(r, true), Args: randTable(r, kind.name == "headers")}
					if kind.name == "direct" {
						b.Key = []string{"a", "b", ""}[r.IntN(3)]
					}
					idx := slices.IndexFunc(model, func(x Binding) bool {
						return x.Dest == b.Dest && x.Key == b.Key && ArgsEqual(x.Args, b.Args)
					})
					switch op := r.IntN(10); {
					case op < 6:
						if got := m.Add(b); got != (idx < 0) {
							t.Fatalf("round %d step %d: Add = %v", round, step, got)
						}
						if idx < 0 {
							model = append(model, b)
						}
					case op < 8 && len(model) > 0:
						b = model[r.IntN(len(model))]
						if !m.Remove(b) {
							t.Fatalf("Remove existing = false")
						}
						model = slices.DeleteFunc(model, func(x Binding) bool {
							return x.Dest == b.Dest && x.Key == b.Key && ArgsEqual(x.Args, b.Args)
						})
					case op < 9:
						if got := m.Remove(b); got != (idx >= 0) {
							t.Fatalf("Remove = %v", got)
						}
						if idx >= 0 {
							model = slices.Delete(model, idx, idx+1)
						}
					default:
						n := len(model)
						model = slices.DeleteFunc(model, func(x Binding) bool { return x.Dest == d })
						if got := m.RemoveDest(d); got != n-len(model) {
							t.Fatalf("RemoveDest = %d, want %d", got, n-len(model))
						}
					}
					if m.Len() != len(model) || len(m.Bindings()) != len(model) {
						t.Fatalf("Len = %d, Bindings %d, want %d", m.Len(), len(m.Bindings()), len(model))
					}
					for range 5 {
						key := randTopicKey(r, false)
						if kind.name == "direct" {
							key = []string{"a", "b", "", "c"}[r.IntN(4)]
						}
						hdrs := randTable(r, false)
						want := map[Destination]bool{}
						for _, x := range model {
							if kind.match(x, key, hdrs) {
								want[x.Dest] = true
							}
						}
						got := m.Match(key, hdrs, nil)
						if len(got) != len(want) {
							t.Fatalf("Match(%q, %v) = %v, want %v\nmodel %v", key, hdrs, got, want, model)
						}
						for _, g := range got {
							if !want[g] {
								t.Fatalf("Match(%q, %v) = %v, want %v", key, hdrs, got, want)
							}
						}
					}
				}
			}
		})
	}
}

// TestConcurrentMatch runs Match from several goroutines at once, as readers
// under the vhost's read lock do; the race detector checks that Match writes
// no shared state.
func TestConcurrentMatch(t *testing.T) {
	ms := []Matcher{NewDirect(), NewFanout(), NewTopic(), NewHeaders()}
	for _, m := range ms {
		for i := range 100 {
			m.Add(Binding{Dest: q(fmt.Sprint(i % 30)), Key: []string{"a.b", "a.*", "#", "a.#.b"}[i%4],
				Args: map[string]any{"a": int32(i % 3), "x-match": "any"}})
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			out := make([]Destination, 0, 64)
			for i := range 500 {
				for _, m := range ms {
					out = m.Match("a.b", map[string]any{"a": int64((i + g) % 3)}, out[:0])
					if len(out) == 0 {
						t.Error("no match")
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
