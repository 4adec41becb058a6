package stream_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/stream"
	"github.com/warrenmq/warren/queue/stream/group"
)

// withHeaders returns message properties carrying headers h.
func withHeaders(t *testing.T, h amqp.Table) []byte {
	t.Helper()
	p := amqp.Properties{Headers: h}
	b, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publishMsg publishes body with props to q and waits for its confirm.
func publishMsg(t *testing.T, q queue.Queue, body string, props []byte) {
	t.Helper()
	if props == nil {
		props = withHeaders(t, nil)
	}
	done := make(chan error, 1)
	q.Type().Publish(&queue.Message{Body: []byte(body), Props: props}, []queue.Queue{q}, nil, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	q.(*stream.Queue).Quiesce()
}

func newStream(t *testing.T, dir string, args map[string]any) (*stream.Type, queue.Decl, queue.Queue) {
	t.Helper()
	typ := stream.NewType(stream.Config{Dir: dir})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1, Args: args}
	l, _ := queue.ParseArgs(nil)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return typ, d, q
}

func recoverStream(t *testing.T, dir string, d queue.Decl, hooks queue.Hooks) queue.Queue {
	t.Helper()
	l, _ := queue.ParseArgs(nil)
	q, _, err := stream.NewType(stream.Config{Dir: dir}).Recover(d, l, hooks)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// headerOf decodes the delivery header key of e from q.
func headerOf(t *testing.T, q queue.Queue, e queue.Entry, key string) any {
	t.Helper()
	p, err := amqp.DecodeProperties(q.DeliveryProps(e))
	if err != nil {
		t.Fatal(err)
	}
	return p.Headers[key]
}

func consume(t *testing.T, q queue.Queue, tag string, c queue.Consumer, prefetch int, args map[string]any) {
	t.Helper()
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: tag, Consumer: c, Prefetch: uint16(prefetch), Args: args}); err != nil {
		t.Fatalf("consume %s: %v", tag, err)
	}
	q.Kick(nil)
}

