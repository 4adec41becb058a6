// retention.go: which whole segments of a stream's log retention drops
// (issue 13, section 1): oldest first, never the active (last) one, by
// x-max-length-bytes and x-max-age, with the boundaries of RabbitMQ's log
// (osiris).

package group

import "time"

// Segment describes one segment file of a partition's log, oldest first.
type Segment struct {
	First, Last int64     // first and last offset in it
	Bytes       int64     // its size on disk
	Newest      time.Time // timestamp of its newest message; zero when unknown (empty)
}

// Retention is a stream's retention limits.
type Retention struct {
	MaxBytes int64         // x-max-length-bytes; 0 or less: none
	MaxAge   time.Duration // x-max-age; 0 or less: none
}

// Drop is how many segments, from the oldest, retention removes from segs
// (oldest first, the last one being written) at time now:
//   - by bytes, the oldest while the segments' total exceeds MaxBytes (a
//     total equal to it is kept);
//   - by age, the oldest while their newest message is older than
//     now-MaxAge (strictly), stopping at the first that is not, or whose
//     age is unknown;
//
// whichever drops more; never the last segment. Readers below
// segs[Drop].First then start at it.
func (r Retention) Drop(segs []Segment, now time.Time) int {
	if len(segs) <= 1 {
		return 0
	}
	drop := 0
	if r.MaxBytes > 0 {
		var total int64
		for _, s := range segs {
			total += s.Bytes
		}
		for drop < len(segs)-1 && total > r.MaxBytes {
			total -= segs[drop].Bytes
			drop++
		}
	}
	if r.MaxAge > 0 {
		cutoff := now.Add(-r.MaxAge)
		n := 0
		for n < len(segs)-1 && !segs[n].Newest.IsZero() && segs[n].Newest.Before(cutoff) {
			n++
		}
		drop = max(drop, n)
	}
	return drop
}
