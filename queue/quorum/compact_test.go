package quorum_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

func lastSnapshot(t *testing.T, q *quorum.Queue) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(q.Raft().Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// publishConfirmed publishes n persistent messages of size bytes to q and
// waits for their confirms.
func publishConfirmed(t *testing.T, q *quorum.Queue, n, size int) {
	t.Helper()
	body := bytes.Repeat([]byte("c"), size)
	done := make(chan error, n)
	for range n {
		q.Type().Publish(&queue.Message{Body: body, Persistent: true}, []queue.Queue{q}, nil, func(err error) { done <- err })
	}
	for range n {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a publish was not confirmed")
		}
	}
}

// A queue that has applied a segment's worth of entries while it holds
// few messages snapshots at once (so its log is compacted and the shared
// log's segments recycled), not at raft's next check, here an hour away;
// one that holds a backlog waits for raft's.
func TestCompactSoonWhenNearEmpty(t *testing.T) {
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir(), SnapshotInterval: time.Hour})
	defer typ.Close()
	x, err := typ.New(queue.Decl{VHost: "/", Name: "c", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	// 10,000 messages of 4 KiB: 40 MiB applied, more messages held than
	// a cheap snapshot has once 32 MiB are.
	const n = 10000
	publishConfirmed(t, q, n, 4<<10)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	if s := lastSnapshot(t, q); s != 0 {
		t.Fatalf("snapshot at %d with %d messages held", s, n)
	}
	// Emptied: the next entry applied (the purge) asks for a snapshot.
	if got := q.Purge(); got != n {
		t.Fatalf("purge: %d, want %d", got, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for lastSnapshot(t, q) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot after the queue was emptied")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A queue that applied a few MiB, far from the 32 MiB that ask for a
// snapshot at once, and then goes idle snapshots after CompactIdle, so
// that its last entries leave the shared log.
func TestCompactWhenIdle(t *testing.T) {
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir(), SnapshotInterval: time.Hour, CompactIdle: 200 * time.Millisecond})
	defer typ.Close()
	x, err := typ.New(queue.Decl{VHost: "/", Name: "c", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*quorum.Queue)
	// 1,000 messages of 4 KiB: 4 MiB applied.
	publishConfirmed(t, q, 1000, 4<<10)
	if got := q.Purge(); got != 1000 {
		t.Fatalf("purge: %d, want 1000", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for lastSnapshot(t, q) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot once the queue went idle")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