// A partitioned stream routes by explicit partition, by key (MurmurHash3
// as RabbitMQ's stream clients), by routing key when asked, else round
// robin; offsets are dense per partition; a plain consumer reads every
// partition and one with x-stream-partition reads one; the partitions
// survive a restart.
func TestPartitionedStreamRouting(t *testing.T) {
	dir := t.TempDir()
	_, d, q := newStream(t, dir, map[string]any{"x-stream-partitions": int64(3)})
	if q.(*stream.Queue).Partitions() != 3 {
		t.Fatal("not 3 partitions")
	}
	for i := range 6 {
		publishMsg(t, q, "rr"+strconv.Itoa(i), nil)
	}
	publishMsg(t, q, "p2", withHeaders(t, amqp.Table{"x-stream-partition": int32(2)}))
	key := "order-17"
	want := group.KeyPartition(key, 3)
	publishMsg(t, q, "k", withHeaders(t, amqp.Table{"x-stream-partition-key": key}))
	pc := q.(queue.PublishChecker)
	for _, h := range []amqp.Table{{"x-stream-partition": int32(3)}, {"x-stream-partition": "1"}, {"x-stream-partition-key": 1.5}} {
		var pe *group.PartitionError
		if err := pc.CheckPublish(&queue.Message{Props: withHeaders(t, h)}); !errors.As(err, &pe) {
			t.Fatalf("CheckPublish(%v) = %v", h, err)
		}
	}
	if err := pc.CheckPublish(&queue.Message{Props: withHeaders(t, amqp.Table{"x-stream-partition": int64(1)})}); err != nil {
		t.Fatal(err)
	}

	all := queuetest.NewRecorder(-1, false)
	consume(t, q, "all", all, 100, map[string]any{"x-stream-offset": "first"})
	got := all.Take()
	if len(got) != 8 {
		t.Fatalf("plain consumer got %d of 8", len(got))
	}
	byPart := map[int64][]string{}
	offs := map[int64][]int64{}
	for _, e := range got {
		p := headerOf(t, q, e, "x-stream-partition").(int64)
		byPart[p] = append(byPart[p], string(e.Msg.Body))
		offs[p] = append(offs[p], headerOf(t, q, e, "x-stream-offset").(int64))
	}
	if fmt.Sprint(byPart[0][:2], byPart[1][:2], byPart[2][:2]) != "[rr0 rr3] [rr1 rr4] [rr2 rr5]" {
		t.Fatalf("round robin: %v", byPart)
	}
	if !slices.Contains(byPart[2], "p2") || !slices.Contains(byPart[int64(want)], "k") {
		t.Fatalf("explicit or keyed message misrouted: %v (key to %d)", byPart, want)
	}
	for p, o := range offs {
		for i, x := range o {
			if x != int64(i) {
				t.Fatalf("partition %d offsets %v are not dense from 0", p, o)
			}
		}
	}
	// Interleaved: the first three deliveries come from three partitions.
	first3 := map[string]bool{}
	for _, e := range got[:3] {
		first3[fmt.Sprint(headerOf(t, q, e, "x-stream-partition"))] = true
	}
	if len(first3) != 3 {
		t.Fatalf("partitions not interleaved: %v", queuetest.Bodies(got))
	}

	one := queuetest.NewRecorder(-1, false)
	consume(t, q, "one", one, 100, map[string]any{"x-stream-offset": int64(1), "x-stream-partition": int64(1)})
	if b := queuetest.Bodies(one.Take()); fmt.Sprint(b[:1]) != "[rr4]" {
		t.Fatalf("partition 1 from offset 1: %v", b)
	}
	var ae *queue.ArgError
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "x", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, Args: map[string]any{"x-stream-offset": int64(1)}}); !errors.As(err, &ae) {
		t.Fatalf("numeric offset without a partition: %v", err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "x", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, Args: map[string]any{"x-stream-partition": int64(3)}}); !errors.As(err, &ae) {
		t.Fatalf("partition out of range: %v", err)
	}
	q.(queue.Stopper).Stop()

	q2 := recoverStream(t, dir, d, queue.Hooks{})
	if st := q2.Stats(); st.Ready != 8 {
		t.Fatalf("after recovery %d messages", st.Ready)
	}
	publishMsg(t, q2, "after", withHeaders(t, amqp.Table{"x-stream-partition": int32(0)}))
	c := queuetest.NewRecorder(-1, false)
	consume(t, q2, "c", c, 100, map[string]any{"x-stream-partition": int64(0), "x-stream-offset": "first"})
	b := c.Take()
	if last := b[len(b)-1]; string(last.Msg.Body) != "after" || last.Seq != uint64(len(b)-1) {
		t.Fatalf("partition 0 after recovery: %v", queuetest.Bodies(b))
	}
	q2.Delete(false, false)
}

// A consumer with x-stream-filter receives only the messages tagged with
// one of its values, plus the untagged ones with x-stream-match-unfiltered.
func TestStreamFilter(t *testing.T) {
	_, _, q := newStream(t, t.TempDir(), nil)
	for i, v := range []any{"red", "blue", nil, "green", "red"} {
		var props []byte
		if v != nil {
			props = withHeaders(t, amqp.Table{"x-stream-filter-value": v})
		}
		publishMsg(t, q, strconv.Itoa(i), props)
	}
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"x-stream-filter": "red"}, "[0 4]"},
		{map[string]any{"x-stream-filter": []any{"blue", "green"}}, "[1 3]"},
		{map[string]any{"x-stream-filter": "red", "x-stream-match-unfiltered": true}, "[0 2 4]"},
		{map[string]any{}, "[0 1 2 3 4]"},
	}
	for i, c := range cases {
		c.args["x-stream-offset"] = "first"
		r := queuetest.NewRecorder(-1, false)
		consume(t, q, "f"+strconv.Itoa(i), r, 100, c.args)
		if got := fmt.Sprint(queuetest.Bodies(r.Take())); got != c.want {
			t.Errorf("filter %v: got %s, want %s", c.args, got, c.want)
		}
	}
	var ae *queue.ArgError
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "bad", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1, Args: map[string]any{"x-stream-filter": int32(3)}}); !errors.As(err, &ae) {
		t.Fatalf("a numeric filter: %v", err)
	}
	q.Delete(false, false)
}

