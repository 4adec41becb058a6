// args.go: the consumer arguments of stream consumers and group members
// (issue 13, sections 1 and 3): x-stream-offset (first, last, next, an
// offset, an AMQP timestamp, an interval such as "10m"), the interval
// syntax shared with x-max-age, x-stream-group and the other group
// arguments.

package group

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Consumer arguments.
const (
	ArgOffset             = "x-stream-offset"
	ArgGroup              = "x-stream-group"
	ArgCancelOnRebalance  = "x-stream-cancel-on-rebalance"
	ArgAutoOffsetTracking = "x-stream-automatic-offset-tracking"
)

// MaxGroupName is the longest group name, in bytes.
const MaxGroupName = 255

// OffsetKind is the kind of an x-stream-offset.
type OffsetKind uint8

// Offset kinds. The zero value is RabbitMQ's default, "next".
const (
	OffsetNext      OffsetKind = iota // messages published after the consumer starts
	OffsetFirst                       // the first retained message
	OffsetLast                        // the last chunk (RabbitMQ: the last written batch)
	OffsetAbsolute                    // Offset, clamped to the retained log by the reader
	OffsetTimestamp                   // the first message stored at or after Time
)

func (k OffsetKind) String() string {
	switch k {
	case OffsetNext:
		return "next"
	case OffsetFirst:
		return "first"
	case OffsetLast:
		return "last"
	case OffsetAbsolute:
		return "offset"
	case OffsetTimestamp:
		return "timestamp"
	}
	return "unknown"
}

// OffsetSpec is where a stream consumer (or a group partition never
// committed) starts.
type OffsetSpec struct {
	Kind   OffsetKind
	Offset int64     // OffsetAbsolute
	Time   time.Time // OffsetTimestamp
}

// ParseOffset reads an x-stream-offset value, as RabbitMQ 3.10 does: nil
// (absent) is next; "first", "last", "next" (as a string or byte array);
// an integer of any width, the offset (a negative one reads as the first
// retained offset, as RabbitMQ 3.10 answers it: probed, -1 starts at 0); a
// timestamp ('T', seconds); any other string, an
// interval (see ParseInterval) before now. Other values are an
// *queue.ArgError. (RabbitMQ 3.10 fails such a basic.consume with an
// internal error rather than a clean refusal.)
func ParseOffset(v any, now time.Time) (OffsetSpec, error) {
	switch x := v.(type) {
	case nil:
		return OffsetSpec{Kind: OffsetNext}, nil
	case string:
		if k, ok := namedOffset(x); ok {
			return OffsetSpec{Kind: k}, nil
		}
		d, err := ParseInterval(ArgOffset, x)
		if ce := (*queue.CrashError)(nil); errors.As(err, &ce) {
			err = &queue.ArgError{Arg: ArgOffset, Reason: "invalid_max_age"}
		}
		if err != nil {
			return OffsetSpec{}, err
		}
		return OffsetSpec{Kind: OffsetTimestamp, Time: subClamped(now, d)}, nil
	case []byte:
		if k, ok := namedOffset(string(x)); ok {
			return OffsetSpec{Kind: k}, nil
		}
	case time.Time:
		return OffsetSpec{Kind: OffsetTimestamp, Time: x}, nil
	case uint64:
		if x > math.MaxInt64 {
			return OffsetSpec{Kind: OffsetAbsolute, Offset: math.MaxInt64}, nil
		}
	}
	if n, ok := queue.IntValue(v); ok {
		if n < 0 {
			return OffsetSpec{Kind: OffsetFirst}, nil
		}
		return OffsetSpec{Kind: OffsetAbsolute, Offset: n}, nil
	}
	return OffsetSpec{}, &queue.ArgError{Arg: ArgOffset, Reason: fmt.Sprintf("{invalid_offset_arg,%s}", amqp.FieldTypeName(v))}
}

func namedOffset(s string) (OffsetKind, bool) {
	switch s {
	case "first":
		return OffsetFirst, true
	case "last":
		return OffsetLast, true
	case "next":
		return OffsetNext, true
	}
	return 0, false
}

// subClamped is now-d, or the zero time when that would overflow.
func subClamped(now time.Time, d time.Duration) time.Time {
	t := now.Add(-d)
	if t.After(now) {
		return time.Time{}
	}
	return t
}

// Interval units, as RabbitMQ's x-max-age: a year is 365 days, a month 30.
var intervalUnits = map[byte]time.Duration{
	'Y': 365 * 24 * time.Hour,
	'M': 30 * 24 * time.Hour,
	'D': 24 * time.Hour,
	'h': time.Hour,
	'm': time.Minute,
	's': time.Second,
}

