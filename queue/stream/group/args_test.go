package group

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
)

func TestParseOffset(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := time.Unix(1_600_000_000, 0).UTC()
	ok := []struct {
		v    any
		want OffsetSpec
	}{
		{nil, OffsetSpec{Kind: OffsetNext}},
		{"first", OffsetSpec{Kind: OffsetFirst}},
		{"last", OffsetSpec{Kind: OffsetLast}},
		{"next", OffsetSpec{Kind: OffsetNext}},
		{[]byte("first"), OffsetSpec{Kind: OffsetFirst}},
		{int64(0), OffsetSpec{Kind: OffsetAbsolute}},
		{int8(5), OffsetSpec{Kind: OffsetAbsolute, Offset: 5}},
		{uint32(4000000000), OffsetSpec{Kind: OffsetAbsolute, Offset: 4000000000}},
		{uint64(math.MaxUint64), OffsetSpec{Kind: OffsetAbsolute, Offset: math.MaxInt64}},
		{ts, OffsetSpec{Kind: OffsetTimestamp, Time: ts}},
		{"10m", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-10 * time.Minute)}},
		{"1D", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-24 * time.Hour)}},
		{"2M", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-60 * 24 * time.Hour)}},
		{"1Y", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-365 * 24 * time.Hour)}},
		{"30s", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-30 * time.Second)}},
		{"3h", OffsetSpec{Kind: OffsetTimestamp, Time: now.Add(-3 * time.Hour)}},
		// RabbitMQ 3.10 reads a negative offset from the start (probed).
		{int32(-1), OffsetSpec{Kind: OffsetFirst}},
	}
	for _, c := range ok {
		got, err := ParseOffset(c.v, now)
		if err != nil || got.Kind != c.want.Kind || got.Offset != c.want.Offset || !got.Time.Equal(c.want.Time) {
			t.Errorf("ParseOffset(%T %v) = %+v, %v; want %+v", c.v, c.v, got, err, c.want)
		}
	}
	for _, v := range []any{"First", "", "10", "m", "0m", "-1m", "10x", "1.5h", " 10m", "10 m", "10mm", 1.5, true, []byte("10m"), []any{"first"}} {
		var ae *queue.ArgError
		if got, err := ParseOffset(v, now); !errors.As(err, &ae) || ae.Arg != ArgOffset {
			t.Errorf("ParseOffset(%T %v) = %+v, %v; want an ArgError", v, v, got, err)
		}
	}
	// An interval beyond Duration's range is the earliest time there is.
	if got, err := ParseOffset("99999999999999999999Y", now); err != nil || got.Kind != OffsetTimestamp || !got.Time.Before(now.Add(-200*365*24*time.Hour)) {
		t.Errorf("huge interval: %+v %v", got, err)
	}
}

func TestParseInterval(t *testing.T) {
	if d, err := ParseInterval("x-max-age", "7D"); err != nil || d != 7*24*time.Hour {
		t.Fatalf("7D: %v %v", d, err)
	}
	if d, err := ParseInterval("x-max-age", "1000Y"); err != nil || d != math.MaxInt64 {
		t.Fatalf("1000Y: %v %v", d, err)
	}
	_, err := ParseInterval("x-max-age", "7d")
	var ae *queue.ArgError
	if !errors.As(err, &ae) || ae.Error() != "invalid arg 'x-max-age': invalid_max_age" {
		t.Fatalf("7d: %v", err)
	}
	// No leading number: RabbitMQ crashes (541).
	for _, s := range []string{"", "D", "-1D", " 1D"} {
		var ce *queue.CrashError
		if _, err := ParseInterval("x-max-age", s); !errors.As(err, &ce) {
			t.Fatalf("%q: %v, want a CrashError", s, err)
		}
	}
}

func TestParseGroupArgs(t *testing.T) {
	now := time.Unix(100, 0)
	g, err := ParseGroupArgs(map[string]any{ArgGroup: "billing", ArgRebalanceTimeout: int32(2500), ArgCancelOnRebalance: true, ArgOffset: "first"}, "ctag", now)
	if err != nil || g.Group != "billing" || g.AutoTracking || g.RebalanceTimeout != 2500*time.Millisecond || !g.CancelOnRebalance || g.Offset.Kind != OffsetFirst {
		t.Fatalf("full: %+v %v", g, err)
	}
	g, err = ParseGroupArgs(nil, "ctag", now)
	if err != nil || g.Group != "" || g.RebalanceTimeout != DefaultRebalanceTimeout || g.Offset.Kind != OffsetNext {
		t.Fatalf("none: %+v %v", g, err)
	}
	g, err = ParseGroupArgs(map[string]any{ArgAutoOffsetTracking: true}, "worker-1", now)
	if err != nil || g.Group != "worker-1" || !g.AutoTracking {
		t.Fatalf("auto tracking: %+v %v", g, err)
	}
	if g, err = ParseGroupArgs(map[string]any{ArgAutoOffsetTracking: false, ArgGroup: "g"}, "t", now); err != nil || g.Group != "g" {
		t.Fatalf("auto tracking off: %+v %v", g, err)
	}
	if g, _ := ParseGroupArgs(map[string]any{ArgGroup: strings.Repeat("é", 127) + "a"}, "t", now); len(g.Group) != 255 {
		t.Fatalf("255-byte name refused")
	}
	bad := []struct {
		args map[string]any
		arg  string
	}{
		{map[string]any{ArgGroup: strings.Repeat("a", 256)}, ArgGroup},
		{map[string]any{ArgGroup: ""}, ArgGroup},
		{map[string]any{ArgGroup: []byte("g")}, ArgGroup},
		{map[string]any{ArgGroup: int32(1)}, ArgGroup},
		{map[string]any{ArgGroup: "g", ArgRebalanceTimeout: int32(-1)}, ArgRebalanceTimeout},
		{map[string]any{ArgGroup: "g", ArgRebalanceTimeout: "10s"}, ArgRebalanceTimeout},
		{map[string]any{ArgGroup: "g", ArgRebalanceTimeout: int64(math.MaxInt32) + 1}, ArgRebalanceTimeout},
		{map[string]any{ArgGroup: "g", ArgCancelOnRebalance: int8(1)}, ArgCancelOnRebalance},
		{map[string]any{ArgRebalanceTimeout: int32(10)}, ArgRebalanceTimeout},
		{map[string]any{ArgCancelOnRebalance: true}, ArgCancelOnRebalance},
		{map[string]any{ArgAutoOffsetTracking: "yes"}, ArgAutoOffsetTracking},
		{map[string]any{ArgAutoOffsetTracking: true, ArgGroup: "g"}, ArgAutoOffsetTracking},
		{map[string]any{ArgGroup: "g", ArgOffset: "sometime"}, ArgOffset},
	}
	for _, c := range bad {
		var ae *queue.ArgError
		if _, err := ParseGroupArgs(c.args, "t", now); !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("ParseGroupArgs(%v) = %v; want an ArgError on %s", c.args, err, c.arg)
		}
	}
	if _, err := ParseGroupArgs(map[string]any{ArgAutoOffsetTracking: true}, "", now); err == nil {
		t.Error("auto tracking without a consumer tag accepted")
	}
}
