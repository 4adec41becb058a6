package group

import (
	"math/rand/v2"
	"testing"
	"time"
)

func segs(now time.Time, sizes []int64, agesMin []int) []Segment {
	out := make([]Segment, len(sizes))
	var off int64
	for i := range sizes {
		out[i] = Segment{First: off, Last: off + 9, Bytes: sizes[i]}
		if agesMin[i] >= 0 {
			out[i].Newest = now.Add(-time.Duration(agesMin[i]) * time.Minute)
		}
		off += 10
	}
	return out
}

func TestRetentionDropTable(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	cases := []struct {
		name  string
		lim   Retention
		sizes []int64
		ages  []int // minutes; -1: unknown
		want  int
	}{
		{"no limits", Retention{}, []int64{10, 10, 10}, []int{90, 60, 1}, 0},
		{"bytes: drop until within", Retention{MaxBytes: 25}, []int64{10, 10, 10}, []int{3, 2, 1}, 1},
		{"bytes: equal is kept", Retention{MaxBytes: 30}, []int64{10, 10, 10}, []int{3, 2, 1}, 0},
		{"bytes: never the active one", Retention{MaxBytes: 1}, []int64{10, 10, 10}, []int{3, 2, 1}, 2},
		{"single segment stays", Retention{MaxBytes: 1, MaxAge: time.Second}, []int64{10}, []int{100}, 0},
		{"empty log", Retention{MaxBytes: 1}, nil, nil, 0},
		{"age: strictly older", Retention{MaxAge: 60 * time.Minute}, []int64{1, 1, 1}, []int{61, 60, 1}, 1},
		{"age: stops at the first young one", Retention{MaxAge: 30 * time.Minute}, []int64{1, 1, 1, 1}, []int{90, 10, 80, 1}, 1},
		{"age: unknown age stops", Retention{MaxAge: time.Minute}, []int64{1, 1, 1}, []int{-1, 90, 1}, 0},
		{"age: never the active one", Retention{MaxAge: time.Minute}, []int64{1, 1, 1}, []int{90, 80, 70}, 2},
		{"both: the larger", Retention{MaxBytes: 100, MaxAge: time.Minute}, []int64{10, 10, 10}, []int{90, 80, 0}, 2},
		{"both: bytes larger", Retention{MaxBytes: 10, MaxAge: 85 * time.Minute}, []int64{10, 10, 10}, []int{90, 80, 0}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.lim.Drop(segs(now, c.sizes, c.ages), now); got != c.want {
				t.Fatalf("Drop = %d, want %d", got, c.want)
			}
		})
	}
}

// refDrop is the definition read literally: the longest suffix that
// includes the last segment and fits MaxBytes (the last always stays), and
// the longest prefix of segments older than MaxAge, excluding the last.
func refDrop(r Retention, ss []Segment, now time.Time) int {
	if len(ss) <= 1 {
		return 0
	}
	byBytes := 0
	if r.MaxBytes > 0 {
		byBytes = len(ss) - 1
		for k := 0; k < len(ss)-1; k++ {
			var sum int64
			for _, s := range ss[k:] {
				sum += s.Bytes
			}
			if sum <= r.MaxBytes {
				byBytes = k
				break
			}
		}
	}
	byAge := 0
	if r.MaxAge > 0 {
		for k := 0; k < len(ss)-1; k++ {
			old := true
			for _, s := range ss[:k+1] {
				old = old && !s.Newest.IsZero() && now.Sub(s.Newest) > r.MaxAge
			}
			if old {
				byAge = k + 1
			}
		}
	}
	return max(byBytes, byAge)
}

func TestRetentionDropRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	now := time.Unix(5_000_000, 0)
	for i := 0; i < 5000; i++ {
		k := r.IntN(8)
		sizes, ages := make([]int64, k), make([]int, k)
		for j := range sizes {
			sizes[j] = int64(r.IntN(50))
			ages[j] = r.IntN(120) - 5 // some unknown (-1..-5 -> treat <0 as unknown)
		}
		ss := segs(now, sizes, ages)
		lim := Retention{MaxBytes: int64(r.IntN(200)) - 20, MaxAge: time.Duration(r.IntN(100)-10) * time.Minute}
		if got, want := lim.Drop(ss, now), refDrop(lim, ss, now); got != want {
			t.Fatalf("Drop(%+v, %v) = %d, reference %d", lim, ss, got, want)
		}
	}
}
