package binding

import (
	"fmt"
	"slices"
	"testing"
)

func TestDirect(t *testing.T) {
	m := NewDirect()
	m.Add(Binding{Dest: q("q1"), Key: "k"})
	m.Add(Binding{Dest: q("q2"), Key: "k"}) // all matches, not the first one only
	m.Add(Binding{Dest: q("q1"), Key: "k", Args: map[string]any{"x": "y"}})
	m.Add(Binding{Dest: Destination{Kind: Exchange, Name: "q1"}, Key: "k"})
	m.Add(Binding{Dest: q("q3"), Key: "other"})
	got := m.Match("k", nil, nil)
	if len(got) != 3 {
		t.Fatalf("Match = %v", got)
	}
	if m.Match("K", nil, nil) != nil || m.Match("", nil, nil) != nil {
		t.Fatal("keys are case-sensitive and exact")
	}
	m.Remove(Binding{Dest: q("q1"), Key: "k"})
	if got := m.Match("k", nil, nil); len(got) != 3 {
		t.Fatalf("q1 still bound with args: %v", got)
	}
	if n := m.RemoveDest(q("q1")); n != 1 {
		t.Fatalf("RemoveDest = %d", n)
	}
	if got := m.Match("k", nil, nil); len(got) != 2 {
		t.Fatalf("Match = %v", got)
	}
	if m.Len() != 3 {
		t.Fatalf("Len = %d", m.Len())
	}
	// Argument types are part of a binding's identity (RabbitMQ 3.10.8: an
	// unbind with {a: long 1} leaves a binding with {a: signedint 1}).
	m.Add(Binding{Dest: q("t"), Key: "t", Args: map[string]any{"a": int32(1)}})
	if m.Remove(Binding{Dest: q("t"), Key: "t", Args: map[string]any{"a": int64(1)}}) {
		t.Fatal("Remove with int64 arg removed the int32 binding")
	}
	if !m.Remove(Binding{Dest: q("t"), Key: "t", Args: map[string]any{"a": int32(1)}}) {
		t.Fatal("Remove with the same arg type failed")
	}
}

func TestFanout(t *testing.T) {
	m := NewFanout()
	for i := range 40 {
		m.Add(Binding{Dest: q(fmt.Sprint(i)), Key: "a"})
		m.Add(Binding{Dest: q(fmt.Sprint(i)), Key: "b"})
	}
	if got := m.Match("zzz", nil, nil); len(got) != 40 {
		t.Fatalf("Match = %d", len(got))
	}
	m.Remove(Binding{Dest: q("3"), Key: "a"})
	if got := m.Match("", nil, nil); len(got) != 40 {
		t.Fatalf("one binding to 3 left: %d", len(got))
	}
	m.Remove(Binding{Dest: q("3"), Key: "b"})
	m.RemoveDest(q("7"))
	got := names(m.Match("", nil, nil))
	if len(got) != 38 || slices.Contains(got, "3") || slices.Contains(got, "7") {
		t.Fatalf("Match = %v", got)
	}
	if m.Len() != 76 {
		t.Fatalf("Len = %d", m.Len())
	}
}

func TestBindingsStableOrder(t *testing.T) {
	for _, m := range []Matcher{NewDirect(), NewFanout(), NewTopic(), NewHeaders()} {
		m.Add(Binding{Dest: q("b"), Key: "k2"})
		m.Add(Binding{Dest: q("a"), Key: "k2"})
		m.Add(Binding{Dest: Destination{Kind: Exchange, Name: "a"}, Key: "k1"})
		m.Add(Binding{Dest: q("a"), Key: "k2", Args: map[string]any{"z": "1"}})
		got := m.Bindings()
		want := []string{"k1/exchange/a/map[]", "k2/queue/a/map[]", "k2/queue/a/map[z:1]", "k2/queue/b/map[]"}
		var gs []string
		for _, b := range got {
			gs = append(gs, fmt.Sprintf("%s/%s/%s/%v", b.Key, b.Dest.Kind, b.Dest.Name, b.Args))
		}
		if !slices.Equal(gs, want) {
			t.Errorf("%T: Bindings = %v", m, gs)
		}
	}
}

func TestNilAndEmptyArgsAreTheSameBinding(t *testing.T) {
	for _, m := range []Matcher{NewDirect(), NewFanout(), NewTopic(), NewHeaders()} {
		m.Add(Binding{Dest: q("a"), Key: "k"})
		if m.Add(Binding{Dest: q("a"), Key: "k", Args: map[string]any{}}) {
			t.Errorf("%T: empty args differ from nil", m)
		}
		if !m.Remove(Binding{Dest: q("a"), Key: "k", Args: map[string]any{}}) || m.Len() != 0 {
			t.Errorf("%T: Remove", m)
		}
	}
}

