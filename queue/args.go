package queue

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Overflow is what a queue at its length limit does with a new message.
type Overflow uint8

// Overflow behaviours, named as x-overflow values.
const (
	DropHead         Overflow = iota // "drop-head": the oldest message goes (dead-lettered as maxlen)
	RejectPublish                    // "reject-publish": the new message is refused
	RejectPublishDLX                 // "reject-publish-dlx": refused and dead-lettered
)

// Limits are the behaviours a queue's x-arguments (or a policy) set.
type Limits struct {
	MessageTTL     time.Duration // 0 with HasMessageTTL: expire unless delivered at once
	HasMessageTTL  bool
	Expires        time.Duration // 0: never
	MaxLength      int64         // -1: none
	MaxLengthBytes int64         // -1: none
	Overflow       Overflow
	// DeadLetterExchange is the exchange expired, rejected and dropped
	// messages are republished to; HasDLX says one is set ("" is valid: the
	// default exchange).
	DeadLetterExchange   string
	HasDLX               bool
	DeadLetterRoutingKey string
	HasDLRK              bool
	MaxPriority          uint8
	// SingleActive is x-single-active-consumer: only the first consumer
	// gets messages; the next takes over when it goes.
	SingleActive bool
	// DeliveryLimit is x-delivery-limit (quorum queues): a message returned
	// more often than this is dropped or dead-lettered (delivery_limit).
	DeliveryLimit    int64
	HasDeliveryLimit bool
	// Policy is the policy that applies to the queue (nil: none), for
	// types that read more of it than these limits (streams: max-age,
	// stream-max-segment-size-bytes). Nobody modifies it.
	Policy *Policy
}

// Policy is the policy that applies to a queue.
type Policy struct {
	Name       string
	Definition map[string]any
}

// ArgError is an invalid x-argument. RabbitMQ closes the channel with 406
// PRECONDITION_FAILED, naming the argument.
type ArgError struct {
	Arg    string
	Reason string
}

func (e *ArgError) Error() string { return fmt.Sprintf("invalid arg '%s': %s", e.Arg, e.Reason) }

// RefusedError is a declaration a queue type refuses with a text of its
// own, RabbitMQ's 406 PRECONDITION_FAILED texts that name no queue.
type RefusedError struct{ Text string }

func (e *RefusedError) Error() string { return e.Text }

// ArgTypeError is an exchange-naming argument of the wrong type, which
// RabbitMQ words differently from other argument errors.
type ArgTypeError struct {
	Arg  string
	Type string // RabbitMQ's field type name
}

func (e *ArgTypeError) Error() string {
	return fmt.Sprintf("invalid type '%s' for arg '%s'", e.Type, e.Arg)
}

// declareOrder is the order in which ParseArgs checks arguments: RabbitMQ
// 3.10's (rabbit_amqqueue's declare_args; x-queue-type, which it checks
// first of all, is the registry's), so that of several invalid arguments
// the one RabbitMQ names is reported. Two arguments it has no check for
// come last: x-queue-master-locator (RabbitMQ crashes on an unknown
// locator later, placing the queue) and x-delivery-limit (never refused).
var declareOrder = []string{
	"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
	"x-dead-letter-strategy", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
	"x-max-in-memory-bytes", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
	"x-single-active-consumer", "x-quorum-initial-group-size", "x-max-age",
	"x-stream-max-segment-size-bytes", "x-initial-cluster-size", "x-queue-leader-locator",
	"x-queue-master-locator", "x-delivery-limit",
}

// ParseArgs reads the x-arguments a queue understands, checking them in
// RabbitMQ's order (declareOrder): the first invalid one is reported.
// Unknown arguments are accepted and ignored, as RabbitMQ does. x-max-age
// and x-stream-max-segment-size-bytes are only checked here (the stream
// type reads them).
func ParseArgs(args map[string]any) (Limits, error) {
	l := Limits{MaxLength: -1, MaxLengthBytes: -1}
	if len(args) == 0 {
		return l, nil
	}
	for _, k := range declareOrder {
		if v, ok := args[k]; ok {
			if err := l.parseArg(k, v, args); err != nil {
				return l, err
			}
		}
	}
	return l, nil
}

