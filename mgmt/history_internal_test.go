package mgmt

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// feed adds n samples 5 s apart from t0 to h, the queue's values made by
// vals(i) for sample i (the node's are the queue's).
func feed(h *history, t0 time.Time, from, n int, key string, vals func(i int) sampleVals) {
	for i := from; i < from+n; i++ {
		v := vals(i)
		h.add(t0.Add(time.Duration(i)*5*time.Second), v, map[string]sampleVals{key: v})
	}
}

func TestHistoryPoints(t *testing.T) {
	h := newHistory()
	t0 := time.UnixMilli(1_000_000_000_000) // a multiple of 5 s
	// publish grows by i each sample; ready goes up and down.
	vals := func(i int) sampleVals {
		var v sampleVals
		v[cPublish] = int64(i * (i + 1) / 2)
		v[cDeliver], v[cGet] = int64(i), int64(2*i)
		v[fReady] = int64(i % 7)
		v[fUnacked] = 3
		return v
	}
	feed(h, t0, 0, 10, "q", vals)
	s := h.queues["q"]
	last := t0.Add(9 * 5 * time.Second).UnixMilli()
	r := sampleRange{last: last, age: 30_000, incr: 10_000}
	pts := h.points(s, cPublish, r)
	want := []point{{vals(9)[cPublish], last}, {vals(7)[cPublish], last - 10_000}, {vals(5)[cPublish], last - 20_000}, {vals(3)[cPublish], last - 30_000}}
	if fmt.Sprint(pts) != fmt.Sprint(want) {
		t.Errorf("publish points = %v, want %v", pts, want)
	}
	if pts := h.points(s, fReady, r); pts[0].sample != 9%7 || pts[1].sample != 7%7 || pts[2].sample != 5 {
		t.Errorf("ready points = %v", pts)
	}
	if pts := h.points(s, fTotal, r); pts[0].sample != 9%7+3 {
		t.Errorf("total points = %v", pts)
	}
	if pts := h.points(s, fDeliverGet, r); pts[0].sample != 27 || pts[3].sample != 9 {
		t.Errorf("deliver_get points = %v", pts)
	}
	// Steps before the first sample are left out.
	long := sampleRange{last: last, age: 600_000, incr: 5_000}
	if pts := h.points(s, cPublish, long); len(pts) != 10 || pts[9] != (point{0, t0.UnixMilli()}) {
		t.Errorf("points over ten minutes of a 45 s history = %v", pts)
	}
	// A step between two samples takes the earlier one.
	mid := sampleRange{last: last - 2_500, age: 5_000, incr: 5_000}
	if pts := h.points(s, cPublish, mid); pts[0].sample != vals(8)[cPublish] || pts[1].sample != vals(7)[cPublish] {
		t.Errorf("points between samples = %v", pts)
	}
	if r := h.rate(s, cPublish); r != 9.0/5 {
		t.Errorf("publish rate = %v, want 1.8/s", r)
	}
	if r := h.rate(s, fReady); r != 1.0/5 { // 8%7 = 1 -> 9%7 = 2
		t.Errorf("ready rate = %v", r)
	}
}

func TestHistoryWraps(t *testing.T) {
	h := newHistory()
	t0 := time.UnixMilli(1_000_000_000_000)
	vals := func(i int) sampleVals {
		var v sampleVals
		v[cAck] = int64(i) * 1_000_000 // large counters, small changes
		v[fReady] = int64(1000 - i)
		return v
	}
	feed(h, t0, 0, 3*histLen+5, "q", vals)
	s := h.queues["q"]
	lastI := 3*histLen + 4
	last := t0.Add(time.Duration(lastI) * 5 * time.Second).UnixMilli()
	pts := h.points(s, cAck, sampleRange{last: last, age: 3600_000, incr: 5_000})
	if len(pts) != histLen {
		t.Fatalf("%d points kept, want %d", len(pts), histLen)
	}
	for k, p := range pts {
		if i := lastI - k; p.sample != vals(i)[cAck] || p.timestamp != last-int64(k)*5_000 {
			t.Fatalf("point %d = %v, want sample %d", k, p, vals(i)[cAck])
		}
	}
	if p := h.points(s, fReady, sampleRange{last: last, age: 600_000, incr: 600_000}); p[1].sample != vals(lastI - 120)[fReady] {
		t.Errorf("ready ten minutes ago = %v", p)
	}
}

