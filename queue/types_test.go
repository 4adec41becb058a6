package queue_test

import (
	"errors"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
)

// infoType is a stub type with the TypeInfo under test.
type infoType struct {
	*queuetest.StubType
	info queue.TypeInfo
}

func (t infoType) Info() queue.TypeInfo { return t.info }

// TestCheckOrder pins Registry.Check's order, RabbitMQ 3.10.8's: the
// values of the arguments the type takes (ParseArgs, then the type's
// CheckArgs), then the arguments it refuses, then the flags.
func TestCheckOrder(t *testing.T) {
	errOwn := &queue.ArgError{Arg: "x-own", Reason: "bad"}
	errOwnLimit := &queue.RefusedError{Text: "Exceeded max value for x-own"}
	r := queue.NewRegistry()
	r.Register(infoType{&queuetest.StubType{Name: "rep"}, queue.TypeInfo{Name: "rep", Module: "rabbit_rep_queue",
		Refused: []string{"x-max-priority"}, Replicated: true, Compared: []string{"x-own"},
		CheckArgs: func(a map[string]any) error {
			switch a["x-own"] {
			case "bad":
				return errOwn
			case "too-large":
				return errOwnLimit
			}
			return nil
		}}})
	for _, c := range []struct {
		durable bool
		args    map[string]any
		want    string
	}{
		{false, map[string]any{"x-own": "bad"}, errOwn.Error()},
		{false, map[string]any{"x-own": "bad", "x-max-priority": int32(1)}, errOwn.Error()},
		{false, map[string]any{"x-max-length": "abc", "x-own": "ok"}, `invalid arg 'x-max-length': "expected integer, got longstr"`},
		{false, map[string]any{"x-max-priority": int32(1)}, "invalid arg 'x-max-priority' of queue type rabbit_rep_queue"},
		{false, map[string]any{"x-dead-letter-strategy": "bogus"}, "invalid arg 'x-dead-letter-strategy': invalid_dlx_strategy"},
		{false, map[string]any{"x-queue-leader-locator": int32(5)}, "invalid arg 'x-queue-leader-locator': {unacceptable_type,signedint}"},
		{false, map[string]any{"x-quorum-initial-group-size": int32(0)}, "invalid arg 'x-quorum-initial-group-size': {value_zero,0}"},
		{false, map[string]any{"x-max-in-memory-bytes": int32(-5)}, "invalid arg 'x-max-in-memory-bytes': {value_negative,-5}"},
		{false, map[string]any{"x-queue-leader-locator": "least-leaders", "x-max-in-memory-length": int32(0)}, "invalid property 'non-durable'"},
		{true, map[string]any{"x-own": "ok"}, ""},
		// A *RefusedError of the type's own check comes after the
		// refused arguments and the flags, as the stream's largest
		// segment size does in RabbitMQ.
		{false, map[string]any{"x-own": "too-large"}, "invalid property 'non-durable'"},
		{true, map[string]any{"x-own": "too-large", "x-max-priority": int32(1)}, "invalid arg 'x-max-priority' of queue type rabbit_rep_queue"},
		{true, map[string]any{"x-own": "too-large"}, errOwnLimit.Error()},
		// The type of x-dead-letter-exchange comes first of all, even
		// before x-queue-type and for a type that refuses the argument.
		{true, map[string]any{"x-dead-letter-exchange": int32(1), "x-queue-type": "nope"}, "invalid type 'signedint' for arg 'x-dead-letter-exchange'"},
		{true, map[string]any{"x-dead-letter-exchange": int32(1), "x-max-priority": int32(1)}, "invalid type 'signedint' for arg 'x-dead-letter-exchange'"},
	} {
		args := map[string]any{"x-queue-type": "rep"}
		for k, v := range c.args {
			args[k] = v
		}
		_, _, err := r.Check(&queue.Decl{Name: "q", Durable: c.durable, Args: args})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%v durable=%v: %q, want %q", c.args, c.durable, got, c.want)
		}
	}
	if got := r.Compared(map[string]any{"x-queue-type": "rep"}); len(got) != 1 || got[0] != "x-own" {
		t.Errorf("Compared = %v", got)
	}
	if got := r.Compared(nil); got != nil {
		t.Errorf("Compared of an unregistered classic = %v", got)
	}
}

// TestParseArgsOrder pins the order in which ParseArgs reports one of
// several invalid arguments: RabbitMQ 3.10.8's declare_args order
// (probed), whatever the map's iteration order.
func TestParseArgsOrder(t *testing.T) {
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"x-message-ttl": int32(-1), "x-expires": int32(0)}, "x-expires"},
		{map[string]any{"x-max-length": int32(-1), "x-message-ttl": int32(-1)}, "x-message-ttl"},
		{map[string]any{"x-max-length-bytes": int32(-1), "x-max-length": int32(-1)}, "x-max-length"},
		{map[string]any{"x-max-priority": int32(300), "x-max-length-bytes": int32(-1)}, "x-max-length-bytes"},
		{map[string]any{"x-overflow": "bad", "x-max-priority": int32(300)}, "x-max-priority"},
		{map[string]any{"x-queue-mode": "bad", "x-overflow": "bad"}, "x-overflow"},
		{map[string]any{"x-single-active-consumer": "x", "x-queue-mode": "bad"}, "x-queue-mode"},
		{map[string]any{"x-max-length": int32(-1), "x-dead-letter-routing-key": "k"}, "x-dead-letter-routing-key"},
		{map[string]any{"x-max-in-memory-length": int32(-1), "x-max-length-bytes": int32(-1)}, "x-max-length-bytes"},
		{map[string]any{"x-stream-max-segment-size-bytes": int32(-1), "x-max-age": "1X"}, "x-max-age"},
		{map[string]any{"x-initial-cluster-size": int32(0), "x-max-age": "0D"}, "x-max-age"},
		{map[string]any{"x-queue-leader-locator": "bad", "x-initial-cluster-size": int32(0)}, "x-initial-cluster-size"},
		{map[string]any{"x-queue-master-locator": "bad", "x-single-active-consumer": "x"}, "x-single-active-consumer"},
		{map[string]any{"x-delivery-limit": "abc", "x-max-length": int32(-1)}, "x-max-length"},
	} {
		for range 20 { // map order varies from run to run
			_, err := queue.ParseArgs(c.args)
			var ae *queue.ArgError
			if !errors.As(err, &ae) || ae.Arg != c.want {
				t.Fatalf("%v: %v, want an error naming %s", c.args, err, c.want)
			}
		}
	}
}

// TestCheckMaxAge pins x-max-age's checks, RabbitMQ 3.10.8's.
func TestCheckMaxAge(t *testing.T) {
	for s, want := range map[string]string{
		"1D": "", "007s": "", "99999999999999999999999Y": "",
		"0D": "invalid_max_age", "1X": "invalid_max_age", "5": "invalid_max_age", "1Dx": "invalid_max_age",
		"D": "crash", "": "crash", "-1D": "crash",
	} {
		_, err := queue.ParseArgs(map[string]any{"x-max-age": s})
		got := ""
		var ae *queue.ArgError
		var ce *queue.CrashError
		switch {
		case errors.As(err, &ae):
			got = ae.Reason
		case errors.As(err, &ce):
			got = "crash"
		case err != nil:
			got = err.Error()
		}
		if got != want {
			t.Errorf("x-max-age %q: %q, want %q", s, got, want)
		}
	}
}