// groupOf returns the partitions each member of group name owns, by tag.
func groupOf(t *testing.T, q queue.Queue, name string) (stream.GroupInfo, map[string][]int) {
	t.Helper()
	for _, g := range q.(*stream.Queue).Info().Groups {
		if g.Name == name {
			owned := map[string][]int{}
			for _, m := range g.Members {
				owned[m.Tag] = m.Partitions
			}
			return g, owned
		}
	}
	t.Fatalf("no group %s", name)
	return stream.GroupInfo{}, nil
}

// Two groups read the same stream independently; within a group the
// members split the partitions (balanced, at most one owner each), every
// message goes to exactly one member, acks commit offsets, and a member
// leaving hands its partitions and its unacked deliveries (redelivered)
// to the other.
func TestGroupsSplitPartitions(t *testing.T) {
	_, _, q := newStream(t, t.TempDir(), map[string]any{"x-stream-partitions": int64(4)})
	a, b, solo := queuetest.NewRecorder(-1, false), queuetest.NewRecorder(-1, false), queuetest.NewRecorder(-1, false)
	g := map[string]any{"x-stream-group": "g", "x-stream-offset": "first"}
	// a's partitions move at once when it goes, in-flight deliveries or
	// not.
	consume(t, q, "a", a, 1000, map[string]any{"x-stream-group": "g", "x-stream-offset": "first", "x-stream-rebalance-timeout": int32(0)})
	consume(t, q, "b", b, 1000, g)
	consume(t, q, "solo", solo, 1000, map[string]any{"x-stream-group": "other", "x-stream-offset": "first"})
	_, owned := groupOf(t, q, "g")
	if len(owned["a"]) != 2 || len(owned["b"]) != 2 {
		t.Fatalf("unbalanced: %v", owned)
	}
	for i := range 40 {
		publishMsg(t, q, strconv.Itoa(i), withHeaders(t, amqp.Table{"x-stream-partition-key": "k" + strconv.Itoa(i)}))
	}
	ga, gb, gs := a.Take(), b.Take(), solo.Take()
	if len(ga)+len(gb) != 40 || len(gs) != 40 {
		t.Fatalf("group g got %d+%d, other %d, of 40", len(ga), len(gb), len(gs))
	}
	seen := map[string]bool{}
	for _, e := range append(slices.Clone(ga), gb...) {
		if seen[string(e.Msg.Body)] {
			t.Fatalf("%s delivered twice in one group", e.Msg.Body)
		}
		seen[string(e.Msg.Body)] = true
	}
	for _, e := range ga {
		if p := int(headerOf(t, q, e, "x-stream-partition").(int64)); !slices.Contains(owned["a"], p) {
			t.Fatalf("a got partition %d, owns %v", p, owned["a"])
		}
	}
	// a acks all but its first two deliveries; then it leaves.
	q.Settle(ga[2:], queue.Ack)
	q.Settle(gb, queue.Ack)
	if q.(queue.NackRefuser).RefusesNack(ga[0]) {
		t.Fatal("a group member's delivery refuses nack")
	}
	q.RemoveConsumer("a", a)
	_, owned = groupOf(t, q, "g")
	if len(owned["b"]) != 4 {
		t.Fatalf("after a left, b owns %v", owned["b"])
	}
	re := b.Take()
	if len(re) != 2 || !re[0].Redelivered || !re[1].Redelivered {
		t.Fatalf("a's unacked deliveries not redelivered to b: %v", queuetest.Bodies(re))
	}
	if got, want := fmt.Sprint(queuetest.Bodies(re)), fmt.Sprint(queuetest.Bodies(ga[:2])); got != want {
		t.Fatalf("redelivered %s, want %s", got, want)
	}
	// a's late ack is fenced: it settles nothing of the group's.
	q.Settle(ga[:2], queue.Ack)
	// The committed offset of each partition is held at the lowest
	// redelivery in it.
	held := map[int]uint64{}
	for _, e := range re {
		p := int(headerOf(t, q, e, "x-stream-partition").(int64))
		if o, ok := held[p]; !ok || e.Seq < o {
			held[p] = e.Seq
		}
	}
	info, _ := groupOf(t, q, "g")
	for _, p := range info.Partitions {
		want := q.(*stream.Queue).Info().Partitions[p.Partition].Next
		if o, ok := held[p.Partition]; ok {
			want = o
		}
		if p.Committed != want {
			t.Fatalf("partition %d committed %d after a's fenced acks, want %d", p.Partition, p.Committed, want)
		}
	}
	q.Settle(re, queue.Ack)
	info, _ = groupOf(t, q, "g")
	for _, p := range info.Partitions {
		if p.Lag != 0 || !p.HasCommit {
			t.Fatalf("partition %+v not fully committed", p)
		}
	}
	q.Delete(false, false)
}

