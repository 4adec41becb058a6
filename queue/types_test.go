package queue_test

import (
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
	r := queue.NewRegistry()
	r.Register(infoType{&queuetest.StubType{Name: "rep"}, queue.TypeInfo{Name: "rep", Module: "rabbit_rep_queue",
		Refused: []string{"x-max-priority"}, Replicated: true, Compared: []string{"x-own"},
		CheckArgs: func(a map[string]any) error {
			if a["x-own"] == "bad" {
				return errOwn
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
