package persist

import (
	"os"
	"time"
)

// The free-space check on the write path. The broker's disk alarm polls
// the free space once a second; between two polls a burst of large
// publishes can fill the disk, and then log writes fail (their publishes
// are nacked) before the alarm blocks anyone. So the log looks too: before
// a record is written, at least every diskCheckBytes or diskCheckAge (and
// before every record while the disk is low), it asks the file system how
// much is free. When the record would leave less than the limit, it calls
// OnDiskLow at once (the broker raises its alarm and blocks publishers) and
// drops its spare segments, which are Warren's own and would otherwise
// keep the alarm on after the queues drain.

const (
	diskCheckBytes = 1 << 20
	diskCheckAge   = 100 * time.Millisecond
)

type diskWatch struct {
	dir    string
	limit  uint64
	onLow  func(free uint64)
	statfs func(dir string) (uint64, bool) // freeBytes; tests replace it
	now    func() time.Time                // time.Now; tests replace it
	since  int64                           // bytes written since the last look
	at     time.Time
	low    bool
}

// checkDisk looks at the free space before need more bytes are written,
// when one is due.
func (w *wal) checkDisk(need int64) {
	d := w.disk
	if d == nil || d.limit == 0 {
		return
	}
	d.since += need
	now := d.now()
	if !d.low && d.since < diskCheckBytes && now.Sub(d.at) < diskCheckAge {
		return
	}
	d.since, d.at = 0, now
	free, ok := d.statfs(d.dir)
	if !ok {
		return
	}
	d.low = free < d.limit+uint64(need)
	if !d.low {
		return
	}
	for _, sp := range w.spares {
		os.Remove(sp)
	}
	w.spares = w.spares[:0]
	if d.onLow != nil {
		d.onLow(free)
	}
}
