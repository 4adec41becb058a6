package quorum_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/quorum"
)

func publishWait(t *testing.T, q queue.Queue, body string) {
	t.Helper()
	ch := make(chan error, 1)
	q.Type().Publish(&queue.Message{Body: []byte(body), Persistent: true}, []queue.Queue{q}, nil, func(err error) { ch <- err })
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("publish %s: no confirm", body)
	}
}

// A queue recovered after a restart has its messages (from its snapshot
// and the log after it), what a consumer held before comes back
// redelivered with x-delivery-count raised, and it takes new publishes.
func TestRecover(t *testing.T) {
	dir := t.TempDir()
	limits := queue.Limits{MaxLength: -1, MaxLengthBytes: -1}
	decl := queue.Decl{VHost: "/", Name: "r", Durable: true}
	typ := quorum.NewType(quorum.Config{Dir: dir, SnapshotThreshold: 64})
	x, err := typ.New(decl, limits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	for i := range 300 {
		publishWait(t, q, fmt.Sprint(i))
	}
	rec := queuetest.NewRecorder(10, false)
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: rec, Prefetch: 10}); err != nil {
		t.Fatal(err)
	}
	q.Kick(nil)
	deadline := time.Now().Add(10 * time.Second)
	for rec.Len() < 10 && time.Now().Before(deadline) {
		q.Sync()
	}
	got := rec.Take()
	q.Settle(got[:5], queue.Ack) // 0-4 acked; 5-9 held
	q.Sync()
	// Snapshots happened (threshold 64) and the log below them is kept
	// for the messages still in the queue.
	if err := q.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	gid := q.GroupID()
	typ.Close()

	typ = quorum.NewType(quorum.Config{Dir: dir})
	defer typ.Close()
	decl.ID = gid
	rq, n, err := typ.Recover(decl, limits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q = rq.(*quorum.Queue)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Ready != 295 || st.Unacked != 0 {
		t.Fatalf("after recovery: %+v (Recover said %d), want 295 ready", st, n)
	}
	publishWait(t, q, "new")
	for want := 5; want <= 300; want++ {
		e, _, ok := q.Get(true)
		if !ok {
			t.Fatalf("queue ended before %d", want)
		}
		wb := fmt.Sprint(want)
		if want == 300 {
			wb = "new"
		}
		if string(e.Msg.Body) != wb {
			t.Fatalf("got %q, want %q", e.Msg.Body, wb)
		}
		if (want < 10) != (e.Returns == 1 && e.Redelivered) {
			t.Fatalf("message %d: returns %d redelivered %v", want, e.Returns, e.Redelivered)
		}
	}
}
