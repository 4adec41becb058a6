package persist_test

import (
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/persist"
)

func benchStore(b *testing.B, kind string) persist.Store {
	b.Helper()
	var s persist.Store
	switch kind {
	case "badger":
		s = openBadger(b, b.TempDir(), persist.Options{GCInterval: -1})
	case "badger-nosync":
		s = openBadger(b, b.TempDir(), persist.Options{GCInterval: -1, NoSync: true})
	default:
		s = persist.NewMemory()
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchQueue(b *testing.B, s persist.Store, name string) uint64 {
	q := &persist.QueueRecord{VHost: "/", Name: name, Durable: true}
	if err := s.SaveQueue(q); err != nil {
		b.Fatal(err)
	}
	return q.ID
}

func reportStats(b *testing.B, before, after persist.Stats) {
	commits := after.Commits - before.Commits
	if commits == 0 {
		return
	}
	b.ReportMetric(float64(after.Messages-before.Messages)/float64(commits), "msgs/fsync")
	b.ReportMetric(float64(after.Settled-before.Settled)/float64(commits), "settles/fsync")
	b.ReportMetric(float64((after.FsyncTotal-before.FsyncTotal).Microseconds())/float64(commits), "µs/fsync")
	if f := after.Folded - before.Folded; f > 0 {
		b.ReportMetric(float64(f)/float64(commits), "folded/fsync")
	}
}

// BenchmarkPublish: many concurrent publishers (16 per CPU), each waiting
// for its confirm (done) before the next publish, as a confirming client
// with one message in flight does. 256-byte bodies, one durable queue.
func BenchmarkPublish(b *testing.B) {
	for _, kind := range []string{"badger", "badger-nosync", "memory"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			q := benchQueue(b, s, "q")
			body := make([]byte, 256)
			var next atomic.Uint64
			before := s.Stats()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ch := make(chan error, 1)
				done := func(err error) { ch <- err }
				entries := make([]persist.QueueSeq, 1)
				for pb.Next() {
					id := next.Add(1)
					entries[0] = persist.QueueSeq{QueueID: q, Seq: id, MsgID: id}
					s.Publish(id, persist.MessageRecord{Exchange: "x", RoutingKey: "k", Body: body}, entries, done)
					if err := <-ch; err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportStats(b, before, s.Stats())
		})
	}
}

// BenchmarkSettle: concurrent acks (16 per CPU) of stored messages, each
// waiting for its done.
func BenchmarkSettle(b *testing.B) {
	for _, kind := range []string{"badger", "memory"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			q := benchQueue(b, s, "q")
			body := make([]byte, 256)
			const chunk = 1000
			for lo := 1; lo <= b.N; lo += chunk {
				var pubs []persist.PublishOp
				for id := uint64(lo); id < uint64(min(lo+chunk, b.N+1)); id++ {
					pubs = append(pubs, persist.PublishOp{MsgID: id, Msg: persist.MessageRecord{Body: body}, Entries: []persist.QueueSeq{{QueueID: q, Seq: id, MsgID: id}}})
				}
				if err := waitErr(func(d func(error)) { s.Atomic(pubs, nil, d) }); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Uint64
			before := s.Stats()
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ch := make(chan error, 1)
				done := func(err error) { ch <- err }
				entries := make([]persist.QueueSeq, 1)
				for pb.Next() {
					id := next.Add(1)
					entries[0] = persist.QueueSeq{QueueID: q, Seq: id, MsgID: id}
					s.Settle(entries, done)
					if err := <-ch; err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportStats(b, before, s.Stats())
		})
	}
}

// BenchmarkConfirmWindow is scenario s2 as the store sees it: one
// publisher with 200 unconfirmed 1 KB messages, each delivered at once
// (Delivered) and acknowledged in runs of 50 (Settle), as a confirming
// publisher and a prefetch-200 consumer with multi-ack do.
func BenchmarkConfirmWindow(b *testing.B) {
	for _, kind := range []string{"badger", "memory"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			q := benchQueue(b, s, "q")
			body := make([]byte, 1024)
			sem := make(chan struct{}, 200)
			release := func(err error) {
				if err != nil {
					b.Error(err)
				}
				<-sem
			}
			before := s.Stats()
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			var acks []persist.QueueSeq
			for i := 1; i <= b.N; i++ {
				sem <- struct{}{}
				id := uint64(i)
				e := persist.QueueSeq{QueueID: q, Seq: id, MsgID: id}
				s.Publish(id, persist.MessageRecord{Exchange: "", RoutingKey: "q", Body: body}, []persist.QueueSeq{e}, release)
				s.Delivered([]persist.QueueSeq{e})
				if acks = append(acks, e); len(acks) == 50 {
					s.Settle(acks, nil)
					acks = nil
				}
			}
			for range cap(sem) {
				sem <- struct{}{}
			}
			b.StopTimer()
			reportStats(b, before, s.Stats())
		})
	}
}

// BenchmarkScanQueue: a paged queue loading its backlog back, 1,024 entries
// with their 1 KB bodies per scan, as a draining consumer makes it do.
func BenchmarkScanQueue(b *testing.B) {
	for _, kind := range []string{"badger", "memory"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, kind)
			q := benchQueue(b, s, "q")
			body := make([]byte, 1024)
			const n, chunk = 1 << 15, 1024
			for lo := uint64(1); lo <= n; lo += chunk {
				var pubs []persist.PublishOp
				for id := lo; id < lo+chunk; id++ {
					pubs = append(pubs, persist.PublishOp{MsgID: id, Msg: persist.MessageRecord{RoutingKey: "q", Body: body}, Entries: []persist.QueueSeq{{QueueID: q, Seq: id, MsgID: id}}})
				}
				if err := waitErr(func(d func(error)) { s.Atomic(pubs, nil, d) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			from := uint64(1)
			for i := 0; i < b.N; i += chunk {
				got := 0
				err := s.ScanQueue(q, from, chunk, true, func(e persist.RecoveredEntry) error {
					got++
					from = e.Seq + 1
					return nil
				})
				if err != nil || got == 0 {
					b.Fatalf("scan from %d: %d entries, %v", from, got, err)
				}
				if from > n {
					from = 1
				}
			}
		})
	}
}
