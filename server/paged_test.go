package server

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// TestPagedBacklogOrder pushes stored and transient entries, some late,
// through a backlog with a window of 2 and checks that every entry comes
// out once, in Seq order, with requeued ones first.
func TestPagedBacklogOrder(t *testing.T) {
	st := persist.NewMemory()
	defer st.Close()
	rec := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := st.SaveQueue(rec); err != nil {
		t.Fatal(err)
	}
	b := newPagedBacklog(st, rec.ID, 2, func(err error) { t.Error(err) })
	q := queue.New(queue.Decl{Name: "q", Durable: true, ID: rec.ID}, queue.Options{Backlog: b})
	var msgID uint64
	push := func(seq uint64, stored bool) {
		m := &queue.Message{Body: []byte(fmt.Sprint(seq)), Persistent: stored}
		if stored {
			msgID++
			m.StoreID = msgID
			st.Publish(msgID, persist.MessageRecord{Body: m.Body}, []persist.QueueSeq{{QueueID: rec.ID, Seq: seq, MsgID: msgID}}, nil)
		}
		q.EnqueueAt(m, seq)
	}
	seqs := make([]uint64, 12)
	for i := range seqs {
		seqs[i] = q.ReserveSeq()
	}
	// 1..12, with 6 and 9 transient, 8 arriving after 10 and 11.
	for _, s := range []uint64{1, 2, 3, 4, 5, 7, 10, 11, 8, 12} {
		push(s, true)
	}
	push(6, false)
	push(9, false)
	if n := b.Len(); n != 12 {
		t.Fatalf("len %d, want 12", n)
	}
	if b.diskN == 0 {
		t.Fatal("nothing was paged out with a window of 2")
	}
	var got []string
	first, _, _ := q.Get()
	second, _, _ := q.Get()
	q.Requeue([]queue.Entry{second, first})
	for {
		e, _, ok := q.Get()
		if !ok {
			break
		}
		got = append(got, string(e.Msg.Body))
	}
	want := "[1 2 3 4 5 6 7 8 9 10 11 12]"
	if fmt.Sprint(got) != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

// TestPagedBacklogTransient spills a non-durable queue's messages past a
// window of 2 to the store and checks that they come back in order and
// leave nothing behind in the store.
func TestPagedBacklogTransient(t *testing.T) {
	st := persist.NewMemory()
	defer st.Close()
	var ids uint64
	b := newPagedBacklog(st, transientQueueBase|1, 2, func(err error) { t.Error(err) })
	b.transient, b.nextMsgID = true, func() uint64 { ids++; return ids }
	q := queue.New(queue.Decl{Name: "tq"}, queue.Options{Backlog: b})
	for i := 1; i <= 10; i++ {
		q.Enqueue(&queue.Message{Body: []byte(fmt.Sprint(i))})
	}
	if b.diskN != 8 {
		t.Fatalf("%d entries spilled, want 8", b.diskN)
	}
	var got []string
	for {
		e, _, ok := q.Get()
		if !ok {
			break
		}
		if e.Msg.StoreID != 0 || e.Msg.Persistent {
			t.Fatalf("a loaded transient message looks stored: %+v", e.Msg)
		}
		got = append(got, string(e.Msg.Body))
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("order %v", got)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.QueueCounts(transientQueueBase | 1); err != nil || n != 0 {
		t.Fatalf("%d spilled entries left in the store (%v)", n, err)
	}
}