func TestHistoryQuietAndReset(t *testing.T) {
	h := newHistory()
	t0 := time.UnixMilli(1_000_000_000_000)
	busy := func(i int) sampleVals {
		var v sampleVals
		v[cPublish] = int64(min(i, 10))
		v[fReady] = 5
		return v
	}
	feed(h, t0, 0, 11, "q", busy)
	s := h.queues["q"]
	if s.rings[cPublish] == nil || s.rings[fReady] != nil || s.rings[cAck] != nil {
		t.Fatalf("rings after traffic: publish %v, ready %v, ack %v", s.rings[cPublish] != nil, s.rings[fReady] != nil, s.rings[cAck] != nil)
	}
	feed(h, t0, 11, histLen-2, "q", busy)
	if s.rings[cPublish] == nil {
		t.Fatal("publish ring dropped while a change is still in the window")
	}
	feed(h, t0, 11+histLen-2, 1, "q", busy)
	if s.rings[cPublish] != nil {
		t.Fatal("publish ring kept after ten quiet minutes")
	}
	lastI := 11 + histLen - 2
	last := t0.Add(time.Duration(lastI) * 5 * time.Second).UnixMilli()
	if pts := h.points(s, cPublish, sampleRange{last: last, age: 600_000, incr: 5_000}); len(pts) != histLen || pts[0].sample != 10 || pts[histLen-1].sample != 10 {
		t.Errorf("quiet points = %d, %v", len(pts), pts[:2])
	}
	// Counters going back: a new queue of the same name.
	feed(h, t0, lastI+1, 2, "q", func(i int) sampleVals { var v sampleVals; v[cPublish] = 1; return v })
	s = h.queues["q"]
	if pts := h.points(s, cPublish, sampleRange{last: last + 10_000, age: 600_000, incr: 5_000}); len(pts) != 2 || pts[0].sample != 1 || pts[1].sample != 1 {
		t.Errorf("points after a redeclare = %v", pts)
	}
	// A queue missing from a sample is gone.
	h.add(t0.Add(time.Hour), sampleVals{}, map[string]sampleVals{})
	if len(h.queues) != 0 {
		t.Errorf("%d series left after the queue went", len(h.queues))
	}
}

func TestParseRange(t *testing.T) {
	now := time.UnixMilli(1_000_000_012_345)
	for _, c := range []struct {
		query string
		want  *sampleRange
		err   string
	}{
		{"", nil, ""},
		{"lengths_age=60", nil, ""},
		{"lengths_age=60&lengths_incr=x", nil, ""},
		{"lengths_age=60&lengths_incr=5", &sampleRange{last: 1_000_000_010_000, age: 60_000, incr: 5_000}, ""},
		{"lengths_age=600&lengths_incr=60", &sampleRange{last: 999_999_960_000, age: 600_000, incr: 60_000}, ""},
		{"lengths_age=60&lengths_incr=0", nil, "Invalid range parameters: age 60, incr 0"},
		{"lengths_age=-5&lengths_incr=5", nil, "Invalid range parameters: age -5, incr 5"},
		{"lengths_age=5000&lengths_incr=5", nil, "Invalid range parameters: age 5000, incr 5"},
	} {
		q := &request{r: httptest.NewRequest("GET", "/api/overview?"+c.query, nil)}
		got, err := parseRange(q, "lengths", now)
		switch {
		case c.err != "":
			if he, ok := err.(*httpError); !ok || he.reason != c.err || he.status != 400 {
				t.Errorf("%q: error %v, want 400 %q", c.query, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.query, err)
		case fmt.Sprint(got) != fmt.Sprint(c.want):
			t.Errorf("%q: %+v, want %+v", c.query, got, c.want)
		}
	}
}

func TestAppendDetails(t *testing.T) {
	for _, c := range []struct {
		rate   float64
		pts    []point
		ranged bool
		want   string
	}{
		{1.5, nil, false, `{"rate":1.5}`},
		{0, nil, true, `{"rate":0,"samples":[]}`},
		{0, []point{{4, 10_000}}, true, `{"rate":0,"samples":[{"sample":4,"timestamp":10000}]}`},
		{2, []point{{30, 20_000}, {10, 10_000}}, true, `{"rate":2,"samples":[{"sample":30,"timestamp":20000},{"sample":10,"timestamp":10000}],"avg_rate":2,"avg":20}`},
		{1e-7, nil, false, `{"rate":1e-7}`},
	} {
		if got := string(appendDetails(nil, c.rate, c.pts, c.ranged)); got != c.want {
			t.Errorf("appendDetails(%v, %v) = %s, want %s", c.rate, c.pts, got, c.want)
		}
	}
}

// TestHistoryMemory measures what the history costs per queue with 10,000
// queues: idle, with the traffic of a queue with consumers (publish,
// deliver, ack, ready, unacked changing), and with every field changing.
func TestHistoryMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~50 MB")
	}
	const queues = 10_000
	keys := make([]string, queues)
	for i := range keys {
		keys[i] = queueKey("/", fmt.Sprintf("queue-%05d", i))
	}
	busy := []int{cPublish, cDeliver, cAck, fReady, fUnacked}
	all := []int{cPublish, cDeliver, cDeliverNoAck, cGet, cGetNoAck, cGetEmpty, cRedeliver, cAck, fReady, fUnacked}
	for _, c := range []struct {
		name   string
		fields []int
		limit  int // bytes per queue
	}{{"idle", nil, 600}, {"busy", busy, 3_200}, {"every field", all, 5_600}} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h := newHistory()
		qs := make(map[string]sampleVals, queues)
		t0 := time.Now()
		for i := range histLen {
			for _, k := range keys {
				v := qs[k]
				for _, f := range c.fields {
					v[f] += int64(i%3 + 1)
				}
				qs[k] = v
			}
			h.add(t0.Add(time.Duration(i)*5*time.Second), sampleVals{}, qs)
		}
		clear(qs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / queues
		t.Logf("%-12s %5d bytes per queue (%d queues: %.1f MB)", c.name, per, queues, float64(per*queues)/1e6)
		if per > int64(c.limit) {
			t.Errorf("%s: %d bytes per queue, over %d", c.name, per, c.limit)
		}
		runtime.KeepAlive(h)
	}
}