func TestDedup(t *testing.T) {
	for _, size := range []int{0, 1, 2, 10, 16, 17, 100, 512, 513, 3000} {
		for _, distinct := range []int{1, 7, 37, 1000} {
			out := []Destination{q("keep")}
			for i := range size {
				d := q(fmt.Sprint(i % distinct))
				if i%3 == 0 {
					d.Kind = Exchange
				}
				out = append(out, d)
			}
			want := map[Destination]bool{}
			for _, d := range out[1:] {
				want[d] = true
			}
			out = dedup(out, 1)
			if out[0] != q("keep") || len(out)-1 != len(want) {
				t.Fatalf("size %d distinct %d: got %d want %d", size, distinct, len(out)-1, len(want))
			}
			for _, d := range out[1:] {
				if !want[d] {
					t.Fatalf("size %d distinct %d: %v twice or unknown", size, distinct, d)
				}
				delete(want, d)
			}
		}
	}
}

func TestDestCountsIndex(t *testing.T) {
	var dc destCounts
	for i := range 100 {
		dc.inc(q(fmt.Sprint(i)))
	}
	dc.inc(q("5"))
	for i := range 100 {
		if i%2 == 0 {
			dc.dec(q(fmt.Sprint(i)), 1)
		}
	}
	if len(dc.list) != 50 {
		t.Fatalf("len %d", len(dc.list))
	}
	for i, d := range dc.list {
		if dc.idx[d] != int32(i) || dc.find(d) != i {
			t.Fatalf("index broken at %d", i)
		}
	}
	if dc.dec(q("5"), 1) != 1 || dc.dec(q("5"), -1) != 0 || dc.find(q("5")) >= 0 {
		t.Fatal("refcount of 5")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	topic := NewTopic()
	topic.Add(Binding{Dest: q("a"), Key: "a.*.c"})
	topic.Add(Binding{Dest: q("a"), Key: "#"})
	topic.Add(Binding{Dest: q("b"), Key: "a.#"})
	direct := NewDirect()
	direct.Add(Binding{Dest: q("a"), Key: "k"})
	fanout := NewFanout()
	fanout.Add(Binding{Dest: q("a")})
	headers := NewHeaders()
	headers.Add(Binding{Dest: q("a"), Args: map[string]any{"x-match": "any", "h": int32(1), "s": "v"}})
	headers.Add(Binding{Dest: q("a"), Args: map[string]any{"s": []byte("v")}})
	hdrs := map[string]any{"h": int64(1), "s": "v"}
	out := make([]Destination, 0, 16)
	for _, tc := range []struct {
		name string
		m    Matcher
		key  string
	}{{"topic", topic, "a.b.c"}, {"direct", direct, "k"}, {"fanout", fanout, ""}, {"headers", headers, ""}} {
		n := testing.AllocsPerRun(100, func() { out = tc.m.Match(tc.key, hdrs, out[:0]) })
		if n != 0 || len(out) == 0 {
			t.Errorf("%s: %v allocs, %d matches", tc.name, n, len(out))
		}
	}
}

func TestValueEqualMisc(t *testing.T) {
	type other struct{ A []int } // not comparable
	if ValueEqual(other{}, other{}) {
		t.Error("non-comparable unknown type compared equal")
	}
	if !ValueEqual(decimal{2, 5}, decimal{2, 5}) || ValueEqual(decimal{2, 5}, nil) {
		t.Error("decimal")
	}
	if ValueEqual(nil, "") || !ValueEqual(nil, nil) {
		t.Error("void")
	}
	if !TypedEqual(table{"a": []any{int8(1)}}, map[string]any{"a": []any{int8(1)}}) {
		t.Error("named table")
	}
	if TypeName(decimal{}) != "decimal" || TypeName(table{}) != "table" || TypeName(int32(0)) != "signedint" {
		t.Error("TypeName")
	}
}

func TestErlangTerm(t *testing.T) {
	for v, want := range map[any]string{
		"all": `<<"all">>`, int32(1): "1", float64(1): "1.0", float32(1.5): "1.5", 1e20: "1.0e20",
		true: "true", nil: "undefined", uint64(1 << 63): "9223372036854775808", `a"b`: `<<"a\"b">>`,
	} {
		if got := ErlangTerm(v); got != want {
			t.Errorf("ErlangTerm(%#v) = %s, want %s", v, got, want)
		}
	}
}
