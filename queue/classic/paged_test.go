package classic

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/amqp"
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
	q := New(queue.Decl{Name: "q", Durable: true, ID: rec.ID}, Options{Backlog: b})
	var msgID uint64
	push := func(seq uint64, stored bool) {
		m := &queue.Message{Body: []byte(fmt.Sprint(seq)), Persistent: stored}
		if stored {
			msgID++
			m.StoreID = msgID
			st.Publish(msgID, persist.MessageRecord{Body: m.Body}, []persist.QueueSeq{{QueueID: rec.ID, Seq: seq, MsgID: msgID}}, nil)
		}
		q.EnqueueFor(m, seq, nil)
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
	if b.stored.n == 0 {
		t.Fatal("nothing was paged out with a window of 2")
	}
	var got []string
	first, _, _ := q.Get(false)
	second, _, _ := q.Get(false)
	q.Settle([]queue.Entry{second, first}, queue.Requeue)
	for {
		e, _, ok := q.Get(false)
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
// window of 2 to its spill log, over several segments, and checks that
// they come back in order with their properties, that the segments read
// are deleted, that nothing goes to the store, and that a purge removes
// the log.
func TestPagedBacklogTransient(t *testing.T) {
	st := persist.NewMemory()
	defer st.Close()
	dir := filepath.Join(t.TempDir(), "q1")
	b := newPagedBacklog(st, 0, 2, func(err error) { t.Error(err) })
	b.spill = newSpillLog(dir)
	b.spill.segMax = 64 // a few records per segment
	q := New(queue.Decl{Name: "tq"}, Options{Backlog: b})
	props, _ := (&amqp.Properties{DeliveryMode: 2, Headers: amqp.Table{"h": "v"}}).Append(nil)
	for i := 1; i <= 10; i++ {
		q.Enqueue(&queue.Message{Exchange: "x", RoutingKey: fmt.Sprint("k", i), Props: props, Body: []byte(fmt.Sprint(i)), Persistent: true})
	}
	if b.spilled.n != 8 {
		t.Fatalf("%d entries spilled, want 8", b.spilled.n)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.spill"))
	if len(segs) < 2 {
		t.Fatalf("%d spill segments, want several", len(segs))
	}
	var got []string
	for i := 1; ; i++ {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		m := e.Msg
		if m.StoreID != 0 || !m.Persistent || m.Exchange != "x" || m.RoutingKey != fmt.Sprint("k", i) || !bytes.Equal(m.Props, props) {
			t.Fatalf("message %d came back as %+v", i, m)
		}
		got = append(got, string(m.Body))
		if i == 6 {
			// Enqueue while the log is being read: the order holds.
			q.Enqueue(&queue.Message{Exchange: "x", RoutingKey: "k11", Props: props, Body: []byte("11"), Persistent: true})
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10 11]" {
		t.Fatalf("order %v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.spill")); len(left) > 1 {
		t.Fatalf("read segments were not deleted: %v", left)
	}
	if s := st.Stats(); s.Messages != 0 {
		t.Fatalf("%d messages went to the store", s.Messages)
	}
	for i := 1; i <= 10; i++ {
		q.Enqueue(&queue.Message{Body: []byte(fmt.Sprint(i))})
	}
	if n := q.Purge(); n != 10 {
		t.Fatalf("purged %d, want 10", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the spill log survived a purge: %v", err)
	}
}

// TestPagedBacklogDurableTransient: a durable queue's transient messages
// (not in the store) spill past the window like a non-durable queue's, so
// memory stays bounded; mixed with stored messages, everything comes out
// once and in Seq order.
func TestPagedBacklogDurableTransient(t *testing.T) {
	st := persist.NewMemory()
	defer st.Close()
	rec := &persist.QueueRecord{VHost: "/", Name: "dq", Durable: true}
	if err := st.SaveQueue(rec); err != nil {
		t.Fatal(err)
	}
	const window = 4
	b := newPagedBacklog(st, rec.ID, window, func(err error) { t.Error(err) })
	b.spill = newSpillLog(filepath.Join(t.TempDir(), "dq"))
	b.spill.segMax = 256
	q := New(queue.Decl{Name: "dq", Durable: true, ID: rec.ID}, Options{Backlog: b})
	var msgID uint64
	push := func(i int) {
		seq := q.ReserveSeq()
		m := &queue.Message{Body: []byte(fmt.Sprint(i))}
		if i%3 == 0 { // every third message persistent, the rest transient
			msgID++
			m.StoreID, m.Persistent = msgID, true
			st.Publish(msgID, persist.MessageRecord{Body: m.Body}, []persist.QueueSeq{{QueueID: rec.ID, Seq: seq, MsgID: msgID}}, nil)
		}
		q.EnqueueFor(m, seq, nil)
	}
	const n = 200
	for i := 1; i <= n; i++ {
		push(i)
		if l := b.mem.Len(); l > window {
			t.Fatalf("%d entries in memory after %d pushes, window %d", l, i, window)
		}
	}
	if b.spilled.n == 0 || b.stored.n == 0 {
		t.Fatalf("spilled %d, left in the store %d: want both", b.spilled.n, b.stored.n)
	}
	var got []int
	for i := 1; ; i++ {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		var v int
		fmt.Sscan(string(e.Msg.Body), &v)
		got = append(got, v)
		if l := b.mem.Len(); l > 2*window {
			t.Fatalf("%d entries in memory while draining, window %d", l, window)
		}
		if i == n/2 {
			push(n + 1) // enqueue while both segments are being read
		}
	}
	if len(got) != n+1 {
		t.Fatalf("got %d messages, want %d", len(got), n+1)
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("message %d is %d: order %v", i+1, v, got)
		}
	}
}
