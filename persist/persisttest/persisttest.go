// Package persisttest is the contract suite every persist.Store must pass.
package persisttest

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/persist"
)

// Opener returns a new, empty store. The suite closes it (Close may be
// called twice).
type Opener func(t *testing.T) persist.Store

// Reopener closes s and opens a store on the same data, as a restart does.
type Reopener func(t *testing.T, s persist.Store) persist.Store

// Run runs the suite. reopen may be nil: the restart checks are then skipped
// and only the live state is checked.
func Run(t *testing.T, open Opener, reopen Reopener) {
	h := func(fn func(t *testing.T, c *harness)) func(t *testing.T) {
		return func(t *testing.T) {
			c := &harness{open: open, reopen: reopen}
			c.s = open(t)
			t.Cleanup(func() {
				if err := c.s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			fn(t, c)
			if err := persist.Check(c.s); err != nil && !errors.Is(err, persist.ErrClosed) {
				t.Errorf("store invariants after the test: %v", err)
			}
			if c.restart(t) {
				if err := persist.Check(c.s); err != nil {
					t.Errorf("store invariants after a restart: %v", err)
				}
			}
		}
	}
	t.Run("Definitions", h(testDefinitions))
	t.Run("QueueIDs", h(testQueueIDs))
	t.Run("PublishSettleRestart", h(testPublishSettleRestart))
	t.Run("Redelivered", h(testRedelivered))
	t.Run("Atomic", h(testAtomic))
	t.Run("SeqOrder", h(testSeqOrder))
	t.Run("DeleteQueue", h(testDeleteQueue))
	t.Run("NextMessageID", h(testNextMessageID))
	t.Run("OrphansDropped", h(testOrphansDropped))
	t.Run("Blobs", h(testBlobs))
	t.Run("ConcurrentPublish", h(testConcurrentPublish))
	t.Run("Closed", h(testClosed))
	t.Run("LargeBodies", h(testLargeBodies))
}

type harness struct {
	s      persist.Store
	open   Opener
	reopen Reopener
}

// restart reopens the store if the suite can; it reports whether it did.
func (c *harness) restart(t *testing.T) bool {
	t.Helper()
	if c.reopen == nil {
		return false
	}
	c.s = c.reopen(t, c.s)
	return true
}

const waitLimit = 10 * time.Second

// wait submits an op and waits for its done.
func wait(t *testing.T, what string, submit func(done func(error))) {
	t.Helper()
	ch := make(chan error, 1)
	submit(func(err error) { ch <- err })
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("%s: done not called within %v", what, waitLimit)
	}
}

func msg(i uint64) persist.MessageRecord {
	return persist.MessageRecord{
		Exchange:   "ex",
		RoutingKey: fmt.Sprintf("rk.%d", i),
		Props:      []byte{0x80, 0x00, byte(i)},
		Body:       []byte(fmt.Sprintf("body %d", i)),
	}
}

func (c *harness) publish(t *testing.T, id uint64, qs ...persist.QueueSeq) {
	t.Helper()
	for i := range qs {
		qs[i].MsgID = id
	}
	wait(t, fmt.Sprintf("Publish %d", id), func(d func(error)) { c.s.Publish(id, msg(id), qs, d) })
}

func (c *harness) settle(t *testing.T, qs ...persist.QueueSeq) {
	t.Helper()
	wait(t, "Settle", func(d func(error)) { c.s.Settle(qs, d) })
}

func (c *harness) queue(t *testing.T, name string) uint64 {
	t.Helper()
	q := &persist.QueueRecord{VHost: "/", Name: name, Durable: true}
	if err := c.s.SaveQueue(q); err != nil {
		t.Fatalf("SaveQueue %s: %v", name, err)
	}
	if q.ID == 0 {
		t.Fatalf("SaveQueue %s: ID not assigned", name)
	}
	return q.ID
}

func (c *harness) recover(t *testing.T, qid uint64) ([]persist.RecoveredEntry, uint64) {
	t.Helper()
	var out []persist.RecoveredEntry
	maxSeq, err := c.s.RecoverQueue(qid, func(e persist.RecoveredEntry) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatalf("RecoverQueue %d: %v", qid, err)
	}
	return out, maxSeq
}

func (c *harness) wantBody(t *testing.T, id uint64, present bool) {
	t.Helper()
	m, err := c.s.LoadMessage(id)
	switch {
	case present && err != nil:
		t.Fatalf("LoadMessage %d: %v", id, err)
	case present:
		checkMsg(t, id, m)
	case !errors.Is(err, persist.ErrNotFound):
		t.Fatalf("LoadMessage %d = %v, want ErrNotFound", id, err)
	}
}

func checkMsg(t *testing.T, id uint64, m persist.MessageRecord) {
	t.Helper()
	w := msg(id)
	if m.Exchange != w.Exchange || m.RoutingKey != w.RoutingKey || !bytes.Equal(m.Props, w.Props) || !bytes.Equal(m.Body, w.Body) {
		t.Fatalf("message %d = %+v, want %+v", id, m, w)
	}
}

func testDefinitions(t *testing.T, c *harness) {
	exs := []persist.ExchangeRecord{
		{VHost: "/", Name: "a", Kind: "direct", Durable: true},
		{VHost: "/", Name: "a.b", Kind: "topic", Durable: true, AutoDelete: true, Args: []byte{1, 2, 3}},
		{VHost: "/a", Name: "b", Kind: "fanout", Durable: true, Internal: true},
		{VHost: "v", Name: "", Kind: "direct", Durable: true},
	}
	for _, x := range exs {
		if err := c.s.SaveExchange(x); err != nil {
			t.Fatal(err)
		}
	}
	gone := persist.ExchangeRecord{VHost: "/", Name: "gone", Kind: "headers", Durable: true}
	if err := c.s.SaveExchange(gone); err != nil {
		t.Fatal(err)
	}
	if err := c.s.DeleteExchange("/", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := c.s.DeleteExchange("/", "never-existed"); err != nil {
		t.Fatal(err)
	}
	qs := []*persist.QueueRecord{
		{VHost: "/", Name: "q", Durable: true, Args: []byte("x-queue-type")},
		{VHost: "/", Name: "q.b", Durable: true, Exclusive: true, AutoDelete: true},
		{VHost: "/q", Name: "b", Durable: true},
	}
	for _, q := range qs {
		if err := c.s.SaveQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	bs := []persist.BindingRecord{
		{VHost: "/", Source: "a", Destination: "q", RoutingKey: "k"},
		{VHost: "/", Source: "a", Destination: "q", RoutingKey: "k", Args: []byte{9}}, // differs only by args
		{VHost: "/", Source: "a", Destination: "a.b", DestIsExchange: true, RoutingKey: ""},
		{VHost: "/", Source: "a", Destination: "q", DestIsExchange: true, RoutingKey: "k"}, // same names, exchange dest
	}
	for _, b := range bs {
		if err := c.s.SaveBinding(b); err != nil {
			t.Fatal(err)
		}
	}
	extra := persist.BindingRecord{VHost: "/", Source: "a", Destination: "q.b", RoutingKey: "x"}
	if err := c.s.SaveBinding(extra); err != nil {
		t.Fatal(err)
	}
	if err := c.s.DeleteBinding(extra); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		d, err := c.s.Definitions()
		if err != nil {
			t.Fatal(err)
		}
		sortDefs(&d)
		wantQ := make([]persist.QueueRecord, len(qs))
		for i, q := range qs {
			wantQ[i] = *q
		}
		want := persist.Definitions{Exchanges: slices.Clone(exs), Queues: wantQ, Bindings: slices.Clone(bs)}
		sortDefs(&want)
		if got, w := fmt.Sprintf("%+v", d), fmt.Sprintf("%+v", want); got != w {
			t.Fatalf("Definitions:\n got %s\nwant %s", got, w)
		}
	}
	check()
	if c.restart(t) {
		check()
	}
}

func sortDefs(d *persist.Definitions) {
	norm := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	for i := range d.Exchanges {
		d.Exchanges[i].Args = norm(d.Exchanges[i].Args)
	}
	for i := range d.Queues {
		d.Queues[i].Args = norm(d.Queues[i].Args)
	}
	for i := range d.Bindings {
		d.Bindings[i].Args = norm(d.Bindings[i].Args)
	}
	slices.SortFunc(d.Exchanges, func(a, b persist.ExchangeRecord) int {
		return cmpStr(a.VHost+"\x00"+a.Name, b.VHost+"\x00"+b.Name)
	})
	slices.SortFunc(d.Queues, func(a, b persist.QueueRecord) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(d.Bindings, func(a, b persist.BindingRecord) int {
		return cmpStr(fmt.Sprintf("%v", a), fmt.Sprintf("%v", b))
	})
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testQueueIDs(t *testing.T, c *harness) {
	a := c.queue(t, "a")
	b := c.queue(t, "b")
	if a == b {
		t.Fatalf("two queues share ID %d", a)
	}
	if again := c.queue(t, "a"); again != a {
		t.Fatalf("re-saving queue a gave ID %d, want %d", again, a)
	}
	if err := c.s.DeleteQueue("/", "b", b); err != nil {
		t.Fatal(err)
	}
	if c.restart(t) {
		if again := c.queue(t, "a"); again != a {
			t.Fatalf("after restart queue a has ID %d, want %d", again, a)
		}
	}
	if n := c.queue(t, "b"); n == a || n == b {
		t.Fatalf("new queue got ID %d, already used (a=%d, deleted b=%d)", n, a, b)
	}
}

func testPublishSettleRestart(t *testing.T, c *harness) {
	q1, q2, q3 := c.queue(t, "q1"), c.queue(t, "q2"), c.queue(t, "q3")
	c.publish(t, 7, persist.QueueSeq{QueueID: q1, Seq: 1}, persist.QueueSeq{QueueID: q2, Seq: 1}, persist.QueueSeq{QueueID: q3, Seq: 1})
	c.settle(t, persist.QueueSeq{QueueID: q1, Seq: 1, MsgID: 7}, persist.QueueSeq{QueueID: q2, Seq: 1, MsgID: 7})
	c.wantBody(t, 7, true)
	c.restart(t)
	for _, q := range []uint64{q1, q2} {
		if got, _ := c.recover(t, q); len(got) != 0 {
			t.Fatalf("settled queue %d recovered %+v", q, got)
		}
	}
	got, maxSeq := c.recover(t, q3)
	if len(got) != 1 || got[0].Seq != 1 || got[0].MsgID != 7 || got[0].Redelivered || maxSeq != 1 {
		t.Fatalf("queue 3 recovered %+v (max seq %d)", got, maxSeq)
	}
	checkMsg(t, 7, got[0].Msg)
	c.wantBody(t, 7, true)
	// Settling twice is harmless and does not drop the body early.
	c.settle(t, persist.QueueSeq{QueueID: q1, Seq: 1, MsgID: 7})
	c.wantBody(t, 7, true)
	c.settle(t, persist.QueueSeq{QueueID: q3, Seq: 1, MsgID: 7})
	c.wantBody(t, 7, false)
	if c.restart(t) {
		c.wantBody(t, 7, false)
		if got, _ := c.recover(t, q3); len(got) != 0 {
			t.Fatalf("queue 3 recovered %+v after settle", got)
		}
	}
}

func testRedelivered(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	c.publish(t, 1, persist.QueueSeq{QueueID: q, Seq: 1})
	c.publish(t, 2, persist.QueueSeq{QueueID: q, Seq: 2})
	c.s.Delivered([]persist.QueueSeq{{QueueID: q, Seq: 2, MsgID: 2}, {QueueID: q, Seq: 99}})
	c.publish(t, 3, persist.QueueSeq{QueueID: q, Seq: 3}) // ordered after Delivered
	c.restart(t)
	got, _ := c.recover(t, q)
	if len(got) != 3 || got[0].Redelivered || !got[1].Redelivered || got[2].Redelivered {
		t.Fatalf("recovered %+v, want only seq 2 redelivered", got)
	}
	for _, e := range got {
		checkMsg(t, e.MsgID, e.Msg)
	}
}

func testAtomic(t *testing.T, c *harness) {
	q1, q2 := c.queue(t, "q1"), c.queue(t, "q2")
	c.publish(t, 1, persist.QueueSeq{QueueID: q1, Seq: 1})
	pubs := []persist.PublishOp{
		{MsgID: 2, Msg: msg(2), Entries: []persist.QueueSeq{{QueueID: q1, Seq: 2, MsgID: 2}, {QueueID: q2, Seq: 1, MsgID: 2}}},
		{MsgID: 3, Msg: msg(3), Entries: []persist.QueueSeq{{QueueID: q2, Seq: 2, MsgID: 3}}},
	}
	wait(t, "Atomic", func(d func(error)) {
		c.s.Atomic(pubs, []persist.QueueSeq{{QueueID: q1, Seq: 1, MsgID: 1}}, d)
	})
	// Publish and settle of the same message in one Atomic op.
	wait(t, "Atomic", func(d func(error)) {
		c.s.Atomic([]persist.PublishOp{{MsgID: 4, Msg: msg(4), Entries: []persist.QueueSeq{{QueueID: q1, Seq: 3, MsgID: 4}}}},
			[]persist.QueueSeq{{QueueID: q1, Seq: 3, MsgID: 4}}, d)
	})
	c.restart(t)
	c.wantBody(t, 1, false)
	c.wantBody(t, 4, false)
	got1, _ := c.recover(t, q1)
	got2, _ := c.recover(t, q2)
	if len(got1) != 1 || got1[0].MsgID != 2 || len(got2) != 2 || got2[0].MsgID != 2 || got2[1].MsgID != 3 {
		t.Fatalf("recovered q1 %+v q2 %+v", got1, got2)
	}
}

func testSeqOrder(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	other := c.queue(t, "other")
	seqs := []uint64{1, 2, 255, 256, 257, 65535, 65536, 1 << 32, 1<<40 + 3, 1<<63 + 1}
	for range 50 {
		seqs = append(seqs, rand.Uint64N(1<<50))
	}
	seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
	shuffled := slices.Clone(seqs)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var wg sync.WaitGroup
	for i, s := range shuffled {
		id := uint64(i + 1)
		wg.Add(1)
		c.s.Publish(id, msg(id), []persist.QueueSeq{{QueueID: q, Seq: s, MsgID: id}, {QueueID: other, Seq: s, MsgID: id}}, func(err error) {
			if err != nil {
				t.Errorf("Publish: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	c.restart(t)
	got, maxSeq := c.recover(t, q)
	if len(got) != len(seqs) {
		t.Fatalf("recovered %d entries, want %d", len(got), len(seqs))
	}
	for i, e := range got {
		if e.Seq != seqs[i] {
			t.Fatalf("entry %d has seq %d, want %d", i, e.Seq, seqs[i])
		}
		checkMsg(t, e.MsgID, e.Msg)
	}
	if maxSeq != seqs[len(seqs)-1] {
		t.Fatalf("max seq %d, want %d", maxSeq, seqs[len(seqs)-1])
	}
	// An error from the callback stops the scan.
	stop := errors.New("stop")
	n := 0
	if _, err := c.s.RecoverQueue(q, func(persist.RecoveredEntry) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("RecoverQueue with failing callback: err %v after %d calls", err, n)
	}
}

func testDeleteQueue(t *testing.T, c *harness) {
	a, b := c.queue(t, "a"), c.queue(t, "b")
	const n = 5000 // more than one deletion chunk
	var wg sync.WaitGroup
	for i := uint64(1); i <= n; i++ {
		qs := []persist.QueueSeq{{QueueID: a, Seq: i, MsgID: i}}
		if i%1000 == 0 {
			qs = append(qs, persist.QueueSeq{QueueID: b, Seq: i, MsgID: i})
		}
		wg.Add(1)
		c.s.Publish(i, msg(i), qs, func(err error) {
			if err != nil {
				t.Errorf("Publish: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	c.s.Delivered([]persist.QueueSeq{{QueueID: a, Seq: 1}})
	if err := c.s.DeleteQueue("/", "a", a); err != nil {
		t.Fatal(err)
	}
	// Late publishes to the deleted queue are ignored.
	c.publish(t, n+1, persist.QueueSeq{QueueID: a, Seq: n + 1})
	check := func() {
		t.Helper()
		if got, _ := c.recover(t, a); len(got) != 0 {
			t.Fatalf("deleted queue recovered %d entries", len(got))
		}
		got, _ := c.recover(t, b)
		if len(got) != n/1000 {
			t.Fatalf("queue b recovered %d entries, want %d", len(got), n/1000)
		}
		for _, id := range []uint64{1, 999, 1001, n - 1, n + 1} {
			c.wantBody(t, id, false)
		}
		for _, id := range []uint64{1000, n} {
			c.wantBody(t, id, true)
		}
		d, err := c.s.Definitions()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Queues) != 1 || d.Queues[0].Name != "b" {
			t.Fatalf("queues after delete: %+v", d.Queues)
		}
	}
	check()
	if c.restart(t) {
		check()
	}
	if err := c.s.DeleteQueue("/", "never", 0); err != nil {
		t.Fatal(err)
	}
}

func testNextMessageID(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	c.publish(t, 500, persist.QueueSeq{QueueID: q, Seq: 1})
	c.publish(t, 1000, persist.QueueSeq{QueueID: q, Seq: 2})
	if got := c.s.NextMessageID(); got <= 1000 {
		t.Fatalf("NextMessageID = %d, want > 1000", got)
	}
	c.restart(t)
	if got := c.s.NextMessageID(); got <= 1000 {
		t.Fatalf("after restart NextMessageID = %d, want > 1000", got)
	}
	// Even when every message is gone.
	c.settle(t, persist.QueueSeq{QueueID: q, Seq: 1}, persist.QueueSeq{QueueID: q, Seq: 2})
	c.restart(t)
	if got := c.s.NextMessageID(); got <= 1000 {
		t.Fatalf("after settle and restart NextMessageID = %d, want > 1000", got)
	}
}

func testOrphansDropped(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	const unsaved = 1 << 40
	c.publish(t, 1, persist.QueueSeq{QueueID: unsaved, Seq: 1})
	c.publish(t, 2, persist.QueueSeq{QueueID: unsaved, Seq: 2}, persist.QueueSeq{QueueID: q, Seq: 1})
	if !c.restart(t) {
		return
	}
	if got, _ := c.recover(t, unsaved); len(got) != 0 {
		t.Fatalf("entries of an unsaved queue survived a restart: %+v", got)
	}
	c.wantBody(t, 1, false)
	c.wantBody(t, 2, true)
	c.settle(t, persist.QueueSeq{QueueID: q, Seq: 1})
	c.wantBody(t, 2, false)
}

func testBlobs(t *testing.T, c *harness) {
	if _, err := c.s.LoadBlob("nope"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("LoadBlob of a missing key: %v", err)
	}
	if err := c.s.SaveBlob("policy/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := c.s.SaveBlob("policy/a.b", []byte{}); err != nil {
		t.Fatal(err)
	}
	if err := c.s.SaveBlob("gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.s.DeleteBlob("gone"); err != nil {
		t.Fatal(err)
	}
	c.restart(t)
	if v, err := c.s.LoadBlob("policy/a"); err != nil || string(v) != "1" {
		t.Fatalf("LoadBlob policy/a = %q, %v", v, err)
	}
	if v, err := c.s.LoadBlob("policy/a.b"); err != nil || len(v) != 0 {
		t.Fatalf("LoadBlob policy/a.b = %q, %v", v, err)
	}
	if _, err := c.s.LoadBlob("gone"); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("LoadBlob of a deleted key: %v", err)
	}
}

func testConcurrentPublish(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	const workers, per = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := uint64(w*per + i + 1)
				ch := make(chan error, 1)
				c.s.Publish(id, msg(id), []persist.QueueSeq{{QueueID: q, Seq: id, MsgID: id}}, func(err error) { ch <- err })
				if err := <-ch; err != nil {
					t.Errorf("Publish %d: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := c.s.Stats()
	if st.Messages != workers*per || st.Commits == 0 || st.Commits > st.Ops {
		t.Fatalf("stats %+v", st)
	}
	c.restart(t)
	if got, _ := c.recover(t, q); len(got) != workers*per {
		t.Fatalf("recovered %d, want %d", len(got), workers*per)
	}
}

func testClosed(t *testing.T, c *harness) {
	q := c.queue(t, "q")
	var got []int
	var mu sync.Mutex
	for i := range 100 {
		id := uint64(i + 1)
		c.s.Publish(id, msg(id), []persist.QueueSeq{{QueueID: q, Seq: id, MsgID: id}}, func(err error) {
			if err != nil {
				t.Errorf("Publish before Close: %v", err)
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		})
	}
	if err := c.s.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(got)
	sorted := slices.IsSorted(got)
	mu.Unlock()
	if n != 100 || !sorted {
		t.Fatalf("Close returned with %d of 100 callbacks called (in order: %v)", n, sorted)
	}
	var err error
	c.s.Publish(1000, msg(1000), []persist.QueueSeq{{QueueID: q, Seq: 1000}}, func(e error) { err = e })
	if !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if err := c.s.SaveBlob("k", nil); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("SaveBlob after Close: %v", err)
	}
	if c.reopen != nil {
		c.s = c.reopen(t, c.s) // Close is idempotent
		if got, _ := c.recover(t, q); len(got) != 100 {
			t.Fatalf("recovered %d after Close, want 100", len(got))
		}
	}
}

// testLargeBodies stores bodies larger than Badger's largest value (its
// value-log file, 64 MiB) next to small ones, in Publish and Atomic ops,
// and reads them back before and after a restart; settling them leaves no
// trace (Check, run after the test, sees every chunk).
func testLargeBodies(t *testing.T, c *harness) {
	if testing.Short() {
		t.Skip("writes a few hundred MiB")
	}
	q := c.queue(t, "large")
	big := func(id uint64, n int) persist.MessageRecord {
		b := make([]byte, n)
		r := rand.New(rand.NewPCG(id, uint64(n)))
		for i := 0; i < n; i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < n; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return persist.MessageRecord{Exchange: "ex", RoutingKey: fmt.Sprint(id), Props: []byte{byte(id)}, Body: b}
	}
	sizes := map[uint64]int{1: 70 << 20, 2: 16 << 20, 3: 16<<20 + 1, 4: 10, 5: 127 << 20}
	base := c.s.NextMessageID()
	want := map[uint64]persist.MessageRecord{}
	for k := uint64(1); k <= 4; k++ {
		id := base + k
		m := big(id, sizes[k])
		want[k] = m
		qs := []persist.QueueSeq{{QueueID: q, Seq: k, MsgID: id}}
		wait(t, fmt.Sprintf("Publish %d bytes", sizes[k]), func(d func(error)) { c.s.Publish(id, m, qs, d) })
	}
	m5 := big(base+5, sizes[5])
	want[5] = m5
	wait(t, "Atomic of 127 MiB", func(d func(error)) {
		c.s.Atomic([]persist.PublishOp{{MsgID: base + 5, Msg: m5, Entries: []persist.QueueSeq{{QueueID: q, Seq: 5, MsgID: base + 5}}}}, nil, d)
	})
	check := func(when string) {
		t.Helper()
		got, _ := c.recover(t, q)
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries, want %d", when, len(got), len(want))
		}
		for _, e := range got {
			w := want[e.Seq]
			if !bytes.Equal(e.Msg.Body, w.Body) || e.Msg.RoutingKey != w.RoutingKey || !bytes.Equal(e.Msg.Props, w.Props) {
				t.Fatalf("%s: seq %d: body of %d bytes differs from the %d published", when, e.Seq, len(e.Msg.Body), len(w.Body))
			}
			m, err := c.s.LoadMessage(e.MsgID)
			if err != nil || !bytes.Equal(m.Body, w.Body) {
				t.Fatalf("%s: LoadMessage %d: %v (%d bytes)", when, e.MsgID, err, len(m.Body))
			}
		}
	}
	check("live")
	if err := persist.Check(c.s); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	if c.restart(t) {
		check("after a restart")
	}
	var all []persist.QueueSeq
	for k := uint64(1); k <= 5; k++ {
		all = append(all, persist.QueueSeq{QueueID: q, Seq: k, MsgID: base + k})
	}
	c.settle(t, all...)
	if got, _ := c.recover(t, q); len(got) != 0 {
		t.Fatalf("%d entries after settling every one", len(got))
	}
	for k := uint64(1); k <= 5; k++ {
		c.wantBody(t, base+k, false)
	}
}
