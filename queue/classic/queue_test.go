package classic

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
)

// recorder is a Consumer that takes up to limit deliveries.
type recorder struct {
	got   []queue.Entry
	limit int
	noAck bool
}

func (r *recorder) Deliver(q queue.Queue, e queue.Entry, _ any) queue.Outcome {
	if r.limit >= 0 && len(r.got) >= r.limit {
		return queue.Refused
	}
	r.got = append(r.got, e)
	if r.noAck {
		return queue.Settled
	}
	return queue.Pending
}

func msg(body string) *queue.Message { return &queue.Message{Body: []byte(body)} }

func bodies(es []queue.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Msg.Body))
	}
	return out
}

func TestRequeueReturnsToOriginalPosition(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	for _, b := range []string{"1", "2", "3", "4", "5"} {
		q.Enqueue(msg(b))
	}
	var taken []queue.Entry
	for i := 0; i < 4; i++ {
		e, _, ok := q.Get(false)
		if !ok {
			t.Fatal("get: empty")
		}
		taken = append(taken, e)
	}
	// Requeue 4 then 2: they must come back as 2, 4, ahead of 5.
	q.Settle([]queue.Entry{taken[3]}, queue.Requeue)
	q.Settle([]queue.Entry{taken[1]}, queue.Requeue)
	q.Enqueue(msg("6"))
	var got []queue.Entry
	for {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		got = append(got, e)
	}
	want := []string{"2", "4", "5", "6"}
	if b := bodies(got); len(b) != len(want) || b[0] != "2" || b[1] != "4" || b[2] != "5" || b[3] != "6" {
		t.Fatalf("order = %v, want %v", b, want)
	}
	if !got[0].Redelivered || !got[1].Redelivered || got[2].Redelivered {
		t.Fatalf("redelivered flags = %v %v %v", got[0].Redelivered, got[1].Redelivered, got[2].Redelivered)
	}
	if st := q.Stats(); st.Unacked != 6 || st.Ready != 0 {
		t.Fatalf("stats = %+v, want 6 unacked, 0 ready", st)
	}
}

func TestRoundRobinAndCredit(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	a, b := &recorder{limit: 2}, &recorder{limit: -1}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Exclusive: false, Priority: 0}); err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: b, Exclusive: false, Priority: 0}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		q.Enqueue(msg("m"))
	}
	if len(a.got) != 2 || len(b.got) != 4 {
		t.Fatalf("a got %d, b got %d; want 2 and 4", len(a.got), len(b.got))
	}
	// a, b, a, b, b, b: a's credit ran out after two.
	if a.got[0].Seq != 1 || b.got[0].Seq != 2 || a.got[1].Seq != 3 {
		t.Fatalf("not round robin: a=%v b=%v", a.got, b.got)
	}
}

func TestHeldMessagesFlowOnKick(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	c := &recorder{limit: 0}
	q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Exclusive: false, Priority: 0})
	for i := 0; i < 3; i++ {
		q.Enqueue(msg("m"))
	}
	if st := q.Stats(); st.Ready != 3 {
		t.Fatalf("ready = %d, want 3", st.Ready)
	}
	c.limit = 2
	q.Kick(nil)
	if len(c.got) != 2 || q.Stats().Ready != 1 {
		t.Fatalf("after kick: delivered %d, ready %d", len(c.got), q.Stats().Ready)
	}
}

func TestNoAckDeliveriesAreNotUnacked(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	c := &recorder{limit: -1, noAck: true}
	q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Exclusive: false, Priority: 0})
	q.Kick(nil)
	q.Enqueue(msg("m"))
	if st := q.Stats(); st.Unacked != 0 || len(c.got) != 1 {
		t.Fatalf("stats %+v, delivered %d", st, len(c.got))
	}
}

func TestExclusiveConsumer(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: &recorder{}, Exclusive: true, Priority: 0}); err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: &recorder{}, Exclusive: false, Priority: 0}); err != queue.ErrExclusiveConsumer {
		t.Fatalf("second consumer: %v, want queue.ErrExclusiveConsumer", err)
	}
	q2 := New(queue.Decl{Name: "q2"}, Options{})
	q2.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: &recorder{}, Exclusive: false, Priority: 0})
	if err := q2.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: &recorder{}, Exclusive: true, Priority: 0}); err != queue.ErrHasConsumers {
		t.Fatalf("exclusive after shared: %v, want queue.ErrHasConsumers", err)
	}
}

func TestAutoDeleteAfterLastConsumer(t *testing.T) {
	q := New(queue.Decl{Name: "q", AutoDelete: true}, Options{})
	a, b := &recorder{}, &recorder{}
	q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Exclusive: false, Priority: 0})
	q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: b, Exclusive: false, Priority: 0})
	if q.RemoveConsumer("a", a) {
		t.Fatal("auto-delete with a consumer left")
	}
	if !q.RemoveConsumer("b", b) {
		t.Fatal("no auto-delete after the last consumer")
	}
}

