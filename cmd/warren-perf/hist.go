package main

import "math/bits"

// histogram is a log-linear histogram of non-negative int64 values (ns),
// in the manner of HdrHistogram: values below 128 are exact, larger values
// fall into one of 64 sub-buckets per power of two, so a recorded value is
// reported within 1/64 (about 1.6%) of what it was.
const (
	histSubBits  = 7
	histSubCount = 1 << histSubBits // 128
	histHalf     = histSubCount / 2 // 64
	histBuckets  = 64*histHalf + histSubCount
)

type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	min    int64
	max    int64
}

func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < histSubCount {
		return int(u)
	}
	shift := bits.Len64(u) - histSubBits
	return shift*histHalf + int(u>>uint(shift))
}

// histValue is the highest value that maps to bucket i.
func histValue(i int) int64 {
	if i < histSubCount {
		return int64(i)
	}
	shift := i/histHalf - 1
	m := int64(i - shift*histHalf)
	return ((m + 1) << uint(shift)) - 1
}

func (h *histogram) record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[histIndex(v)]++
	h.total++
}

func (h *histogram) merge(o *histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

func (h *histogram) reset() { *h = histogram{} }

// percentile returns the value at or below which p percent (0..100) of the
// recorded values fall; 0 when nothing was recorded.
func (h *histogram) percentile(p float64) int64 {
	if h.total == 0 {
		return 0
	}
	if p >= 100 {
		return h.max
	}
	rank := uint64(p / 100 * float64(h.total))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return v
		}
	}
	return h.max
}
