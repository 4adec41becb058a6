package mgmt

import (
	"math"
	"strconv"
	"time"
)

// The chart history: the sampler keeps its last histLen samples (ten
// minutes at the 5 s StatsInterval) of the node's and every queue's
// message_stats counters and lengths, and the API serves them as RabbitMQ
// does when a request asks for a range (lengths_age and lengths_incr for
// messages, messages_ready, messages_unacknowledged; msg_rates_age and
// msg_rates_incr for message_stats): each {name}_details then has
// "samples" (newest first, one every incr seconds over age seconds),
// "avg_rate" and "avg".
//
// Memory: a queue's history is one series (about 250 bytes). Its values
// are kept as the change from one sample to the next, 4 bytes each, in
// one ring per field that changed within the window (121 x 4 = 484
// bytes); a field that has not changed for ten minutes gives its ring
// back. An idle queue costs its series only; a queue with traffic in
// every field 10 rings (under 5 KB). history_test.go measures it.

// histLen is how many samples are kept: ten minutes at 5 s and the sample
// before them (RabbitMQ keeps 600 s at 5 s for queues by default).
const histLen = 121

// The fields of a sample: the message_stats counters (counter slots), then
// the two lengths.
const (
	fReady = nCounters + iota
	fUnacked
	nFields
	// Sums, for points: deliver_get, and messages (ready + unacked).
	fDeliverGet
	fTotal
)

// sums are the fields the sums add up.
var sums = map[int][]int{
	fDeliverGet: {cDeliver, cDeliverNoAck, cGet, cGetNoAck},
	fTotal:      {fReady, fUnacked},
}

// sampleVals are an object's values at one sample.
type sampleVals [nFields]int64

// history is the samples taken so far: their times, and the node's and
// each queue's values. The sampler's mutex guards it.
type history struct {
	seq    uint64         // samples taken; the latest is seq-1
	times  [histLen]int64 // unix milliseconds of sample s, at s % histLen
	node   *series        // nil before the first sample
	queues map[string]*series
}

func newHistory() *history { return &history{queues: map[string]*series{}} }

// series is one object's samples from sample first on. Field f's value at
// a sample is rebuilt from the latest one (last) backwards through the
// changes in rings[f] (the counters' as unsigned, the lengths', which go
// down, as signed 32-bit numbers); a nil ring means no change in the
// window.
type series struct {
	first uint64
	last  sampleVals
	rings [nFields]*[histLen]uint32
	quiet [nFields]uint8 // samples in a row without a change, up to histLen
}

// oldest is the first sample still kept.
func (h *history) oldest() uint64 {
	if h.seq > histLen {
		return h.seq - histLen
	}
	return 0
}

// add records sample h.seq taken at now, with the node's values and the
// queues' (keyed as queueKey); queues not in qs are dropped.
func (h *history) add(now time.Time, node sampleVals, qs map[string]sampleVals) {
	seq := h.seq
	h.times[seq%histLen] = now.UnixMilli()
	if h.node == nil {
		h.node = &series{first: seq}
	}
	h.node.add(seq, node)
	for k, v := range qs {
		s := h.queues[k]
		if s == nil {
			s = &series{first: seq}
			h.queues[k] = s
		}
		s.add(seq, v)
	}
	for k := range h.queues {
		if _, ok := qs[k]; !ok {
			delete(h.queues, k)
		}
	}
	h.seq++
}

func (s *series) add(seq uint64, v sampleVals) {
	if seq > s.first {
		for f := range nCounters {
			if v[f] < s.last[f] {
				// Counters went back: the queue was deleted and declared
				// again between two samples. Its history starts again.
				*s = series{first: seq, last: v}
				return
			}
		}
		for f := range v {
			d := v[f] - s.last[f]
			r := s.rings[f]
			if r == nil {
				if d == 0 {
					continue
				}
				r = new([histLen]uint32) // zeros: no change before
				s.rings[f] = r
			}
			r[seq%histLen] = uint32(d)
			switch {
			case d != 0:
				s.quiet[f] = 0
			case s.quiet[f] < histLen:
				s.quiet[f]++
			}
			if s.quiet[f] >= histLen-1 {
				// No change since the oldest sample kept.
				s.rings[f] = nil
				s.quiet[f] = 0
			}
		}
	}
	s.last = v
}

// change is field f's change at sample i.
func (s *series) change(f int, i uint64) int64 {
	r := s.rings[f]
	if r == nil {
		return 0
	}
	if f >= nCounters {
		return int64(int32(r[i%histLen]))
	}
	return int64(r[i%histLen])
}

