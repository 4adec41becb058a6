package binding

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// refSplit splits a key into words as RabbitMQ's split_topic_key does: ""
// has no words, every '.' separates two (possibly empty) words.
func refSplit(key string) []string {
	if key == "" {
		return []string{}
	}
	var words []string
	word := []byte{}
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			words = append(words, string(word))
			word = []byte{}
			continue
		}
		word = append(word, key[i])
	}
	return append(words, string(word))
}

// refTopicMatch is the slow reference: the recursive definition of topic
// matching ('#' matches zero words, or one word and is still '#'; '*' one word;
// anything else itself) evaluated over word lists with a memo table, so that
// patterns with many '#' stay polynomial.
func refTopicMatch(pattern, key []string) bool {
	memo := make(map[[2]int]bool)
	var match func(p, k int) bool
	match = func(p, k int) bool {
		if r, ok := memo[[2]int{p, k}]; ok {
			return r
		}
		var r bool
		switch {
		case p == len(pattern):
			r = k == len(key)
		case pattern[p] == "#":
			r = match(p+1, k) || (k < len(key) && match(p, k+1))
		case pattern[p] == "*":
			r = k < len(key) && match(p+1, k+1)
		default:
			r = k < len(key) && key[k] == pattern[p] && match(p+1, k+1)
		}
		memo[[2]int{p, k}] = r
		return r
	}
	return match(0, 0)
}

func q(name string) Destination { return Destination{Kind: Queue, Name: name} }

func names(ds []Destination) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	slices.Sort(out)
	return out
}

// rabbitTopicKeys were bound, one queue each, to a topic exchange of
// RabbitMQ 3.10.8; rabbitTopicResults records which of them received a
// message published with each routing key.
var rabbitTopicKeys = []string{"#", "*", "", "a.#", "#.a", "a.#.b", "a.*", "*.a", "a..b", ".", "*.*",
	"#.#", "a.", ".a", "*.", "#.", ".#", "#.*", "*.#", "a.*.#", "#.b.#"}

var rabbitTopicResults = map[string][]string{
	"":      {"#", "#.#", ""},
	".":     {"#", "*.*", "#.#", "*.", "#.", ".#", "#.*", "*.#", "."},
	"a.":    {"#", "*.*", "#.#", "a.", "*.", "#.", "#.*", "*.#", "a.*.#", "a.#", "a.*"},
	".a":    {"#", "*.*", "#.#", ".a", ".#", "#.*", "*.#", "#.a", "*.a"},
	"a..b":  {"#", "#.#", "#.*", "*.#", "a.*.#", "#.b.#", "a.#", "a.#.b", "a..b"},
	"a":     {"#", "#.#", "#.*", "*.#", "*", "a.#", "#.a"},
	"a.b":   {"#", "*.*", "#.#", "#.*", "*.#", "a.*.#", "#.b.#", "a.#", "a.#.b", "a.*"},
	"b":     {"#", "#.#", "#.*", "*.#", "*", "#.b.#"},
	"a.x.b": {"#", "#.#", "#.*", "*.#", "a.*.#", "#.b.#", "a.#", "a.#.b"},
	"..":    {"#", "#.#", "#.", ".#", "#.*", "*.#"},
	"a.b.c": {"#", "#.#", "#.*", "*.#", "a.*.#", "#.b.#", "a.#"},
	"*":     {"#", "#.#", "#.*", "*.#", "*"},
	"#":     {"#", "#.#", "#.*", "*.#", "*"},
	"x.a":   {"#", "*.*", "#.#", "#.*", "*.#", "#.a", "*.a"},
}

func TestTopicMatchesRabbitMQ(t *testing.T) {
	m := NewTopic()
	for _, k := range rabbitTopicKeys {
		// The destination is named after its binding key.
		if !m.Add(Binding{Dest: q(k), Key: k}) {
			t.Fatalf("Add(%q) = false", k)
		}
	}
	for key, want := range rabbitTopicResults {
		want = slices.Clone(want)
		slices.Sort(want)
		got := names(m.Match(key, nil, nil))
		if !slices.Equal(got, want) {
			t.Errorf("Match(%q) = %q, want %q", key, got, want)
		}
		// The reference agrees with RabbitMQ too.
		var ref []string
		for _, k := range rabbitTopicKeys {
			if refTopicMatch(refSplit(k), refSplit(key)) {
				ref = append(ref, k)
			}
		}
		slices.Sort(ref)
		if !slices.Equal(ref, want) {
			t.Errorf("reference(%q) = %q, want %q", key, ref, want)
		}
	}
}

func TestTopicRules(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"a.#", "a", true},
		{"#.a", "a", true},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.b.c", false},
		{"a.#", "abc", false},
		{"a.#", "ab.c", false},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"*", "", false},
		{"#", "", true},
		{"", "", true},
		{"", ".", false},
		{"a*", "ab", false},
		{"a*", "a*", true},
		{"##", "a", false},
		{"##", "##", true},
		{"#.#.#", "", true},
		{"#.*.#", "", false},
		{"#.*.#", "x", true},
		{"*.*", ".", true},
		{"a.*.b", "a..b", true},
		{"#.a.#.a.#.a", "a.a.a", true},
		{"#.a.#.a.#.a", "a.a", false},
		{"a", "a.", false},
		{"a.", "a.", true},
	}
	for _, tt := range tests {
		m := NewTopic()
		m.Add(Binding{Dest: q("q"), Key: tt.pattern})
		got := len(m.Match(tt.key, nil, nil)) == 1
		if got != tt.want {
			t.Errorf("pattern %q key %q: got %v, want %v", tt.pattern, tt.key, got, tt.want)
		}
		if ref := refTopicMatch(refSplit(tt.pattern), refSplit(tt.key)); ref != tt.want {
			t.Errorf("reference: pattern %q key %q: got %v, want %v", tt.pattern, tt.key, ref, tt.want)
		}
	}
}

