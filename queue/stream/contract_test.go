package stream_test

import (
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/stream"
)

// TestContract runs the queue contract's cases that apply to a log.
func TestContract(t *testing.T) {
	typ := stream.NewType(stream.Config{Dir: t.TempDir(), Log: func(err error, msg string) { t.Errorf("%s: %v", msg, err) }})
	queuetest.Run(t, queuetest.Harness{Type: durable{typ}, Features: queuetest.Features{Log: true}, AwaitConfirms: true, Prefetch: 100,
		Quiesce: func(q queue.Queue) { q.(*stream.Queue).Quiesce() }})
}

// durable makes every queue of the contract a durable one.
type durable struct{ *stream.Type }

func (d durable) New(dc queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	dc.Durable = true
	return d.Type.New(dc, l, h)
}
