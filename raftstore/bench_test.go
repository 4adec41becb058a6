package raftstore

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkAppend100Groups: 100 groups append 1 KiB entries at once, one
// StoreLogs each at a time, as 100 one-voter Raft groups under confirmed
// publishing do. It reports syncs per second and appends per sync.
func BenchmarkAppend100Groups(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const groups = 100
	data := []byte(strings.Repeat("x", 1024))
	gs := make([]*Group, groups)
	for i := range gs {
		gs[i], _ = s.Group(uint64(i + 1))
	}
	b.ReportAllocs()
	b.SetBytes(1024)
	b.ResetTimer()
	start, st0 := time.Now(), s.Stats()
	var wg sync.WaitGroup
	per := b.N/groups + 1
	for _, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := g.StoreLogs([]*raft.Log{{Index: uint64(i + 1), Term: 1, Data: data}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	st := s.Stats()
	syncs, appends := st.Syncs-st0.Syncs, st.Appends-st0.Appends
	b.ReportMetric(float64(syncs)/el.Seconds(), "syncs/s")
	b.ReportMetric(float64(appends)/float64(syncs), "appends/sync")
	b.ReportMetric(float64(appends)/el.Seconds(), "appends/s")
}

// BenchmarkFileAppendSync is the floor a log of our own would stand on:
// one file, a 1 KiB write and an fdatasync per append, nothing shared.
func BenchmarkFileAppendSync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "wal"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	data := []byte(strings.Repeat("x", 1024))
	b.SetBytes(1024)
	start := time.Now()
	for range b.N {
		f.Write(data)
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "syncs/s")
}

// BenchmarkMetadataWithQueues: 20 quorum queues' groups append 1 KiB
// entries at once while the cluster metadata group appends a small entry
// after another (declarations), either in two stores (the metadata group
// in a store of its own, as before it was shared) or in one. It reports
// the syncs per second of both stores together, per append, and the
// metadata group's appends per second.
func BenchmarkMetadataWithQueues(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "separate"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			qs, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer qs.Close()
			ms := qs
			if !shared {
				if ms, err = Open(b.TempDir(), Options{}); err != nil {
					b.Fatal(err)
				}
				defer ms.Close()
			}
			const groups = 20
			data := []byte(strings.Repeat("x", 1024))
			meta, _ := ms.Group(MetadataGroup)
			stop := make(chan struct{})
			metaDone := make(chan uint64)
			go func() {
				var n uint64
				for {
					select {
					case <-stop:
						metaDone <- n
						return
					default:
					}
					n++
					if err := meta.StoreLogs([]*raft.Log{{Index: n, Term: 1, Data: []byte(`{"op":"queue.declare"}`)}}); err != nil {
						b.Error(err)
					}
				}
			}()
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			q0, m0 := qs.Stats(), ms.Stats()
			var wg sync.WaitGroup
			per := b.N/groups + 1
			for i := range groups {
				g, _ := qs.Group(uint64(i + 1))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range per {
						if err := g.StoreLogs([]*raft.Log{{Index: uint64(j + 1), Term: 1, Data: data}}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			close(stop)
			metaN := <-metaDone
			q1, m1 := qs.Stats(), ms.Stats()
			syncs := q1.Syncs - q0.Syncs
			appends := q1.Appends - q0.Appends
			if !shared {
				syncs += m1.Syncs - m0.Syncs
				appends += m1.Appends - m0.Appends
			}
			b.ReportMetric(float64(syncs)/el.Seconds(), "syncs/s")
			b.ReportMetric(float64(syncs)/float64(appends), "syncs/append")
			b.ReportMetric(float64(metaN)/el.Seconds(), "meta-appends/s")
			b.ReportMetric(float64(groups*per)/el.Seconds(), "queue-appends/s")
		})
	}
}

// BenchmarkOneGroup: one group appends 32 KiB entries one StoreLogs after
// another, as a one-voter quorum queue's leader loop does under one
// confirming publisher: the figure is the sync round trip.
func BenchmarkOneGroup(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g, _ := s.Group(1)
	data := []byte(strings.Repeat("x", 32<<10))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := g.StoreLogs([]*raft.Log{{Index: uint64(i + 1), Term: 1, Data: data}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "syncs/s")
}
