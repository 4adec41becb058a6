package binding

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func BenchmarkDirectMatch(b *testing.B) {
	m := NewDirect()
	for i := range 10000 {
		m.Add(Binding{Dest: q(fmt.Sprintf("queue-%d", i)), Key: fmt.Sprintf("key.%d", i)})
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("key.%d", (i*7919)%10000)
	}
	out := make([]Destination, 0, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		out = m.Match(keys[i&1023], nil, out[:0])
	}
}

// topicBindings returns n binding keys of 2-5 words over a 20-word
// vocabulary; about 1 in 6 words is '*' and 1 in 20 keys contains '#'.
func topicBindings(r *rand.Rand, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		nw := 2 + r.IntN(4)
		words := make([]string, nw)
		for j := range words {
			switch x := r.IntN(60); {
			case x < 10:
				words[j] = "*"
			default:
				words[j] = fmt.Sprintf("w%d", r.IntN(20))
			}
		}
		if r.IntN(20) == 0 {
			words[r.IntN(nw)] = "#"
		}
		keys[i] = strings.Join(words, ".")
	}
	return keys
}

func topicKeys(r *rand.Rand, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		nw := 2 + r.IntN(4)
		words := make([]string, nw)
		for j := range words {
			words[j] = fmt.Sprintf("w%d", r.IntN(20))
		}
		keys[i] = strings.Join(words, ".")
	}
	return keys
}

func BenchmarkTopicMatch10k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	m := NewTopic()
	for i, k := range topicBindings(r, 10000) {
		m.Add(Binding{Dest: q(fmt.Sprintf("queue-%d", i%2000)), Key: k})
	}
	keys := topicKeys(r, 1024)
	out := make([]Destination, 0, 256)
	total := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		out = m.Match(keys[i&1023], nil, out[:0])
		total += len(out)
	}
	b.ReportMetric(float64(total)/float64(b.N), "matches/op")
}

func BenchmarkHeadersMatch(b *testing.B) {
	m := NewHeaders()
	for i := range 100 {
		mode := "all"
		if i%2 == 1 {
			mode = "any"
		}
		m.Add(Binding{Dest: q(fmt.Sprintf("queue-%d", i)), Args: map[string]any{
			"x-match": mode, "format": fmt.Sprintf("f%d", i%10), "type": "report", "level": int32(i % 5),
		}})
	}
	hdrs := map[string]any{"format": "f3", "type": "report", "level": int64(3), "x-extra": true}
	out := make([]Destination, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		out = m.Match("", hdrs, out[:0])
	}
}

// BenchmarkBindManyKeysOneQueue binds n distinct topic keys to one queue and
// then removes them; ns/op is for all of them.
func BenchmarkBindManyKeysOneQueue(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("stock.%d.nyse", i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				m := NewTopic()
				for _, k := range keys {
					m.Add(Binding{Dest: q("one"), Key: k})
				}
				for _, k := range keys {
					m.Remove(Binding{Dest: q("one"), Key: k})
				}
			}
		})
	}
}