func TestDeleteConditions(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	q.Enqueue(msg("m"))
	if _, _, err := q.Delete(false, true); err != queue.ErrNotEmpty {
		t.Fatalf("if-empty: %v", err)
	}
	c := &recorder{limit: 0}
	q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Exclusive: false, Priority: 0})
	if _, _, err := q.Delete(true, false); err != queue.ErrInUse {
		t.Fatalf("if-unused: %v", err)
	}
	n, cs, err := q.Delete(false, false)
	if err != nil || n != 1 || len(cs) != 1 || cs[0].Tag != "c" {
		t.Fatalf("delete = %d %v %v", n, cs, err)
	}
	if q.Enqueue(msg("late")) != Gone {
		t.Fatal("enqueue on a deleted queue succeeded")
	}
}

func BenchmarkEnqueueDeliver(b *testing.B) {
	q := New(queue.Decl{Name: "q"}, Options{})
	c := &discard{}
	q.AddConsumer(queue.ConsumeOptions{Tag: "c", Consumer: c, Exclusive: false, Priority: 0})
	m := msg("hello")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Enqueue(m)
	}
}

type discard struct{}

func (discard) Deliver(queue.Queue, queue.Entry, any) queue.Outcome { return queue.Settled }

func TestPriorityOrder(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, MaxPriority: 5}})
	for i, p := range []uint8{0, 3, 9, 3, 1} {
		q.Enqueue(&queue.Message{Body: []byte{byte('a' + i)}, Priority: p})
	}
	var got []byte
	var taken []queue.Entry
	for {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		got = append(got, e.Msg.Body[0])
		taken = append(taken, e)
	}
	// 9 counts as 5; equal priorities stay FIFO.
	if string(got) != "cbdea" {
		t.Fatalf("order %q, want cbdea", got)
	}
	q.Settle([]queue.Entry{taken[4], taken[2]}, queue.Requeue) // a (0), d (3)
	e, _, _ := q.Get(false)
	if e.Msg.Body[0] != 'd' || !e.Redelivered {
		t.Fatalf("after requeue got %q redelivered=%v, want d", e.Msg.Body, e.Redelivered)
	}
}

func TestMaxLengthDropHeadDeadLetters(t *testing.T) {
	var dead []queue.Dead
	q := New(queue.Decl{Name: "q"}, Options{
		Limits: queue.Limits{MaxLength: 2, MaxLengthBytes: -1, HasDLX: true},
		Hooks:  queue.Hooks{DeadLetter: func(_ queue.Queue, d []queue.Dead) { dead = append(dead, d...) }},
	})
	for _, b := range []string{"1", "2", "3", "4"} {
		q.Enqueue(msg(b))
	}
	if len(dead) != 2 || string(dead[0].Msg.Body) != "1" || dead[1].Reason != queue.MaxLen {
		t.Fatalf("dead = %+v", dead)
	}
	if q.Stats().Ready != 2 {
		t.Fatalf("ready = %d", q.Stats().Ready)
	}
}

func TestRejectPublish(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{Limits: queue.Limits{MaxLength: 1, MaxLengthBytes: -1, Overflow: queue.RejectPublish}})
	if r := q.Enqueue(msg("1")); r != Enqueued {
		t.Fatalf("first: %v", r)
	}
	if r := q.Enqueue(msg("2")); r != Dropped {
		t.Fatalf("second: %v, want Dropped", r)
	}
}

func TestHeadExpiryWithFakeClock(t *testing.T) {
	now := time.Unix(1000, 0)
	var dead []queue.Dead
	q := New(queue.Decl{Name: "q"}, Options{
		Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, HasMessageTTL: true, MessageTTL: time.Hour, HasDLX: true},
		Hooks:  queue.Hooks{DeadLetter: func(_ queue.Queue, d []queue.Dead) { dead = append(dead, d...) }},
		Now:    func() time.Time { return now },
	})
	q.Enqueue(msg("old"))
	now = now.Add(30 * time.Minute)
	q.Enqueue(msg("new"))
	now = now.Add(31 * time.Minute)
	if st := q.Stats(); st.Ready != 1 {
		t.Fatalf("ready = %d, want 1", st.Ready)
	}
	if len(dead) != 1 || string(dead[0].Msg.Body) != "old" || dead[0].Reason != queue.Expired {
		t.Fatalf("dead = %+v", dead)
	}
}