// parseArg checks argument k of args, whose value is v, and records what
// it sets.
func (l *Limits) parseArg(k string, v any, args map[string]any) error {
	switch k {
	case "x-message-ttl":
		n, err := intArg(k, v, 0, math.MaxInt32)
		if err != nil {
			return err
		}
		l.MessageTTL, l.HasMessageTTL = time.Duration(n)*time.Millisecond, true
	case "x-expires":
		n, err := intArg(k, v, 1, math.MaxInt32)
		if err != nil {
			return err
		}
		l.Expires = time.Duration(n) * time.Millisecond
	case "x-max-length":
		n, err := intArg(k, v, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		l.MaxLength = n
	case "x-max-length-bytes":
		n, err := intArg(k, v, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		l.MaxLengthBytes = n
	case "x-max-priority":
		n, err := intArg(k, v, 0, 255)
		if err != nil {
			return err
		}
		l.MaxPriority = uint8(n)
	case "x-overflow":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		switch s {
		case "drop-head":
			l.Overflow = DropHead
		case "reject-publish":
			l.Overflow = RejectPublish
		case "reject-publish-dlx":
			l.Overflow = RejectPublishDLX
		default:
			return &ArgError{k, "invalid_overflow"}
		}
	case "x-single-active-consumer":
		b, ok := v.(bool)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		l.SingleActive = b
	case "x-delivery-limit":
		// RabbitMQ does not check the value; a non-integer means none.
		if n, err := intArg(k, v, 0, math.MaxInt64); err == nil {
			l.DeliveryLimit, l.HasDeliveryLimit = n, true
		}
	case "x-queue-mode":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		if s != "default" && s != "lazy" {
			return &ArgError{k, fmt.Sprintf("\"unsupported queue mode '%s'\"", s)}
		}
	case "x-queue-version":
		n, err := intArg(k, v, math.MinInt64, math.MaxInt64)
		if err != nil {
			return err
		}
		if n != 1 && n != 2 {
			return &ArgError{k, fmt.Sprintf("\"unsupported queue version '%d'\"", n)}
		}
	case "x-queue-master-locator":
		// RabbitMQ 3.10 crashes (541) on an unknown locator when it
		// places the queue; it is refused here as an invalid argument.
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		switch s {
		case "client-local", "min-masters", "random":
		default:
			return &ArgError{k, fmt.Sprintf("\"unsupported queue master locator '%s'\"", s)}
		}
	case "x-quorum-initial-group-size", "x-initial-cluster-size":
		if _, err := intArg(k, v, 1, math.MaxInt64); err != nil {
			return err
		}
	case "x-max-in-memory-length", "x-max-in-memory-bytes", "x-stream-max-segment-size-bytes":
		if _, err := intArg(k, v, 0, math.MaxInt64); err != nil {
			return err
		}
	case "x-max-age":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		return checkMaxAge(k, s)
	case "x-dead-letter-strategy":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		if s != "at-most-once" && s != "at-least-once" {
			return &ArgError{k, "invalid_dlx_strategy"}
		}
	case "x-queue-leader-locator":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		switch s {
		case "client-local", "balanced", "random", "least-leaders":
		default:
			return &ArgError{k, "invalid_queue_locator_arg"}
		}
	case "x-dead-letter-exchange":
		s, ok := v.(string)
		if !ok {
			return &ArgTypeError{k, typeName(v)}
		}
		l.DeadLetterExchange, l.HasDLX = s, true
	case "x-dead-letter-routing-key":
		s, ok := v.(string)
		if !ok {
			return &ArgError{k, fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
		}
		if _, dlx := args["x-dead-letter-exchange"]; !dlx {
			return &ArgError{k, "routing_key_but_no_dlx_defined"}
		}
		l.DeadLetterRoutingKey, l.HasDLRK = s, true
	}
	return nil
}

// checkMaxAge checks an x-max-age as RabbitMQ 3.10 does: leading decimal
// digits, a positive number, then exactly one unit of Y M D h m s. Without
// leading digits RabbitMQ crashes (*CrashError). The stream type reads
// the value (group.ParseInterval, which agrees).
func checkMaxAge(arg, s string) error {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return &CrashError{Arg: arg, Value: s}
	}
	positive := strings.TrimLeft(s[:i], "0") != ""
	switch unit := s[i:]; {
	case !positive, len(unit) != 1 || !strings.Contains("YMDhms", unit):
		return &ArgError{arg, "invalid_max_age"}
	}
	return nil
}

// IntValue widens an integer field value of any width to int64; ok is
// false for other types and for a uint64 above the int64 range. RabbitMQ
// compares and checks integer arguments by value, whatever their width.
func IntValue(v any) (n int64, ok bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

func intArg(name string, v any, lo, hi int64) (int64, error) {
	n, ok := IntValue(v)
	if !ok {
		if x, big := v.(uint64); big {
			return 0, &ArgError{name, fmt.Sprintf("{value_too_large,%d}", x)}
		}
		return 0, &ArgError{name, fmt.Sprintf("\"expected integer, got %s\"", typeName(v))}
	}
	if n < lo {
		if n < 0 {
			return 0, &ArgError{name, fmt.Sprintf("{value_negative,%d}", n)}
		}
		return 0, &ArgError{name, fmt.Sprintf("{value_zero,%d}", n)}
	}
	if n > hi {
		if name == "x-max-priority" {
			return 0, &ArgError{name, fmt.Sprintf("{max_value_exceeded,%d}", n)}
		}
		return 0, &ArgError{name, fmt.Sprintf("{value_too_large,%d}", n)}
	}
	return n, nil
}

// typeName is RabbitMQ's name for a field value's type.
func typeName(v any) string { return amqp.FieldTypeName(v) }
