package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

func TestBodyRoundTrip(t *testing.T) {
	b := make([]byte, 1024)
	encodeBody(b, 1700000000123456789, 42, 4000000000)
	ts, p, seq, err := decodeBody(b)
	if err != nil || ts != 1700000000123456789 || p != 42 || seq != 4000000000 {
		t.Fatalf("got %d %d %d %v", ts, p, seq, err)
	}
	min := make([]byte, minBodySize)
	encodeBody(min, -5, 0, 1)
	if ts, _, seq, err := decodeBody(min); err != nil || ts != -5 || seq != 1 {
		t.Fatalf("16-byte body: %d %d %v", ts, seq, err)
	}
	if _, _, _, err := decodeBody(b[:15]); err == nil {
		t.Fatal("short body accepted")
	}
}

// TestTagSettler: every tag settled once, whatever the order and mix of
// single and multiple acks, also when a lagging tag is far below the rest
// (a slot-per-tag ring of the window's size lost count there).
func TestTagSettler(t *testing.T) {
	var s tagSettler
	count := map[uint64]int{}
	f := func(tag uint64) { count[tag]++ }
	for tag := uint64(2); tag <= 1000; tag++ { // 1 lags behind 999 others
		s.settle(tag, false, f)
	}
	s.settle(500, false, f) // again
	s.settle(1, false, f)
	s.settle(1000, true, f)
	s.settle(1003, false, f)
	s.settle(1005, true, f) // 1001, 1002, 1004, 1005
	s.settle(1003, true, f)
	for tag := uint64(1); tag <= 1005; tag++ {
		if count[tag] != 1 {
			t.Fatalf("tag %d settled %d times", tag, count[tag])
		}
	}
	if len(count) != 1005 || s.low != 1006 || len(s.early) != 0 {
		t.Fatalf("%d tags, low %d, %d early", len(count), s.low, len(s.early))
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	if h.percentile(50) != 0 {
		t.Fatal("empty histogram")
	}
	// Small values are exact.
	for v := int64(1); v <= 100; v++ {
		h.record(v)
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := h.percentile(c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	// Large values: within 1/64 of the exact percentile of a sample.
	rng := rand.New(rand.NewSource(1))
	var vals []int64
	h.reset()
	for i := 0; i < 100000; i++ {
		v := int64(rng.ExpFloat64() * 5e6) // ns, mean 5 ms
		vals = append(vals, v)
		h.record(v)
	}
	slices.Sort(vals)
	for _, p := range []float64{50, 95, 99, 99.9} {
		exact := vals[int(p/100*float64(len(vals)))-1]
		got := h.percentile(p)
		if d := float64(got-exact) / float64(exact); d < -1.0/64 || d > 1.0/64 {
			t.Errorf("p%v = %d, exact %d (%.2f%%)", p, got, exact, d*100)
		}
	}
	if h.percentile(100) != vals[len(vals)-1] || h.max != vals[len(vals)-1] {
		t.Errorf("max %d want %d", h.max, vals[len(vals)-1])
	}
	// Merge keeps counts and extremes.
	var a, b histogram
	a.record(10)
	b.record(1 << 40)
	a.merge(&b)
	if a.total != 2 || a.min != 10 || a.max != 1<<40 || a.percentile(100) != 1<<40 {
		t.Errorf("merge: %+v", a.total)
	}
	// Every bucket's upper bound maps back to the bucket.
	for i := 0; i < histIndex(1<<50); i++ {
		if histIndex(histValue(i)) != i || histIndex(histValue(i)+1) != i+1 {
			t.Fatalf("bucket %d bounds", i)
		}
	}
}

func TestSeqTracker(t *testing.T) {
	var tr seqTracker
	for _, s := range []uint32{0, 1, 3, 2, 3, 100000} {
		tr.add(s)
	}
	if tr.duplicates != 1 || tr.outOfOrder != 1 || !tr.seen.has(100000) || tr.seen.has(4) {
		t.Fatalf("%+v", tr)
	}
	var o bitset
	o.set(1)
	o.set(5)
	if both := tr.seen.orCount(&o); both != 1 || !tr.seen.has(5) {
		t.Fatalf("orCount %d", both)
	}
}

func runAgainst(t *testing.T, url string, args ...string) *Summary {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--url", url, "--quiet", "--queue-prefix", "perf-test-" + t.Name()}, args...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sum, err := Run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sum.Lost == nil || *sum.Lost != 0 || sum.Duplicates != 0 || sum.Received != *sum.Expected || sum.Received == 0 {
		t.Fatalf("sent %d received %d expected %v lost %v dup %d", sum.Sent, sum.Received, sum.Expected, sum.Lost, sum.Duplicates)
	}
	return sum
}

func TestEndToEnd(t *testing.T) {
	url := servertest.Start(t, server.Config{})
	t.Run("confirms-manual-ack", func(t *testing.T) {
		s := runAgainst(t, url, "--producers", "2", "--consumers", "2", "--queues", "2", "--size", "100",
			"--confirm", "50", "--prefetch", "50", "--multi-ack-every", "10", "--duration", "500ms", "--count", "20000")
		if s.Confirmed != s.Sent || s.OutOfOrder != 0 {
			t.Fatalf("confirmed %d sent %d ooo %d", s.Confirmed, s.Sent, s.OutOfOrder)
		}
	})
	t.Run("confirm-trace", func(t *testing.T) {
		// Every confirm of both lean producers, in publish order.
		file := filepath.Join(t.TempDir(), "trace")
		s := runAgainst(t, url, "--producers", "2", "--consumers", "1", "--size", "100", "--confirm", "20",
			"--lean-publisher", "--count", "300", "--duration", "5s", "--auto-ack", "--confirm-trace", file)
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if int64(len(lines)) != s.Confirmed || s.Confirmed != 600 {
			t.Fatalf("%d trace lines, %d confirmed (600 sent)", len(lines), s.Confirmed)
		}
		var last int64
		producers := map[int]int{}
		for _, l := range lines {
			var p int
			var sent, took int64
			if _, err := fmt.Sscan(l, &p, &sent, &took); err != nil || sent < last || took < 0 {
				t.Fatalf("line %q after send time %d: %v", l, last, err)
			}
			last = sent
			producers[p]++
		}
		if producers[0] != 300 || producers[1] != 300 {
			t.Fatalf("confirms per producer %v, want 300 each", producers)
		}
	})
	t.Run("fanout", func(t *testing.T) {
		s := runAgainst(t, url, "--exchange-type", "fanout", "--fanout-queues", "3", "--consumers", "2",
			"--auto-ack", "--size", "16", "--count", "500", "--duration", "2s")
		if s.Received != 3*s.Sent {
			t.Fatalf("fanout received %d of %d", s.Received, 3*s.Sent)
		}
	})
	t.Run("topic", func(t *testing.T) {
		runAgainst(t, url, "--exchange-type", "topic", "--topic-bindings", "30", "--queues", "4", "--consumers", "2",
			"--producers", "2", "--auto-ack", "--count", "300", "--rate", "2000", "--duration", "2s")
	})
	t.Run("headers", func(t *testing.T) {
		runAgainst(t, url, "--exchange-type", "headers", "--queues", "3", "--consumers", "3",
			"--auto-ack", "--count", "300", "--duration", "2s")
	})
	t.Run("fill-then-drain", func(t *testing.T) {
		s := runAgainst(t, url, "--consumer-delay", "300ms", "--duration", "300ms", "--count", "5000", "--auto-ack", "--size", "64")
		if s.ReceiveRate <= 0 {
			t.Fatal("no drain rate")
		}
	})
	t.Run("connections-only", func(t *testing.T) {
		cfg, _ := parseFlags([]string{"--url", url, "--quiet", "--connections-only", "20", "--duration", "200ms"})
		s, err := Run(context.Background(), cfg, io.Discard)
		if err != nil || s.ConnectionsOpened != 20 {
			t.Fatalf("%v %+v", err, s)
		}
	})
}

// TestProgressLeft: the progress line says how far the run is and the
// time left to its nearer bound.
func TestProgressLeft(t *testing.T) {
	r := &runner{cfg: Config{Duration: 10 * time.Second}}
	if got := r.left(2500*time.Millisecond, 0); got != "   25.0%  ETA 7.5s" {
		t.Errorf("duration bound: %q", got)
	}
	if got := r.left(11*time.Second, 0); got != "  100.0%  publishing done, draining" {
		t.Errorf("past the bound: %q", got)
	}
	// 2 producers x 1000 messages, 500 sent in 1 s: 3 s left, sooner than
	// the duration's 9 s.
	r = &runner{cfg: Config{Duration: 10 * time.Second, Count: 1000, Producers: 2}}
	if got := r.left(time.Second, 500); got != "   25.0%  ETA 3s" {
		t.Errorf("count bound: %q", got)
	}
	r = &runner{cfg: Config{}}
	if got := r.left(time.Second, 500); got != "" {
		t.Errorf("no bound: %q", got)
	}
}

func TestQueueAndConsumeArgs(t *testing.T) {
	cfg, err := parseFlags([]string{"--queue-type", "stream", "--prefetch", "10",
		"--queue-arg", "x-max-length-bytes=1000000", "--queue-arg", "x-max-age=10m",
		"--queue-arg", `x-name="42"`, "--queue-arg", "x-flag=true",
		"--consume-arg", "x-priority=5", "--stream-offset", "first"})
	if err != nil {
		t.Fatal(err)
	}
	qa := cfg.queueArgs()
	if qa["x-queue-type"] != "stream" || qa["x-max-length-bytes"] != int64(1000000) || qa["x-max-age"] != "10m" ||
		qa["x-name"] != "42" || qa["x-flag"] != true || !cfg.DurableQueues {
		t.Fatalf("queue args %#v durable %v", qa, cfg.DurableQueues)
	}
	ca := cfg.ConsumeArgs.table()
	if ca["x-priority"] != int64(5) || ca["x-stream-offset"] != "first" {
		t.Fatalf("consume args %#v", ca)
	}
	for spec, want := range map[string]any{"last": "last", "next": "next", "123": int64(123), "10m": "10m", "2D": "2D"} {
		cfg, err := parseFlags([]string{"--queue-type", "stream", "--prefetch", "1", "--stream-offset", spec})
		if err != nil || cfg.ConsumeArgs.table()["x-stream-offset"] != want {
			t.Errorf("--stream-offset %s: %v %#v", spec, err, cfg.ConsumeArgs.table())
		}
	}
	// x-queue-type as a plain argument makes the run a stream run too.
	if cfg, err := parseFlags([]string{"--queue-arg", "x-queue-type=stream", "--prefetch", "1"}); err != nil || cfg.QueueType != "stream" {
		t.Errorf("x-queue-type argument: %v %q", err, cfg.QueueType)
	}
	for _, bad := range [][]string{
		{"--queue-type", "stream"},                                  // no prefetch
		{"--queue-type", "stream", "--prefetch", "1", "--auto-ack"}, // no-ack
		{"--queue-type", "lazy"},
		{"--stream-offset", "first"},                                           // not a stream
		{"--queue-type", "stream", "--prefetch", "1", "--stream-offset", "-1"}, // negative
		{"--queue-type", "stream", "--prefetch", "1", "--stream-offset", "soon"},
		{"--queue-type", "quorum", "--queue-arg", "x-queue-type=stream"},
		{"--queue-arg", "novalue"},
		{"--queue-type", "stream", "--prefetch", "1", "--stream-offset", "first", "--consume-arg", "x-stream-offset=last"},
		{"--consumers-after-publish", "--consumer-delay", "1s"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// A stream without consumers needs no prefetch.
	if _, err := parseFlags([]string{"--queue-type", "stream", "--consumers", "0"}); err != nil {
		t.Errorf("publish-only stream: %v", err)
	}
}

func TestStreams(t *testing.T) {
	url := servertest.Start(t, server.Config{})
	t.Run("replay-from-first", func(t *testing.T) {
		// Two readers each get every message, in order, with rising offsets.
		s := runAgainst(t, url, "--queue-type", "stream", "--producers", "2", "--consumers", "2", "--size", "100",
			"--confirm", "50", "--prefetch", "100", "--multi-ack-every", "20", "--count", "3000", "--duration", "10s",
			"--consumers-after-publish", "--stream-offset", "first")
		if s.Confirmed != 6000 || s.Received != 12000 || s.OutOfOrder != 0 || s.StreamOffsetRegressions != 0 ||
			s.StreamOffsetMissing != 0 || s.ConfirmRate <= 0 || s.ReceiveRate <= 0 {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("end-to-end", func(t *testing.T) {
		s := runAgainst(t, url, "--queue-type", "stream", "--producers", "1", "--consumers", "1", "--size", "1024",
			"--confirm", "100", "--prefetch", "200", "--multi-ack-every", "50", "--count", "5000", "--duration", "10s")
		if s.Received != s.Sent || s.OutOfOrder != 0 || s.StreamOffsetRegressions != 0 {
			t.Fatalf("%+v", s)
		}
	})
	// The lean consumer (lean.go) checks the same: two readers from
	// first, and bodies larger than a frame (frame_max 128 KiB).
	t.Run("lean-replay", func(t *testing.T) {
		s := runAgainst(t, url, "--lean-consumer", "--queue-type", "stream", "--producers", "2", "--consumers", "2", "--size", "100",
			"--confirm", "50", "--prefetch", "100", "--multi-ack-every", "20", "--count", "3000", "--duration", "10s",
			"--consumers-after-publish", "--stream-offset", "first")
		if s.Confirmed != 6000 || s.Received != 12000 || s.OutOfOrder != 0 || s.StreamOffsetRegressions != 0 ||
			s.StreamOffsetMissing != 0 || s.ReceiveRate <= 0 || len(s.Errors) != 0 {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("lean-large-bodies", func(t *testing.T) {
		s := runAgainst(t, url, "--lean-consumer", "--queue-type", "stream", "--producers", "1", "--consumers", "1", "--size", "300000",
			"--confirm", "10", "--prefetch", "20", "--multi-ack-every", "5", "--count", "60", "--duration", "10s")
		if s.Received != 60 || s.Sent != 60 || s.OutOfOrder != 0 || s.BadBodies != 0 || s.StreamOffsetRegressions != 0 || len(s.Errors) != 0 {
			t.Fatalf("%+v", s)
		}
	})
	// The lean producer (leanpub.go): every publish confirmed, each
	// once, through multiple acks (a stream's) and single ones (a
	// classic queue's, with --rate flushing each publish), and keyed
	// headers on a partitioned stream.
	t.Run("lean-publisher", func(t *testing.T) {
		s := runAgainst(t, url, "--lean-publisher", "--lean-consumer", "--queue-type", "stream", "--producers", "2", "--consumers", "1",
			"--size", "1024", "--confirm", "100", "--prefetch", "200", "--multi-ack-every", "50", "--count", "5000", "--duration", "10s",
			"--consumers-after-publish", "--stream-offset", "first")
		if s.Confirmed != 10000 || s.Sent != 10000 || s.Received != 10000 || s.OutOfOrder != 0 || len(s.Errors) != 0 || s.ConfirmRate <= 0 {
			t.Fatalf("%+v", s)
		}
		s = runAgainst(t, url, "--lean-publisher", "--producers", "1", "--consumers", "1", "--size", "64", "--confirm", "20",
			"--rate", "2000", "--count", "1000", "--duration", "10s")
		if s.Confirmed != 1000 || s.Received != 1000 || s.OutOfOrder != 0 || len(s.Errors) != 0 {
			t.Fatalf("%+v", s)
		}
		s = runAgainst(t, url, "--lean-publisher", "--queue-type", "stream", "--partitions", "3", "--partition-keys", "10",
			"--producers", "1", "--consumers", "1", "--size", "100", "--confirm", "50", "--prefetch", "100", "--count", "900", "--duration", "10s")
		if s.Confirmed != 900 || s.Received != 900 || len(s.Errors) != 0 {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("lean-classic-single-acks", func(t *testing.T) {
		s := runAgainst(t, url, "--lean-consumer", "--producers", "1", "--consumers", "2", "--queues", "2", "--size", "64",
			"--confirm", "50", "--prefetch", "50", "--count", "2000", "--duration", "10s")
		if s.Received != s.Sent || s.OutOfOrder != 0 || len(s.Errors) != 0 {
			t.Fatalf("%+v", s)
		}
	})
}
