package stream_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/stream"
)

func publishN(t *testing.T, q queue.Queue, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		done := make(chan error, 1)
		q.Type().Publish(&queue.Message{Body: []byte(fmt.Sprint(i))}, []queue.Queue{q}, nil, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// Every consumer reads the whole stream from its offset, acks keep the
// messages, credit limits deliveries, and the log survives a stop and a
// recovery with its offsets.
func TestStreamConsumersAndRecover(t *testing.T) {
	dir := t.TempDir()
	typ := stream.NewType(stream.Config{Dir: dir})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 7, Args: map[string]any{"x-stream-max-segment-size-bytes": int64(100)}}
	l, _ := queue.ParseArgs(nil)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false)}); !errors.Is(err, queue.ErrPrefetchRequired) {
		t.Fatalf("consumer without prefetch: %v", err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, NoAck: true}); !errors.Is(err, queue.ErrNoAckRefused) {
		t.Fatalf("no-ack consumer: %v", err)
	}
	var oe *queue.OffsetError
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "n", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, Args: map[string]any{"x-stream-offset": "bogus"}}); !errors.As(err, &oe) {
		t.Fatalf("unknown offset: %v", err)
	}
	publishN(t, q, 0, 20)
	a, b := queuetest.NewRecorder(3, false), queuetest.NewRecorder(-1, false)
	q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Prefetch: 3, Args: map[string]any{"x-stream-offset": "first"}})
	q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: b, Prefetch: 100, Args: map[string]any{"x-stream-offset": int64(15)}})
	q.Kick(nil)
	ga := a.Take()
	if fmt.Sprint(queuetest.Bodies(ga)) != "[0 1 2]" || ga[2].Seq != 2 {
		t.Fatalf("a got %v", queuetest.Bodies(ga))
	}
	if got := queuetest.Bodies(b.Take()); fmt.Sprint(got) != "[15 16 17 18 19]" {
		t.Fatalf("b got %v", got)
	}
	q.Settle(ga, queue.Ack)
	a.Grant(3)
	q.Kick(nil)
	if got := queuetest.Bodies(a.Take()); fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("a after acks got %v", got)
	}
	if st := q.Stats(); st.Ready != 20 || st.Consumers != 2 {
		t.Fatalf("stats %+v", st)
	}
	q.(queue.Stopper).Stop()

	q2, n, err := stream.NewType(stream.Config{Dir: dir}).Recover(d, l, queue.Hooks{})
	if err != nil || n != 20 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	if q2.(*stream.Queue).Log().Segments() < 5 {
		t.Fatal("the stream did not roll its small segments")
	}
	publishN(t, q2, 20, 22)
	c := queuetest.NewRecorder(-1, false)
	q2.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Prefetch: 100, Args: map[string]any{"x-stream-offset": int64(18)}})
	q2.Kick(nil)
	got := c.Take()
	if fmt.Sprint(queuetest.Bodies(got)) != "[18 19 20 21]" || got[3].Seq != 21 {
		t.Fatalf("after recovery got %v", queuetest.Bodies(got))
	}
	if _, _, err := q2.Delete(false, true); err != nil {
		t.Fatal(err)
	}
}
