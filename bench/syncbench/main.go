//go:build linux

// Command syncbench measures what a stream write cycle's sync costs on this
// machine's disk, for the choices of BENCHMARKS.md "Session 8": a cycle
// writes -bytes (a confirm window of 1 KB messages) and waits for it to
// be durable, as
//
//   - 1 file fsync: one partition's segment, appended and fsynced;
//   - 6 files fsync: six partitions' segments, a sixth each, fsynced in
//     parallel (the writer before the journal);
//   - journal + 6: the cycle appended to one journal file and fsynced,
//     the six segments written unsynced and fsynced in parallel by a
//     background checkpoint every -ckpt journal bytes (the writer now);
//   - zeroN + fdatasync: one or six segments whose tail is written with
//     zeros N bytes at a time ahead of the records, so that a record's
//     sync (fdatasync) needs no file-size update, except when it crosses
//     into a new zeroed chunk;
//   - prezeroed + fdatasync: the same with the whole file zeroed before
//     the timing (the bound of any preallocation whose zeroing is free);
//   - fallocate + fdatasync: preallocated with fallocate(2) (unwritten
//     extents: the first write of each is a metadata change).
//
// Variants alternate in blocks of -cycles so that the machine's other
// load falls on all of them alike. It prints the mean and percentiles of
// a cycle's time. Files go to a temporary directory under -dir.
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

type variant struct {
	name string
	run  func() error
	lat  []time.Duration
}

func main() {
	blocks := flag.Int("blocks", 20, "blocks per variant")
	per := flag.Int("cycles", 40, "cycles per block")
	bytes := flag.Int("bytes", 200*1060, "bytes a cycle writes")
	ckpt := flag.Int64("ckpt", 16<<20, "journal bytes between checkpoints")
	parent := flag.String("dir", os.TempDir(), "where the files go")
	flag.Parse()
	dir, err := os.MkdirTemp(*parent, "syncbench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	nfile := 0
	open := func() *os.File {
		nfile++
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(nfile)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			fail(err)
		}
		return f
	}
	opens := func(n int) []*os.File {
		fs := make([]*os.File, n)
		for i := range fs {
			fs[i] = open()
		}
		return fs
	}
	data := make([]byte, *bytes)
	for i := range data {
		data[i] = byte(i + 1)
	}
	total := int64(*bytes) * int64(*blocks) * int64(*per)
	var vs []*variant
	add := func(name string, run func() error) { vs = append(vs, &variant{name: name, run: run}) }

	// Segments written at their end.
	appender := func(n int, datasync bool) func() error {
		fs, pos := opens(n), make([]int64, n)
		part := data[:len(data)/n]
		return func() error {
			for i, f := range fs {
				if _, err := f.WriteAt(part, pos[i]); err != nil {
					return err
				}
				pos[i] += int64(len(part))
			}
			return syncAll(fs, datasync)
		}
	}
	// Segments zeroed chunk bytes at a time ahead of the records
	// (chunk < 0: all of it before the timing; fallocate: preallocated).
	zeroed := func(n int, chunk int64, fallocate bool) func() error {
		fs, pos, end := opens(n), make([]int64, n), make([]int64, n)
		part := data[:len(data)/n]
		if fallocate || chunk < 0 {
			for i, f := range fs {
				size := total/int64(n) + 1<<20
				if fallocate {
					if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
						fail(err)
					}
				} else if err := writeZeros(f, 0, size); err != nil {
					fail(err)
				}
				if err := f.Sync(); err != nil {
					fail(err)
				}
				end[i] = size
			}
		}
		return func() error {
			for i, f := range fs {
				for pos[i]+int64(len(part)) > end[i] {
					if err := writeZeros(f, end[i], chunk); err != nil {
						return err
					}
					end[i] += chunk
				}
				if _, err := f.WriteAt(part, pos[i]); err != nil {
					return err
				}
				pos[i] += int64(len(part))
			}
			return syncAll(fs, true)
		}
	}
	// The journal and six segments behind it.
	journal := func() func() error {
		j, segs := open(), opens(6)
		var jpos, since int64
		pos := make([]int64, 6)
		part := data[:len(data)/6]
		var ck sync.WaitGroup
		var ckErr error
		return func() error {
			if _, err := j.WriteAt(data, jpos); err != nil {
				return err
			}
			jpos += int64(len(data))
			if err := j.Sync(); err != nil {
				return err
			}
			for i, f := range segs {
				if _, err := f.WriteAt(part, pos[i]); err != nil {
					return err
				}
				pos[i] += int64(len(part))
			}
			if since += int64(len(data)); since >= *ckpt {
				ck.Wait()
				if ckErr != nil {
					return ckErr
				}
				since = 0
				ck.Add(1)
				go func() { defer ck.Done(); ckErr = syncAll(segs, false) }()
			}
			return nil
		}
	}

	add("1 file fsync", appender(1, false))
	add("6 files fsync", appender(6, false))
	add("journal + 6", journal())
	add("1 file zero1M + fdatasync", zeroed(1, 1<<20, false))
	add("6 files zero1M + fdatasync", zeroed(6, 1<<20, false))
	add("1 file zero4M + fdatasync", zeroed(1, 4<<20, false))
	add("6 files zero4M + fdatasync", zeroed(6, 4<<20, false))
	add("1 file prezeroed + fdatasync", zeroed(1, -1, false))
	add("6 files prezeroed + fdatasync", zeroed(6, -1, false))
	add("1 file fallocate + fdatasync", zeroed(1, 0, true))

	for range *blocks {
		for _, v := range vs {
			for range *per {
				t0 := time.Now()
				if err := v.run(); err != nil {
					fail(err)
				}
				v.lat = append(v.lat, time.Since(t0))
			}
		}
	}
	for _, v := range vs {
		var sum time.Duration
		for _, l := range v.lat {
			sum += l
		}
		sort.Slice(v.lat, func(i, j int) bool { return v.lat[i] < v.lat[j] })
		n := len(v.lat)
		fmt.Printf("%-30s mean %6.0f µs  p50 %6.0f  p90 %6.0f  p99 %6.0f\n", v.name,
			us(sum/time.Duration(n)), us(v.lat[n/2]), us(v.lat[n*9/10]), us(v.lat[n*99/100]))
	}
}

func writeZeros(f *os.File, at, n int64) error {
	z := make([]byte, min(n, 1<<20))
	for done := int64(0); done < n; done += int64(len(z)) {
		if _, err := f.WriteAt(z[:min(int64(len(z)), n-done)], at+done); err != nil {
			return err
		}
	}
	return nil
}

func syncAll(fs []*os.File, datasync bool) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if datasync {
				errs[i] = unix.Fdatasync(int(f.Fd()))
			} else {
				errs[i] = f.Sync()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "syncbench:", err)
	os.Exit(1)
}