// Committed offsets survive a restart, out-of-order acks included: the
// group resumes at its committed offset and passes over what it acked
// above it; x-stream-offset applies only to partitions never committed.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	_, d, q := newStream(t, dir, nil)
	for i := range 10 {
		publishMsg(t, q, strconv.Itoa(i), nil)
	}
	r := queuetest.NewRecorder(-1, false)
	consume(t, q, "w", r, 100, map[string]any{"x-stream-group": "g", "x-stream-offset": "first"})
	got := r.Take()
	if len(got) != 10 {
		t.Fatalf("got %d", len(got))
	}
	// Ack 0-2, 5 and 7: committed is 3; 5 and 7 are processed above it.
	q.Settle(got[0:3], queue.Ack)
	q.Settle([]queue.Entry{got[5], got[7]}, queue.Ack)
	q.(queue.Stopper).Stop()

	q2 := recoverStream(t, dir, d, queue.Hooks{})
	info, _ := groupOf(t, q2, "g")
	if p := info.Partitions[0]; p.Committed != 3 || !p.HasCommit || p.Lag != 7 {
		t.Fatalf("after restart %+v", p)
	}
	r2 := queuetest.NewRecorder(-1, false)
	// "last" does not apply: the group committed.
	consume(t, q2, "w2", r2, 100, map[string]any{"x-stream-group": "g", "x-stream-offset": "last"})
	if b := fmt.Sprint(queuetest.Bodies(r2.Take())); b != "[3 4 6 8 9]" {
		t.Fatalf("resumed with %s, want [3 4 6 8 9]", b)
	}
	q2.(queue.Stopper).Stop()
	// Restarted again without acks: the processed offsets are still
	// passed over.
	q3 := recoverStream(t, dir, d, queue.Hooks{})
	r3 := queuetest.NewRecorder(-1, false)
	consume(t, q3, "w3", r3, 100, map[string]any{"x-stream-group": "g"})
	if b := fmt.Sprint(queuetest.Bodies(r3.Take())); b != "[3 4 6 8 9]" {
		t.Fatalf("second restart resumed with %s", b)
	}
	q3.Delete(false, false)
}

