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

// A backlog read back from the log (past the body cache's 16,384
// messages) reads each log entry once, not once per message: an entry
// holds a proposer's whole batch.
func TestBacklogReadsEachEntryOnce(t *testing.T) {
	dir := t.TempDir()
	limits := queue.Limits{MaxLength: -1, MaxLengthBytes: -1}
	decl := queue.Decl{VHost: "/", Name: "backlog", Durable: true}
	typ := quorum.NewType(quorum.Config{Dir: dir})
	x, err := typ.New(decl, limits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	done := make(chan error, n)
	for i := range n {
		q := []queue.Queue{x}
		typ.Publish(&queue.Message{Body: []byte(fmt.Sprint(i)), Persistent: true}, q, nil, func(err error) { done <- err })
	}
	for range n {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no confirm")
		}
	}
	gid := x.(*quorum.Queue).GroupID()
	typ.Close()

	typ = quorum.NewType(quorum.Config{Dir: dir})
	defer typ.Close()
	decl.ID = gid
	rq, _, err := typ.Recover(decl, limits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := rq.(*quorum.Queue)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	_, entries := quorum.EntryLoads(q)
	got, err := quorum.Bodies(q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[0] != "0" || got[n-1] != fmt.Sprint(n-1) {
		t.Fatalf("read back %d messages (%q ... %q), want %d in order", len(got), got[0], got[len(got)-1], n)
	}
	for i, b := range got {
		if b != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, b)
		}
	}
	if loads, _ := quorum.EntryLoads(q); entries == 0 || loads != entries {
		t.Fatalf("%d log entries read for %d messages in %d entries, want one read per entry", loads, n, entries)
	}
	t.Logf("%d messages in %d entries", n, entries)
}
