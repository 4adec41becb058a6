//go:build linux

// Command iostall tells whether this machine's disk stalls now and then,
// and how often: -writers goroutines (one file each) write -bytes and
// fdatasync it in a loop for -duration (each then sleeping -pace, if set),
// and every sync slower than -stall is a stall. It prints the syncs per
// second, the stalls with their times, and how far apart they started.
//
// The cluster benchmark's p99 confirm latency on the development machine
// is set by such stalls (BENCHMARKS.md, session 23): under load, every
// sync of every process waits 10 to 15 ms once per 100 ms.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	writers := flag.Int("writers", 3, "goroutines, each with a file of its own")
	size := flag.Int("bytes", 4096, "bytes written before each fdatasync")
	pace := flag.Duration("pace", 0, "sleep after each sync (0: none)")
	dur := flag.Duration("duration", 3*time.Second, "how long to run")
	stall := flag.Duration("stall", 4*time.Millisecond, "a sync slower than this is a stall")
	dir := flag.String("dir", os.TempDir(), "where the files go (a temporary directory under it)")
	flag.Parse()
	if err := run(*writers, *size, *pace, *dur, *stall, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "iostall:", err)
		os.Exit(1)
	}
}

// stallAt is one slow sync: when it began (since the start) and how long
// it took.
type stallAt struct {
	writer   int
	at, took time.Duration
}

func run(writers, size int, pace, dur, stall time.Duration, dir string) error {
	tmp, err := os.MkdirTemp(dir, "iostall")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	const fileBytes = 64 << 20
	files := make([]*os.File, writers)
	for i := range files {
		f, err := os.Create(filepath.Join(tmp, fmt.Sprint(i)))
		if err != nil {
			return err
		}
		defer f.Close()
		// Written out first, so that a sync updates no metadata (as the
		// raft log's preallocated segments).
		if _, err := f.Write(make([]byte, fileBytes)); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		files[i] = f
	}
	var (
		mu     sync.Mutex
		stalls []stallAt
		syncs  int
		wg     sync.WaitGroup
		first  error
	)
	start := time.Now()
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, size)
			var off int64
			n := 0
			var mine []stallAt
			var err error
			for time.Since(start) < dur {
				t := time.Now()
				if _, err = unix.Pwrite(int(f.Fd()), b, off); err != nil {
					break
				}
				if err = unix.Fdatasync(int(f.Fd())); err != nil {
					break
				}
				if took := time.Since(t); took > stall {
					mine = append(mine, stallAt{i, t.Sub(start), took})
				}
				n++
				off = (off + int64(size)) % (fileBytes - int64(size))
				if pace > 0 {
					time.Sleep(pace)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			stalls = append(stalls, mine...)
			syncs += n
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	elapsed := time.Since(start)
	sort.Slice(stalls, func(a, b int) bool { return stalls[a].at < stalls[b].at })
	fmt.Printf("%d writers, %d bytes a sync, pace %v: %.0f syncs/s, %d stalls (> %v)\n",
		writers, size, pace, float64(syncs)/elapsed.Seconds(), len(stalls), stall)
	var starts []time.Duration // one per episode: stalls of several writers together are one
	for _, s := range stalls {
		if len(starts) == 0 || s.at-starts[len(starts)-1] > 20*time.Millisecond {
			starts = append(starts, s.at)
		}
		fmt.Printf("  %8.1f ms  writer %d  %.1f ms\n", ms(s.at), s.writer, ms(s.took))
	}
	if len(starts) > 1 {
		gaps := make([]time.Duration, 0, len(starts)-1)
		for i := 1; i < len(starts); i++ {
			gaps = append(gaps, starts[i]-starts[i-1])
		}
		sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
		fmt.Printf("%d episodes; time between them: median %.1f ms (min %.1f, max %.1f)\n",
			len(starts), ms(gaps[len(gaps)/2]), ms(gaps[0]), ms(gaps[len(gaps)-1]))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