func TestLateReservedSeqKeepsOrder(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	q.Enqueue(msg("1"))
	s2 := q.ReserveSeq()
	s3 := q.ReserveSeq()
	q.EnqueueFor(msg("3"), s3, nil)
	q.EnqueueFor(msg("2"), s2, nil)
	q.Enqueue(msg("4"))
	var got []string
	for {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		got = append(got, string(e.Msg.Body))
	}
	if len(got) != 4 || got[0] != "1" || got[1] != "2" || got[2] != "3" || got[3] != "4" {
		t.Fatalf("order %v, want 1 2 3 4", got)
	}
}

func TestConsumerPriorities(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{})
	low, high1, high2 := &recorder{limit: -1}, &recorder{limit: 1}, &recorder{limit: 1}
	q.AddConsumer(queue.ConsumeOptions{Tag: "low", Consumer: low, Exclusive: false, Priority: 0})
	q.AddConsumer(queue.ConsumeOptions{Tag: "high1", Consumer: high1, Exclusive: false, Priority: 5})
	q.AddConsumer(queue.ConsumeOptions{Tag: "high2", Consumer: high2, Exclusive: false, Priority: 5})
	for i := 0; i < 4; i++ {
		q.Enqueue(msg("m"))
	}
	// The two high-priority consumers take one each (round robin); the
	// low-priority one gets the rest only because they have no credit.
	if len(high1.got) != 1 || len(high2.got) != 1 || len(low.got) != 2 {
		t.Fatalf("high1 %d, high2 %d, low %d", len(high1.got), len(high2.got), len(low.got))
	}
	if high1.got[0].Seq != 1 || high2.got[0].Seq != 2 {
		t.Fatalf("high consumers got seqs %d and %d", high1.got[0].Seq, high2.got[0].Seq)
	}
}

func TestSingleActiveConsumer(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, SingleActive: true}})
	a, b := &recorder{limit: -1}, &recorder{limit: -1}
	q.AddConsumer(queue.ConsumeOptions{Tag: "a", Consumer: a, Exclusive: false, Priority: 0})
	q.AddConsumer(queue.ConsumeOptions{Tag: "b", Consumer: b, Exclusive: false, Priority: 9}) // priority does not make b active
	for i := 0; i < 3; i++ {
		q.Enqueue(msg("m"))
	}
	if len(a.got) != 3 || len(b.got) != 0 {
		t.Fatalf("a %d, b %d; want all to the first consumer", len(a.got), len(b.got))
	}
	q.RemoveConsumer("a", a)
	q.Enqueue(msg("m"))
	if len(b.got) != 1 {
		t.Fatalf("b got %d after a left, want 1", len(b.got))
	}
}

// BenchmarkExpireVsDrain compares expiring a backlog of a million messages
// by TTL with draining it by basic.get: expiry must cost no more than
// consumption.
func BenchmarkExpireVsDrain(b *testing.B) {
	const n = 1_000_000
	fill := func(now *time.Time) *Queue {
		q := New(queue.Decl{Name: "q"}, Options{
			Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, HasMessageTTL: true, MessageTTL: time.Second},
			Now:    func() time.Time { return *now },
		})
		m := msg("x")
		for i := 0; i < n; i++ {
			q.Enqueue(m)
		}
		return q
	}
	b.Run("expire", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			now := time.Unix(0, 0)
			q := fill(&now)
			now = now.Add(2 * time.Second)
			b.StartTimer()
			if st := q.Stats(); st.Ready != 0 {
				b.Fatalf("%d left", st.Ready)
			}
			q.Delete(false, false)
		}
	})
	b.Run("drain", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			now := time.Unix(0, 0)
			q := fill(&now)
			b.StartTimer()
			for {
				if _, _, ok := q.Get(true); !ok {
					break
				}
			}
			q.Delete(false, false)
		}
	})
}

