package exchange

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/warrenmq/warren/binding"
)

func queueDest(name string) binding.Destination {
	return binding.Destination{Kind: binding.Queue, Name: name}
}

func benchRouteAll(b *testing.B, v vhost, start string, keys []string, headers map[string]any) {
	var s Scratch
	out := make([]string, 0, 256)
	lookup := v.lookup
	x := v[start]
	total := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		out = RouteAll(lookup, x, keys[i%len(keys)], headers, &s, out[:0])
		total += len(out)
	}
	b.ReportMetric(float64(total)/float64(b.N), "queues/op")
}

func BenchmarkRouteAllDirect(b *testing.B) {
	v := vhost{}
	x := v.decl("x", Direct, "-")
	for i := range 1000 {
		x.Bind(binding.Binding{Dest: queueDest(fmt.Sprintf("q%d", i)), Key: fmt.Sprintf("k%d", i)})
	}
	benchRouteAll(b, v, "x", []string{"k1", "k500", "k999"}, nil)
}

func BenchmarkRouteAllFanout(b *testing.B) {
	v := vhost{}
	x := v.decl("x", Fanout, "-")
	for i := range 10 {
		x.Bind(binding.Binding{Dest: queueDest(fmt.Sprintf("q%d", i))})
	}
	benchRouteAll(b, v, "x", []string{""}, nil)
}

// BenchmarkRouteAllFanoutE2E routes through a fanout bound to two more
// fanouts that share some queues, so queue dedup across exchanges is used.
func BenchmarkRouteAllFanoutE2E(b *testing.B) {
	v := vhost{}
	x := v.decl("x", Fanout, "-")
	for _, n := range []string{"y", "z"} {
		e := v.decl(n, Fanout, "-")
		x.Bind(binding.Binding{Dest: binding.Destination{Kind: binding.Exchange, Name: n}})
		for i := range 5 {
			e.Bind(binding.Binding{Dest: queueDest(fmt.Sprintf("q%d", i))})
		}
	}
	benchRouteAll(b, v, "x", []string{""}, nil)
}

func BenchmarkRouteAllTopic10k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%d", r.IntN(20)) }
	v := vhost{}
	x := v.decl("x", Topic, "ae")
	bindQ := v.decl("ae", Fanout, "-")
	bindQ.Bind(binding.Binding{Dest: queueDest("unroutable")})
	for i := range 10000 {
		nw := 2 + r.IntN(4)
		words := make([]string, nw)
		for j := range words {
			if r.IntN(6) == 0 {
				words[j] = "*"
			} else {
				words[j] = word()
			}
		}
		if r.IntN(20) == 0 {
			words[r.IntN(nw)] = "#"
		}
		x.Bind(binding.Binding{Dest: queueDest(fmt.Sprintf("q%d", i%2000)), Key: strings.Join(words, ".")})
	}
	keys := make([]string, 1024)
	for i := range keys {
		nw := 2 + r.IntN(4)
		words := make([]string, nw)
		for j := range words {
			words[j] = word()
		}
		keys[i] = strings.Join(words, ".")
	}
	benchRouteAll(b, v, "x", keys, nil)
}

func BenchmarkRouteAllHeaders(b *testing.B) {
	v := vhost{}
	x := v.decl("x", Headers, "-")
	for i := range 100 {
		mode := "all"
		if i%2 == 1 {
			mode = "any"
		}
		x.Bind(binding.Binding{Dest: queueDest(fmt.Sprintf("q%d", i)), Args: map[string]any{
			"x-match": mode, "format": fmt.Sprintf("f%d", i%10), "type": "report", "level": int32(i % 5),
		}})
	}
	hdrs := map[string]any{"format": "f3", "type": "report", "level": int64(3)}
	benchRouteAll(b, v, "x", []string{""}, hdrs)
}