func TestTopicDedupAndRemove(t *testing.T) {
	m := NewTopic()
	m.Add(Binding{Dest: q("q1"), Key: "a.*"})
	m.Add(Binding{Dest: q("q1"), Key: "#"})
	m.Add(Binding{Dest: q("q1"), Key: "a.b", Args: map[string]any{"x": int32(1)}})
	m.Add(Binding{Dest: q("q1"), Key: "a.b"})
	m.Add(Binding{Dest: q("q2"), Key: "a.b"})
	if m.Add(Binding{Dest: q("q1"), Key: "a.b", Args: map[string]any{"x": int32(1)}}) {
		t.Fatal("duplicate Add returned true")
	}
	if got := names(m.Match("a.b", nil, nil)); !slices.Equal(got, []string{"q1", "q2"}) {
		t.Fatalf("Match = %q", got)
	}
	if m.Len() != 5 {
		t.Fatalf("Len = %d", m.Len())
	}
	// Removing one of two bindings to q1 with key a.b keeps the other.
	if !m.Remove(Binding{Dest: q("q1"), Key: "a.b"}) {
		t.Fatal("Remove = false")
	}
	if m.Remove(Binding{Dest: q("q1"), Key: "a.b"}) {
		t.Fatal("second Remove = true")
	}
	if got := names(m.Match("a.b", nil, nil)); !slices.Equal(got, []string{"q1", "q2"}) {
		t.Fatalf("Match = %q", got)
	}
	if n := m.RemoveDest(q("q1")); n != 3 {
		t.Fatalf("RemoveDest = %d", n)
	}
	if got := names(m.Match("a.b", nil, nil)); !slices.Equal(got, []string{"q2"}) {
		t.Fatalf("Match = %q", got)
	}
	if got := names(m.Match("x", nil, nil)); len(got) != 0 {
		t.Fatalf("Match(x) = %q", got)
	}
	m.Remove(Binding{Dest: q("q2"), Key: "a.b"})
	if m.Len() != 0 || m.root != nil {
		t.Fatalf("not empty after removing all: len %d root %v", m.Len(), m.root)
	}
}

// FuzzTopicMatch checks Topic against the backtracking reference. patterns
// holds binding keys separated by '\n'; key is the routing key. After the
// first check, every other binding is removed and the check repeated.
func FuzzTopicMatch(f *testing.F) {
	f.Add(strings.Join(rabbitTopicKeys, "\n"), "a.b")
	for k := range rabbitTopicResults {
		f.Add(strings.Join(rabbitTopicKeys, "\n"), k)
	}
	f.Add("#.a.#\n*.*.#\na.#.#.b", "a.a.b")
	f.Add("#.#.#.#.x", "a.b.c.d.e.f.g.h.x")
	f.Fuzz(func(t *testing.T, patterns, key string) {
		if len(patterns) > 512 || len(key) > 64 {
			t.Skip()
		}
		ps := strings.Split(patterns, "\n")
		if len(ps) > 40 {
			t.Skip()
		}
		m := NewTopic()
		for i, p := range ps {
			m.Add(Binding{Dest: q(fmt.Sprint(i)), Key: p})
		}
		check := func(live func(i int) bool) {
			got := m.Match(key, nil, nil)
			seen := map[string]bool{}
			for _, d := range got {
				if seen[d.Name] {
					t.Fatalf("destination %s matched twice", d.Name)
				}
				seen[d.Name] = true
			}
			kw := refSplit(key)
			for i, p := range ps {
				want := live(i) && refTopicMatch(refSplit(p), kw)
				if seen[fmt.Sprint(i)] != want {
					t.Fatalf("pattern %q key %q: got %v want %v", p, key, !want, want)
				}
			}
		}
		check(func(int) bool { return true })
		for i, p := range ps {
			if i%2 == 0 {
				m.Remove(Binding{Dest: q(fmt.Sprint(i)), Key: p})
			}
		}
		check(func(i int) bool { return i%2 == 1 })
	})
}

// TestTopicAdversarial: backtracking needs time exponential in the number of
// '#' here; the NFA stays linear in words × live nodes.
func TestTopicAdversarial(t *testing.T) {
	m := NewTopic()
	pattern := strings.Repeat("#.a.", 20) + "b"
	m.Add(Binding{Dest: q("x"), Key: pattern})
	m.Add(Binding{Dest: q("y"), Key: strings.Repeat("#.", 30) + "#"})
	key := strings.TrimSuffix(strings.Repeat("a.", 120), ".")
	if got := names(m.Match(key, nil, nil)); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("Match = %q", got)
	}
	if got := names(m.Match(key+".b", nil, nil)); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("Match(+b) = %q", got)
	}
}