// A member joining while the owner has deliveries in flight waits for
// them (revoke), then takes the partition without duplicates; with
// x-stream-cancel-on-rebalance the owner losing a partition is cancelled
// and takes its place back by consuming again.
func TestGroupRebalanceWaitsForInFlight(t *testing.T) {
	var cancelled []string
	typ := stream.NewType(stream.Config{Dir: t.TempDir()})
	l, _ := queue.ParseArgs(nil)
	q, err := typ.New(queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1, Args: map[string]any{"x-stream-partitions": int64(2)}}, l,
		queue.Hooks{Cancel: func(_ queue.Queue, c queue.ConsumerRef) { cancelled = append(cancelled, c.Tag) }})
	if err != nil {
		t.Fatal(err)
	}
	a := queuetest.NewRecorder(-1, false)
	consume(t, q, "a", a, 100, map[string]any{"x-stream-group": "g", "x-stream-offset": "first", "x-stream-cancel-on-rebalance": true})
	for i := range 4 {
		publishMsg(t, q, strconv.Itoa(i), nil)
	}
	ga := a.Take()
	if len(ga) != 4 {
		t.Fatalf("a got %d", len(ga))
	}
	b := queuetest.NewRecorder(-1, false)
	consume(t, q, "b", b, 100, map[string]any{"x-stream-group": "g"})
	if len(cancelled) != 1 || cancelled[0] != "a" {
		t.Fatalf("cancelled %v, want [a]", cancelled)
	}
	_, owned := groupOf(t, q, "g")
	if len(owned["a"]) != 2 || len(owned["b"]) != 0 {
		t.Fatalf("before a settles: %v", owned)
	}
	publishMsg(t, q, "4", nil)
	publishMsg(t, q, "5", nil)
	if a.Len() != 0 || b.Len() != 0 {
		t.Fatalf("deliveries during the revoke: a %d b %d", a.Len(), b.Len())
	}
	// a (cancelled) still acks; once its revoked partition has nothing in
	// flight it moves to b, which continues after a's acks.
	q.Settle(ga, queue.Ack)
	_, owned = groupOf(t, q, "g")
	if len(owned["a"]) != 1 || len(owned["b"]) != 1 {
		t.Fatalf("after a settled: %v", owned)
	}
	gb := b.Take()
	if len(gb) != 1 || gb[0].Redelivered {
		t.Fatalf("b got %v", queuetest.Bodies(gb))
	}
	// a consumes again with its tag and gets its remaining partition's
	// message.
	a2 := queuetest.NewRecorder(-1, false)
	consume(t, q, "a", a2, 100, map[string]any{"x-stream-group": "g", "x-stream-cancel-on-rebalance": true})
	got := append(queuetest.Bodies(a2.Take()), queuetest.Bodies(gb)...)
	sort.Strings(got)
	if fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("after the rebalance the group got %v, want [4 5]", got)
	}
	q.Delete(false, false)
}

