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
