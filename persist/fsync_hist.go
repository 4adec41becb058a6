package persist

import "time"

// fsyncBounds are the upper bounds of FsyncHistogram's buckets.
var fsyncBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond,
}

// FsyncHistogram counts transaction commits (one fsync each) by duration:
// Counts[i] those of at most FsyncBounds()[i] (and above the bound before),
// the last one those above every bound. Kept under the store's stats lock.
type FsyncHistogram struct {
	Counts [len(fsyncBounds) + 1]uint64
}

// FsyncBounds returns the histogram's bucket upper bounds.
func FsyncBounds() []time.Duration { return fsyncBounds[:] }

func (h *FsyncHistogram) observe(d time.Duration) {
	i := 0
	for i < len(fsyncBounds) && d > fsyncBounds[i] {
		i++
	}
	h.Counts[i]++
}