// ResetGroup and DeleteGroup act only on a group without members; a reset
// moves every partition's committed offset durably.
func TestGroupResetAndDelete(t *testing.T) {
	dir := t.TempDir()
	_, d, q := newStream(t, dir, map[string]any{"x-stream-partitions": int64(2)})
	sq := q.(*stream.Queue)
	for i := range 6 {
		publishMsg(t, q, strconv.Itoa(i), nil)
	}
	if err := sq.ResetGroup("nope", group.OffsetSpec{Kind: group.OffsetFirst}); !errors.Is(err, stream.ErrNoGroup) {
		t.Fatal(err)
	}
	r := queuetest.NewRecorder(-1, false)
	consume(t, q, "m", r, 100, map[string]any{"x-stream-group": "g", "x-stream-offset": "first"})
	if err := sq.ResetGroup("g", group.OffsetSpec{Kind: group.OffsetFirst}); !errors.Is(err, stream.ErrGroupActive) {
		t.Fatal(err)
	}
	if err := sq.DeleteGroup("g"); !errors.Is(err, stream.ErrGroupActive) {
		t.Fatal(err)
	}
	q.Settle(r.Take(), queue.Ack)
	q.RemoveConsumer("m", r)
	info, _ := groupOf(t, q, "g")
	for _, p := range info.Partitions {
		if p.Lag != 0 {
			t.Fatalf("%+v", p)
		}
	}
	if err := sq.ResetGroup("g", group.OffsetSpec{Kind: group.OffsetAbsolute, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	q.(queue.Stopper).Stop()
	q2 := recoverStream(t, dir, d, queue.Hooks{})
	info, _ = groupOf(t, q2, "g")
	for _, p := range info.Partitions {
		if p.Committed != 1 || p.Lag != 2 {
			t.Fatalf("after reset and restart: %+v", p)
		}
	}
	if err := q2.(*stream.Queue).DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	q2.(queue.Stopper).Stop()
	q3 := recoverStream(t, dir, d, queue.Hooks{})
	if g := q3.(*stream.Queue).Info().Groups; len(g) != 0 {
		t.Fatalf("deleted group back after restart: %+v", g)
	}
	q3.Delete(false, false)
}

// A transaction's acks are committed offsets when its commit completes.
func TestGroupTxCommitIsDurable(t *testing.T) {
	dir := t.TempDir()
	typ, d, q := newStream(t, dir, nil)
	for i := range 5 {
		publishMsg(t, q, strconv.Itoa(i), nil)
	}
	r := queuetest.NewRecorder(-1, false)
	consume(t, q, "w", r, 100, map[string]any{"x-stream-group": "g", "x-stream-offset": "first"})
	got := r.Take()
	done := make(chan error, 1)
	typ.Commit(nil, []queue.TxSettle{{Queue: q, Entries: got[:3], Op: queue.Ack}}, nil, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Not stopped: a copy of its files is what a kill -9 right after the
	// commit-ok leaves.
	q2 := recoverStreamCopy(t, dir, d)
	info, _ := groupOf(t, q2, "g")
	if p := info.Partitions[0]; p.Committed != 3 {
		t.Fatalf("committed %d after tx.commit, want 3", p.Committed)
	}
	q2.(queue.Stopper).Stop()
	q.Delete(false, false)
}

// recoverStreamCopy recovers stream d from a copy of the files under dir
// as they are now.
func recoverStreamCopy(t *testing.T, dir string, d queue.Decl) queue.Queue {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return recoverStream(t, cp, d, queue.Hooks{})
}

// LavinMQ's x-stream-automatic-offset-tracking is a one-member group
// named by the consumer tag: the consumer resumes after what it acked.
func TestAutomaticOffsetTracking(t *testing.T) {
	_, _, q := newStream(t, t.TempDir(), nil)
	for i := range 5 {
		publishMsg(t, q, strconv.Itoa(i), nil)
	}
	args := map[string]any{"x-stream-automatic-offset-tracking": true, "x-stream-offset": "first"}
	r := queuetest.NewRecorder(-1, false)
	consume(t, q, "reader-1", r, 10, args)
	got := r.Take()
	q.Settle(got[:3], queue.Ack)
	// Its channel closes: the broker requeues, then removes the consumer.
	r.Stop()
	q.Settle(got[3:], queue.Requeue)
	q.RemoveConsumer("reader-1", r)
	info, _ := groupOf(t, q, "reader-1")
	if !info.AutoTracking || info.Partitions[0].Committed != 3 {
		t.Fatalf("tracking group %+v", info)
	}
	r2 := queuetest.NewRecorder(-1, false)
	consume(t, q, "reader-1", r2, 10, args)
	if b := fmt.Sprint(queuetest.Bodies(r2.Take())); b != "[3 4]" {
		t.Fatalf("resumed with %s", b)
	}
	var ae *queue.ArgError
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "x", Consumer: queuetest.NewRecorder(-1, false), Prefetch: 1,
		Args: map[string]any{"x-stream-automatic-offset-tracking": true, "x-stream-group": "g"}}); !errors.As(err, &ae) {
		t.Fatalf("tracking with a group: %v", err)
	}
	q.Delete(false, false)
}

// TestCheckPartitionHeaders: a stand-in's check (CheckPartitionHeaders)
// refuses what the stream's own CheckPublish refuses, and only that.
func TestCheckPartitionHeaders(t *testing.T) {
	args := map[string]any{"x-queue-type": "stream", "x-stream-partitions": int32(3)}
	for _, c := range []struct {
		args    map[string]any
		headers amqp.Table
		refused bool
	}{
		{args, amqp.Table{"x-stream-partition": int32(7)}, true},
		{args, amqp.Table{"x-stream-partition": "one"}, true},
		{args, amqp.Table{"x-stream-partition": int32(2)}, false},
		{args, amqp.Table{"x-stream-partition-key": "k"}, false},
		{args, nil, false},
		{map[string]any{"x-queue-type": "stream"}, amqp.Table{"x-stream-partition": int32(7)}, false}, // not partitioned
	} {
		err := stream.CheckPartitionHeaders(c.args, &queue.Message{Props: withHeaders(t, c.headers)})
		if (err != nil) != c.refused {
			t.Errorf("%v with %v: %v", c.args, c.headers, err)
		}
	}
}