// values fills out with field f's value at every sample kept, out[i -
// from] for sample i; from is the first kept sample of s.
func (h *history) values(s *series, f int, out *[histLen]int64) (from uint64) {
	from = max(s.first, h.oldest())
	v := s.last[f]
	for i := h.seq - 1; ; i-- {
		out[i-from] = v
		if i == from {
			return from
		}
		v -= s.change(f, i)
	}
}

// rate is field f's change over the last interval, per second.
func (h *history) rate(s *series, f int) float64 {
	if s == nil || h.seq < 2 || s.first >= h.seq-1 {
		return 0
	}
	i := h.seq - 1
	dt := h.times[i%histLen] - h.times[(i-1)%histLen]
	if dt <= 0 {
		return 0
	}
	return float64(s.change(f, i)) * 1000 / float64(dt)
}

// histAge is how many seconds of samples the history holds.
func (s *Server) histAge() int {
	return int(time.Duration(histLen-1) * s.opts.StatsInterval / time.Second)
}

// sampleRange is a request's age and increment, in milliseconds, ending at
// last (now, rounded down to a multiple of incr, as RabbitMQ does).
type sampleRange struct{ last, age, incr int64 }

// point is one of RabbitMQ's samples.
type point struct {
	sample    int64
	timestamp int64
}

// points are field f's samples of s over r (or those of a sum), newest first: at each step of r, the
// value of the latest sample taken at or before it. Steps before the
// object's first sample kept are left out.
func (h *history) points(s *series, f int, r sampleRange) []point {
	if s == nil || h.seq == 0 || s.first >= h.seq {
		return nil
	}
	var vals [histLen]int64
	var from uint64
	if parts, ok := sums[f]; ok {
		var sum [histLen]int64
		for _, g := range parts {
			from = h.values(s, g, &vals)
			for i := range sum {
				sum[i] += vals[i]
			}
		}
		vals = sum
	} else {
		from = h.values(s, f, &vals)
	}
	out := make([]point, 0, r.age/r.incr+1)
	i := h.seq - 1
	for t := r.last; t >= r.last-r.age; t -= r.incr {
		for h.times[i%histLen] > t {
			if i == from {
				return out
			}
			i--
		}
		out = append(out, point{vals[i-from], t})
	}
	return out
}

// parseRange reads prefix_age and prefix_incr (seconds) as RabbitMQ does:
// no range unless both are integers; then age and incr must be positive
// and age/incr at most 500.
func parseRange(q *request, prefix string, now time.Time) (*sampleRange, error) {
	v := q.r.URL.Query()
	age, err1 := strconv.ParseInt(v.Get(prefix+"_age"), 10, 64)
	incr, err2 := strconv.ParseInt(v.Get(prefix+"_incr"), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	if age <= 0 || incr <= 0 || age/incr > 500 || age > math.MaxInt64/1000 {
		return nil, badRequest("Invalid range parameters: age %d, incr %d", age, incr)
	}
	ms := now.UnixMilli()
	return &sampleRange{last: ms - ms%(incr*1000), age: age * 1000, incr: incr * 1000}, nil
}

// appendDetails appends {"rate":r} or, with points, RabbitMQ's
// {"rate":r,"samples":[...],"avg_rate":x,"avg":y} (avg_rate and avg only
// with two samples or more).
func appendDetails(b []byte, rate float64, pts []point, ranged bool) []byte {
	b = append(b, `{"rate":`...)
	b = appendFloat(b, rate)
	if ranged {
		b = append(b, `,"samples":[`...)
		var total int64
		for i, p := range pts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"sample":`...)
			b = strconv.AppendInt(b, p.sample, 10)
			b = append(b, `,"timestamp":`...)
			b = strconv.AppendInt(b, p.timestamp, 10)
			b = append(b, '}')
			total += p.sample
		}
		b = append(b, ']')
		if n := len(pts); n > 1 {
			newest, oldest := pts[0], pts[n-1]
			b = append(b, `,"avg_rate":`...)
			b = appendFloat(b, float64(newest.sample-oldest.sample)*1000/float64(newest.timestamp-oldest.timestamp))
			b = append(b, `,"avg":`...)
			b = appendFloat(b, float64(total)/float64(n))
		}
	}
	return append(b, '}')
}

// appendFloat writes f as encoding/json would.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		b = strconv.AppendFloat(b, f, 'e', -1, 64)
		// 1e-07 -> 1e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}
