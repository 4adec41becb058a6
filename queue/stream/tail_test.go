package stream_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/stream"
)

// publishMany publishes bodies from..to-1 without waiting for each
// confirm, then waits for all of them.
func publishMany(t *testing.T, q queue.Queue, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	props := withHeaders(t, nil)
	for i := from; i < to; i++ {
		wg.Add(1)
		q.Type().Publish(&queue.Message{Body: []byte(strconv.Itoa(i)), Props: props}, []queue.Queue{q}, nil, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	q.(*stream.Queue).Quiesce()
}

// Consumers at the tail share one copy of each message (the tail cache):
// two consumers at next get the same message, not two reads of it.
func TestTailCacheShared(t *testing.T) {
	_, _, q := newStream(t, t.TempDir(), nil)
	a, b := queuetest.NewRecorder(-1, false), queuetest.NewRecorder(-1, false)
	consume(t, q, "a", a, 100, nil)
	consume(t, q, "b", b, 100, nil)
	publishMany(t, q, 0, 10)
	ga, gb := a.Take(), b.Take()
	if len(ga) != 10 || len(gb) != 10 {
		t.Fatalf("got %d and %d of 10", len(ga), len(gb))
	}
	for i := range ga {
		if ga[i].Msg != gb[i].Msg || ga[i].Seq != uint64(i) {
			t.Fatalf("delivery %d: not the shared message (offset %d)", i, ga[i].Seq)
		}
	}
	q.Delete(false, false)
}

// A consumer that falls behind the tail cache reads the file, in order,
// then the cache again; one at "first" reads the file from the start.
func TestTailCacheFallsBackToFile(t *testing.T) {
	_, _, q := newStream(t, t.TempDir(), map[string]any{"x-stream-max-segment-size-bytes": int64(64 << 10)})
	slow := queuetest.NewRecorder(5, false)
	consume(t, q, "slow", slow, 5, nil)
	const n = 20000 // more than the cache holds
	publishMany(t, q, 0, n)
	got := slow.Take()
	for len(got) < n {
		slow.Grant(1000)
		q.Kick(nil)
		more := slow.Take()
		if len(more) == 0 {
			t.Fatalf("stuck at %d of %d", len(got), n)
		}
		got = append(got, more...)
	}
	late := queuetest.NewRecorder(-1, false)
	consume(t, q, "late", late, 100, map[string]any{"x-stream-offset": "first"})
	publishMany(t, q, n, n+10)
	got2 := late.Take()
	for i, e := range got {
		if string(e.Msg.Body) != strconv.Itoa(i) || e.Seq != uint64(i) {
			t.Fatalf("slow consumer's delivery %d: %s at %d", i, e.Msg.Body, e.Seq)
		}
	}
	if len(got2) != n+10 || fmt.Sprint(queuetest.Bodies(got2[n:])) != "[20000 20001 20002 20003 20004 20005 20006 20007 20008 20009]" {
		t.Fatalf("late consumer got %d", len(got2))
	}
	q.Delete(false, false)
}

// sink takes every delivery and keeps none.
type sink struct{ n int }

func (s *sink) Deliver(queue.Queue, queue.Entry, any) queue.Outcome { s.n++; return queue.Pending }

// BenchmarkTailFanout is the broker's cost of publishing to one stream
// and handing each message to consumers at its tail (no sockets), for 0,
// 1 and 100 consumers: a delivery's own cost is the difference with 0
// consumers over the consumers (ns/op(N) - ns/op(0)) / N. With the tail
// cache the consumers share each read.
func BenchmarkTailFanout(b *testing.B) {
	for _, consumers := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			typ := stream.NewType(stream.Config{Dir: b.TempDir()})
			l, _ := queue.ParseArgs(nil)
			q, err := typ.New(queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1}, l, queue.Hooks{})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Delete(false, false)
			sinks := make([]*sink, consumers)
			for i := range sinks {
				sinks[i] = &sink{}
				if err := q.AddConsumer(queue.ConsumeOptions{Tag: fmt.Sprint("c", i), Consumer: sinks[i], Prefetch: 1}); err != nil {
					b.Fatal(err)
				}
			}
			props := []byte{0, 0}
			body := make([]byte, 1024)
			const batch = 200
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += batch {
				var wg sync.WaitGroup
				for range min(batch, b.N-sent) {
					wg.Add(1)
					q.Type().Publish(&queue.Message{Body: body, Props: props}, []queue.Queue{q}, nil, func(error) { wg.Done() })
				}
				wg.Wait()
				q.(*stream.Queue).Quiesce()
			}
			b.StopTimer()
			total := 0
			for _, s := range sinks {
				total += s.n
			}
			if total != b.N*consumers {
				b.Fatalf("%d deliveries, want %d", total, b.N*consumers)
			}
		})
	}
}