// ParseInterval reads an interval such as "10m" or "7D", the syntax of
// x-max-age and of x-stream-offset intervals: a positive decimal integer
// and one unit of Y M D h m s (case matters: M is months, m minutes). arg
// names the argument in the error, RabbitMQ's invalid_max_age. An interval
// beyond time.Duration's range (about 292 years) is that maximum.
func ParseInterval(arg, s string) (time.Duration, error) {
	bad := &queue.ArgError{Arg: arg, Reason: "invalid_max_age"}
	if s == "" || s[0] < '0' || s[0] > '9' {
		// RabbitMQ reads the leading digits as an integer and crashes
		// when there are none.
		return 0, &queue.CrashError{Arg: arg, Value: s}
	}
	if len(s) < 2 {
		return 0, bad
	}
	unit, ok := intervalUnits[s[len(s)-1]]
	if !ok {
		return 0, bad
	}
	digits := s[:len(s)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return math.MaxInt64, nil
		}
		return 0, bad
	}
	if n == 0 {
		return 0, bad
	}
	if n > uint64(math.MaxInt64/int64(unit)) {
		return math.MaxInt64, nil
	}
	return time.Duration(n) * unit, nil
}

// ParseGroupName reads an x-stream-group value: a string of 1 to
// MaxGroupName bytes.
func ParseGroupName(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", &queue.ArgError{Arg: ArgGroup, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
	}
	if s == "" {
		return "", &queue.ArgError{Arg: ArgGroup, Reason: "empty group name"}
	}
	if len(s) > MaxGroupName {
		return "", &queue.ArgError{Arg: ArgGroup, Reason: fmt.Sprintf("group name longer than %d bytes", MaxGroupName)}
	}
	return s, nil
}

// GroupArgs are a consumer's group arguments.
type GroupArgs struct {
	// Group is the group the consumer joins; "" for none. With
	// AutoTracking it is the consumer tag (LavinMQ's per-consumer offset
	// tracking as a one-member group named by the tag).
	Group        string
	AutoTracking bool
	// RebalanceTimeout is x-stream-rebalance-timeout (DefaultRebalanceTimeout
	// without it; 0 moves a revoked partition at once).
	RebalanceTimeout  time.Duration
	CancelOnRebalance bool
	// Offset is x-stream-offset: for a group, where partitions it never
	// committed start.
	Offset OffsetSpec
}

// ParseGroupArgs reads the group arguments of a basic.consume with
// consumer tag tag; now dates interval offsets. The group-only arguments
// (rebalance timeout, cancel on rebalance) are refused without a group.
func ParseGroupArgs(args map[string]any, tag string, now time.Time) (GroupArgs, error) {
	g := GroupArgs{RebalanceTimeout: DefaultRebalanceTimeout}
	var err error
	if g.Offset, err = ParseOffset(args[ArgOffset], now); err != nil {
		return g, err
	}
	if v, ok := args[ArgGroup]; ok {
		if g.Group, err = ParseGroupName(v); err != nil {
			return g, err
		}
	}
	if v, ok := args[ArgAutoOffsetTracking]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return g, &queue.ArgError{Arg: ArgAutoOffsetTracking, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		}
		if b {
			if g.Group != "" {
				return g, &queue.ArgError{Arg: ArgAutoOffsetTracking, Reason: "cannot be combined with " + ArgGroup}
			}
			if tag == "" || len(tag) > MaxGroupName {
				return g, &queue.ArgError{Arg: ArgAutoOffsetTracking, Reason: "needs a consumer tag of 1 to 255 bytes"}
			}
			g.Group, g.AutoTracking = tag, true
		}
	}
	if v, ok := args[ArgRebalanceTimeout]; ok {
		n, isInt := queue.IntValue(v)
		switch {
		case !isInt:
			return g, &queue.ArgError{Arg: ArgRebalanceTimeout, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		case n < 0:
			return g, &queue.ArgError{Arg: ArgRebalanceTimeout, Reason: fmt.Sprintf("{value_negative,%d}", n)}
		case n > math.MaxInt32:
			return g, &queue.ArgError{Arg: ArgRebalanceTimeout, Reason: fmt.Sprintf("{value_too_large,%d}", n)}
		}
		g.RebalanceTimeout = time.Duration(n) * time.Millisecond
	}
	if v, ok := args[ArgCancelOnRebalance]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return g, &queue.ArgError{Arg: ArgCancelOnRebalance, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		}
		g.CancelOnRebalance = b
	}
	if g.Group == "" {
		for _, k := range []string{ArgRebalanceTimeout, ArgCancelOnRebalance} {
			if _, ok := args[k]; ok {
				return g, &queue.ArgError{Arg: k, Reason: "needs " + ArgGroup}
			}
		}
	}
	return g, nil
}