// TestBacklogRemove: Remove takes out exactly the entry asked for, from
// the ring (also when it wraps) or from the requeued entries, and keeps
// the order and the byte count of the rest.
func TestBacklogRemove(t *testing.T) {
	for _, b := range []Backlog{NewMemBacklog(), NewPriorityBacklog(3)} {
		msgs := map[uint64]*queue.Message{}
		push := func(seq uint64) {
			m := &queue.Message{Body: make([]byte, seq), Priority: uint8(seq % 2)}
			msgs[seq] = m
			b.Push(queue.Entry{Seq: seq, Msg: m})
		}
		for seq := uint64(1); seq <= 12; seq++ {
			push(seq)
		}
		for range 10 { // move the ring's head so that it wraps
			e, _ := b.Pop()
			delete(msgs, e.Seq)
		}
		for seq := uint64(13); seq <= 30; seq++ {
			push(seq)
		}
		first, _ := b.Pop()
		b.Requeue(first)
		if b.Remove(queue.Entry{Seq: 20, Msg: &queue.Message{}}) {
			t.Fatal("removed an entry with the right seq but another message")
		}
		for _, seq := range []uint64{first.Seq, 20, 30, 14} {
			if !b.Remove(queue.Entry{Seq: seq, Msg: msgs[seq]}) {
				t.Fatalf("%T: entry %d not found", b, seq)
			}
			delete(msgs, seq)
		}
		if b.Remove(queue.Entry{Seq: 20, Msg: &queue.Message{}}) {
			t.Fatal("removed entry 20 twice")
		}
		var want int64
		for _, m := range msgs {
			want += m.Size()
		}
		if b.Len() != len(msgs) || b.Bytes() != want {
			t.Fatalf("%T: len %d bytes %d, want %d and %d", b, b.Len(), b.Bytes(), len(msgs), want)
		}
		for b.Len() > 0 {
			e, _ := b.Pop()
			if msgs[e.Seq] != e.Msg {
				t.Fatalf("%T: popped %d, not one of the remaining entries", b, e.Seq)
			}
			delete(msgs, e.Seq)
		}
	}
}

func TestGetDropsExpiredNewHeadBeforeCounting(t *testing.T) {
	now := time.Unix(1000, 0)
	var dead []queue.Dead
	q := New(queue.Decl{Name: "q"}, Options{
		Now:    func() time.Time { return now },
		Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, HasDLX: true},
		Hooks:  queue.Hooks{DeadLetter: func(_ queue.Queue, d []queue.Dead) { dead = append(dead, d...) }},
	})
	q.Enqueue(msg("live"))
	q.Enqueue(&queue.Message{Body: []byte("dies"), TTL: time.Millisecond, HasTTL: true})
	q.Enqueue(msg("tail"))
	now = now.Add(time.Second)
	e, n, ok := q.Get(false)
	if !ok || string(e.Msg.Body) != "live" || n != 1 {
		t.Fatalf("get %q, %d left, ok %v; want live with 1 left", e.Msg.Body, n, ok)
	}
	if len(dead) != 1 || string(dead[0].Msg.Body) != "dies" || dead[0].Reason != queue.Expired {
		t.Fatalf("dead-lettered %+v, want dies (expired)", dead)
	}
}

func TestRequeueDropsHeadOverMaxLength(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{Limits: queue.Limits{MaxLength: 2, MaxLengthBytes: -1}})
	q.Enqueue(msg("1"))
	q.Enqueue(msg("2"))
	e1, _, _ := q.Get(false)
	e2, _, _ := q.Get(false)
	q.Enqueue(msg("3"))
	q.Enqueue(msg("4"))
	if st := q.Stats(); st.Ready != 2 || st.Unacked != 2 {
		t.Fatalf("stats %+v: unacked messages took room", st)
	}
	q.Settle([]queue.Entry{e1, e2}, queue.Requeue)
	var got []string
	for {
		e, _, ok := q.Get(false)
		if !ok {
			break
		}
		got = append(got, string(e.Msg.Body))
	}
	if len(got) != 2 || got[0] != "3" || got[1] != "4" {
		t.Fatalf("after requeue %v, want [3 4] (the requeued head dropped)", got)
	}
}

func TestSingleActiveRefusesExclusiveConsumer(t *testing.T) {
	q := New(queue.Decl{Name: "q"}, Options{Limits: queue.Limits{MaxLength: -1, MaxLengthBytes: -1, SingleActive: true}})
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "x", Consumer: &recorder{limit: -1}, Exclusive: true, Priority: 0}); err != queue.ErrExclusiveConsumer {
		t.Fatalf("exclusive consumer of a single-active-consumer queue: %v, want queue.ErrExclusiveConsumer", err)
	}
}

// TestStopEndsTimers: after Stop no expiry timer is armed, and none is
// armed again by a later enqueue or policy change.
func TestStopEndsTimers(t *testing.T) {
	l, _ := queue.ParseArgs(map[string]any{"x-message-ttl": int32(60000), "x-expires": int32(60000)})
	q := New(queue.Decl{Name: "q"}, Options{Limits: l})
	q.Enqueue(msg("a"))
	if q.ttlAt == 0 || q.expTimer == nil {
		t.Fatal("no timers armed before Stop")
	}
	q.Stop()
	if q.ttlTimer.Stop() || q.expTimer.Stop() || q.ttlAt != 0 {
		t.Fatal("a timer was still armed after Stop")
	}
	q.Enqueue(msg("b"))
	q.SetLimits(l)
	if q.ttlTimer.Stop() || q.expTimer.Stop() || q.ttlAt != 0 {
		t.Fatal("a timer was armed again after Stop")
	}
}
