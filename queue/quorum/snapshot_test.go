package quorum

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/queue"
)

// decodeMachine reads a snapshot held in memory that carries no body and
// refers to no body file.
func decodeMachine(b []byte) (*machine, error) {
	d := newMachine(config{})
	return readMachine(bytes.NewReader(b), nil, d.budgetN, d.budgetB)
}

// testBodies is a body file set in a directory of its own, whose store
// lists the snapshots in list.
func testBodies(t *testing.T) (*bodyFiles, *[]*raft.SnapshotMeta) {
	t.Helper()
	list := &[]*raft.SnapshotMeta{}
	b := newBodyFiles(t.TempDir(), true, func() ([]*raft.SnapshotMeta, error) { return *list, nil })
	t.Cleanup(b.close)
	return b, list
}

// restoreFrom restores snapshot b with b's body files, as Restore does.
func restoreFrom(bf *bodyFiles, b []byte) (*machine, error) {
	return restoreBudget(bf, b, 1<<14)
}

// restoreBudget restores with a body cache of budget bodies.
func restoreBudget(bf *bodyFiles, b []byte, budget int) (*machine, error) {
	rs := bf.restore()
	m, err := readMachine(bytes.NewReader(b), rs, budget, 64<<20)
	if err == nil {
		err = rs.finish()
	}
	if err != nil {
		rs.abort()
		return nil, err
	}
	rs.done()
	return m, nil
}

// each calls f on every message of s, in queue order (returns, ready,
// checked out by id).
func each(s *machine, f func(*msg)) {
	s.returns.each(f)
	s.ready.each(f)
	out := make([]*msg, 0, len(s.out))
	for _, m := range s.out {
		out = append(out, m)
	}
	for _, m := range sortedByID(out) {
		f(m)
	}
}

func sortedByID(ms []*msg) []*msg {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].id < ms[j-1].id; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	return ms
}

// fakeLog serves the body of (idx, pos) as "body idx/pos".
func fakeLog(idx uint64, pos uint32) (*queue.Message, error) {
	return queue.NewStored("ex", "rk", []byte{0, 0}, []byte(fmt.Sprintf("body %d/%d", idx, pos)), 0), nil
}

func bodyFilesIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasPrefix(e.Name(), bodyPrefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// An expanded snapshot carries every body inline; a replica restores it
// with those bodies in a body file (the first ones cached, within the
// budget), not in memory; its own snapshot refers to the file, and
// expands again to the same bytes. A version 1 snapshot is still read.
func TestSnapshotVersionsAndExpand(t *testing.T) {
	var log []entry
	for i := range uint64(5) {
		log = append(log, entry{uint64(len(log) + 1), batchOf(1000, enqueueCmd(2*i+1, "x"), enqueueCmd(2*i+2, "y"))})
	}
	log = append(log, entry{6, batchOf(1000, func(e *encoder) { e.u8(opGet); e.u64(20); e.u8(0) })})
	s, _ := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log)
	snap, floor, files := s.encode()
	if floor != 1 || len(files) != 0 {
		t.Fatalf("floor %d files %v, want 1 and none", floor, files)
	}
	var x bytes.Buffer
	if err := expand(&x, bytes.NewReader(snap), bodySource{message: fakeLog}, 77); err != nil {
		t.Fatal(err)
	}

	// The expanded snapshot, written out by hand.
	want := &encoder{}
	want.u8(snapshotVersion)
	want.u8(flagSelfContained)
	want.u64(77)
	want.u32(0)
	for range 3 {
		want.i64(-1)
	}
	want.u8(uint8(fifoRules))
	want.i64(-1)
	want.u8(0)
	want.u64(10) // next id
	want.u64(0)
	want.i64(1)
	want.u32(0) // consumers
	want.u32(1) // enqueuers
	want.u64(1000)
	want.u64(20)
	want.u64(6)
	want.ids([]uint64{1, 3, 5, 7, 9, 20})
	want.u32(0) // returns
	want.u32(9) // ready: all but the first, which the get took
	for id := uint64(2); id <= 10; id++ {
		idx, pos := (id-1)/2+1, uint32((id-1)%2)
		want.u64(id)
		want.u64(idx)
		want.u32(pos)
		want.u32(1)
		want.i64(0)
		want.u32(0)
		want.u64(0)
		want.u8(flagInline)
		m, _ := fakeLog(idx, pos)
		putBody(want, m)
	}
	want.u32(1) // checked out: the get's
	want.u64(1)
	want.u64(1)
	want.u32(0)
	want.u32(1)
	want.i64(0)
	want.u32(0)
	want.u64(getOwner)
	want.u8(flagInline)
	m1, _ := fakeLog(1, 0)
	putBody(want, m1)
	if !bytes.Equal(x.Bytes(), want.b) {
		t.Fatalf("expanded snapshot:\n%x\nwant\n%x", x.Bytes(), want.b)
	}

	// Restored: every body in the body file, and cached (it fits).
	bf, _ := testBodies(t)
	m, err := restoreFrom(bf, x.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	each(m, func(q *msg) {
		n++
		body, err := q.ref.read()
		want, _ := fakeLog(q.idx, q.pos)
		if err != nil || string(body.Body) != string(want.Body) || q.body == nil || string(q.body.Body) != string(want.Body) {
			t.Fatalf("message %d: %v %v %v", q.id, err, body, q.body)
		}
	})
	if n != 10 || m.cachedN != 10 || m.cachedB != 10 {
		t.Fatalf("%d messages, %d (%d bytes) cached, want 10", n, m.cachedN, m.cachedB)
	}
	if names := bodyFilesIn(t, bf.dir); len(names) != 1 || names[0] != bodyFileName(77) {
		t.Fatalf("body files %v, want %s", names, bodyFileName(77))
	}
	// Its own snapshot refers to the file; expanded, it is the same.
	own, floor, files := m.encode()
	if floor != 0 || len(files) != 1 || files[0] != bodyFileName(77) {
		t.Fatalf("own snapshot: floor %d files %v", floor, files)
	}
	var again bytes.Buffer
	if err := expand(&again, bytes.NewReader(own), bodySource{file: bf.open}, 77); err != nil || !bytes.Equal(again.Bytes(), x.Bytes()) {
		t.Fatalf("expanding the replica's own snapshot: %v, equal %v", err, bytes.Equal(again.Bytes(), x.Bytes()))
	}
	// And restored from its own snapshot (a restart): the same state.
	m2, err := restoreFrom(bf, own)
	if err != nil {
		t.Fatal(err)
	}
	if re, _, _ := m2.encode(); !bytes.Equal(re, own) || m2.cachedN != 0 {
		t.Fatalf("restored from its own snapshot: encodes equal %v, %d cached", bytes.Equal(re, own), m2.cachedN)
	}

	// Version 1: no consumer proposer, no batches, no message flags.
	v1 := &encoder{}
	v1.u8(snapshotV1)
	for range 3 {
		v1.i64(-1)
	}
	v1.u8(0)
	v1.i64(-1)
	v1.u8(0)
	v1.u64(5) // next id
	v1.u64(0)
	v1.i64(0)
	v1.u32(1) // a consumer
	v1.u64(42)
	v1.str("n1")
	v1.u32(10)
	v1.u32(0)
	v1.u8(0)
	v1.u8(0)
	v1.u64(0)
	v1.u32(1) // an enqueuer
	v1.u64(7)
	v1.u64(3)
	v1.u64(9)
	v1.u32(0) // returns
	v1.u32(1) // ready
	v1.u64(5)
	v1.u64(9)
	v1.u32(0)
	v1.u32(3)
	v1.i64(0)
	v1.u32(0)
	v1.u64(0)
	v1.u32(0) // out
	old, err := decodeMachine(v1.b)
	if err != nil || old.readyN != 1 || len(old.consumers) != 1 || old.consumers[0].key != 42 || old.enqueuers[7].seq != 3 {
		t.Fatalf("v1 snapshot: %v %+v", err, old)
	}
	if m := old.ready.front(); m.idx != 9 || m.ref != nil || m.body != nil {
		t.Fatalf("v1 message: %+v", m)
	}
}

// v2 writes a version 2 snapshot of messages: a body for an inline one,
// "" for one in the log at (id, 0).
func v2(bodies ...string) []byte {
	e := &encoder{}
	e.u8(snapshotV2)
	for range 3 {
		e.i64(-1)
	}
	e.u8(0)
	e.i64(-1)
	e.u8(0)
	e.u64(uint64(len(bodies)))
	e.u64(0)
	e.i64(0)
	e.u32(0) // consumers
	e.u32(0) // enqueuers
	e.u32(0) // returns
	e.u32(uint32(len(bodies)))
	for i, b := range bodies {
		e.u64(uint64(i + 1))
		e.u64(uint64(i + 1))
		e.u32(0)
		e.u32(uint32(len(b)))
		e.i64(0)
		e.u32(0)
		e.u64(0)
		if b == "" {
			e.u8(0)
			continue
		}
		e.u8(flagInline)
		putBody(e, queue.NewStored("ex", "rk", []byte{0, 0}, []byte(b), 0))
	}
	e.u32(0) // out
	return e.b
}

// A version 2 snapshot (a replica's own of before, or one an older
// leader sent) restores: its inline bodies go to a body file, those
// beyond the cache's budget are read back from it; the others stay
// references to the log.
func TestSnapshotV2Restores(t *testing.T) {
	bodies := []string{"one", "", "three", "four"}
	b := v2(bodies...)
	bf, _ := testBodies(t)
	m, err := restoreBudget(bf, b, 2) // only two fit in the cache
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	each(m, func(q *msg) {
		want := bodies[i]
		i++
		if want == "" {
			if q.ref != nil || q.body != nil || q.idx != 2 {
				t.Fatalf("message %d, in the log: %+v", q.id, q)
			}
			return
		}
		got, err := q.ref.read()
		if err != nil || string(got.Body) != want || got.Exchange != "ex" || got.RoutingKey != "rk" {
			t.Fatalf("message %d: %v %+v, want %q", q.id, err, got, want)
		}
		if cached := q.body != nil; cached != (q.id <= 3) {
			t.Fatalf("message %d cached %v", q.id, cached)
		}
	})
	if m.cachedN != 2 {
		t.Fatalf("%d cached, want 2", m.cachedN)
	}
	if names := bodyFilesIn(t, bf.dir); len(names) != 1 {
		t.Fatalf("body files %v, want one", names)
	}
}

// A snapshot cut short or damaged anywhere is an error, never a panic,
// and leaves no body file behind.
func TestSnapshotDamaged(t *testing.T) {
	var log []entry
	for i := range uint64(3) {
		log = append(log, entry{i + 1, batchOf(1000, enqueueCmd(i+1, "body"))})
	}
	s, _ := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log)
	own, _, _ := s.encode()
	var x bytes.Buffer
	if err := expand(&x, bytes.NewReader(own), bodySource{message: fakeLog}, 5); err != nil {
		t.Fatal(err)
	}
	bf, _ := testBodies(t)
	for _, snap := range [][]byte{own, x.Bytes(), v2("a", "", "c")} {
		for cut := range len(snap) {
			_, err := restoreFrom(bf, snap[:cut])
			if !errors.Is(err, errSnapshot) {
				t.Fatalf("cut at %d of %d: %v, want errSnapshot", cut, len(snap), err)
			}
			if err := expand(io.Discard, bytes.NewReader(snap[:cut]), bodySource{message: fakeLog}, 1); !errors.Is(err, errSnapshot) {
				t.Fatalf("expand, cut at %d of %d: %v, want errSnapshot", cut, len(snap), err)
			}
		}
		if _, err := restoreFrom(bf, append(slicesClone(snap), 0)); !errors.Is(err, errSnapshot) {
			t.Fatalf("a trailing byte: %v", err)
		}
		// Any byte changed: an error or a machine, never a panic.
		for i := range snap {
			for _, v := range []byte{0, 0xff, snap[i] ^ 0x5a} {
				d := slicesClone(snap)
				d[i] = v
				restoreFrom(bf, d)
				expand(io.Discard, bytes.NewReader(d), bodySource{message: fakeLog, file: bf.open}, 1)
			}
		}
	}
	if _, err := decodeMachine([]byte{9}); !errors.Is(err, errSnapshot) {
		t.Fatalf("version 9: %v", err)
	}
	// A reference outside its file, and to a file that is not there.
	bf2, _ := testBodies(t)
	m, err := restoreFrom(bf2, x.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := m.encode()
	bad := bytes.Replace(ref, []byte(bodyFileName(5)), []byte(bodyFileName(6)), 1)
	if _, err := restoreFrom(bf2, bad); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing body file: %v", err)
	}
	if err := os.Truncate(filepath.Join(bf2.dir, bodyFileName(5)), 20); err != nil {
		t.Fatal(err)
	}
	bf3 := newBodyFiles(bf2.dir, true, bf2.list)
	defer bf3.close()
	if _, err := restoreFrom(bf3, ref); !errors.Is(err, errSnapshot) {
		t.Fatalf("a reference past its file's end: %v", err)
	}
	for _, names := range [][]string{bodyFilesIn(t, bf.dir)} {
		for _, n := range names {
			if strings.HasSuffix(n, tmpSuffix) {
				t.Fatalf("a failed restore left %s", n)
			}
		}
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// Restoring the same expanded snapshot again (a restart before the
// replica took a snapshot of its own) finds its body file written and
// writes nothing.
func TestSnapshotRestoreAgainReusesBodyFile(t *testing.T) {
	x := v2("a", "b", "c")
	var ex bytes.Buffer
	if err := expand(&ex, bytes.NewReader(x), bodySource{}, 42); err != nil {
		t.Fatal(err)
	}
	bf, _ := testBodies(t)
	if _, err := restoreFrom(bf, ex.Bytes()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(bf.dir, bodyFileName(42))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	bf.close()
	time.Sleep(10 * time.Millisecond)
	bf2 := newBodyFiles(bf.dir, true, bf.list)
	defer bf2.close()
	m, err := restoreFrom(bf2, ex.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		t.Fatalf("the body file was written again: %v", err)
	}
	var got []string
	each(m, func(q *msg) {
		b, err := q.ref.read()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b.Body))
	})
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("bodies %v", got)
	}
	// A file that does not match its snapshot (shorter) fails the restore
	// and goes, so that the next one writes it anew.
	if err := os.Truncate(path, after.Size()-5); err != nil {
		t.Fatal(err)
	}
	bf3 := newBodyFiles(bf.dir, true, bf.list)
	defer bf3.close()
	if _, err := restoreFrom(bf3, ex.Bytes()); err == nil {
		t.Fatal("a short body file was taken")
	}
	if _, err := restoreFrom(bf3, ex.Bytes()); err != nil {
		t.Fatalf("after the short file went: %v", err)
	}
}

// A body file goes once neither the machine, a snapshot being persisted,
// nor a snapshot the store lists refers to it; at open what a crash left
// half written goes too.
func TestBodyFilesCollect(t *testing.T) {
	bf, list := testBodies(t)
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(bf.dir, name), []byte(bodyMagic), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, d := bodyFileName(1), bodyFileName(2), bodyFileName(3), bodyFileName(4)
	for _, n := range []string{a, b, c, d, bodyFileName(5) + tmpSuffix, "spool-1.tmp", "other"} {
		write(n)
	}
	// Snapshot s1 (listed, its header read from disk) refers to b.
	s1 := &encoder{}
	s1.u8(snapshotVersion)
	s1.u8(0)
	s1.u64(0)
	s1.u32(1)
	s1.str(b)
	if err := os.MkdirAll(filepath.Join(bf.dir, "1-10-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bf.dir, "1-10-1", "state.bin"), s1.b, 0o644); err != nil {
		t.Fatal(err)
	}
	*list = []*raft.SnapshotMeta{{ID: "1-10-1"}, {ID: "1-9-1"}} // the second gone since it was listed
	bf.setLive([]string{a})
	pending := &snapshot{}
	bf.encoded(pending, []string{c})
	bf.pin()
	if err := bf.collect(true); err != nil {
		t.Fatal(err)
	}
	if got := bodyFilesIn(t, bf.dir); len(got) != 5 {
		t.Fatalf("pinned: %v left, want all five", got)
	}
	bf.unpin()
	if err := bf.collect(false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bodyFilesIn(t, bf.dir), ","); got != strings.Join([]string{a, b, c, bodyFileName(5) + tmpSuffix}, ",") {
		t.Fatalf("after a collect: %s", got)
	}
	if err := bf.collect(true); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bodyFilesIn(t, bf.dir), ","); got != strings.Join([]string{a, b, c}, ",") {
		t.Fatalf("after a collect at open: %s", got)
	}
	if _, err := os.Stat(filepath.Join(bf.dir, "spool-1.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a spooled snapshot left by a crash: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bf.dir, "other")); err != nil {
		t.Fatalf("a file that is not a body file was removed: %v", err)
	}
	bf.released(pending)
	bf.setLive(nil)
	*list = nil
	if err := bf.collect(false); err != nil {
		t.Fatal(err)
	}
	if got := bodyFilesIn(t, bf.dir); len(got) != 0 {
		t.Fatalf("nothing refers to %v", got)
	}
}

// publishAll publishes bodies to q and waits for their confirms.
func publishAll(t *testing.T, q *Queue, bodies []string) {
	t.Helper()
	errs := make(chan error, len(bodies))
	for _, b := range bodies {
		q.enqueue(&queue.Message{Exchange: "ex", RoutingKey: "rk", Body: []byte(b), Persistent: true}, func(err error) { errs <- err })
	}
	for range bodies {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no confirm")
		}
	}
}

// A snapshot raft sends to a replica is expanded into a temporary file
// of the group's snapshot directory, not in memory, and that file is
// what is read (removed on Close): the same bytes as the snapshot
// expanded by reading each body from the log, every message with its
// body. A self-contained snapshot is sent as it is stored.
func TestSnapshotSentSpooled(t *testing.T) {
	typ := NewType(Config{Dir: t.TempDir(), NoSync: true, SnapshotThreshold: 1 << 20})
	t.Cleanup(func() { typ.Close() })
	x, err := typ.New(queue.Decl{VHost: "/", Name: "s", Durable: true}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	q := x.(*Queue)
	var bodies []string
	for i := range 2000 {
		bodies = append(bodies, fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%50)))
	}
	publishAll(t, q, bodies)
	if err := q.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snaps := q.snaps.(*sendingSnapshots)
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	meta, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := rc.(*spooled)
	if !ok {
		t.Fatalf("a snapshot sent is a %T, not spooled to a file", rc)
	}
	if filepath.Dir(sp.f.Name()) != q.bodies.dir {
		t.Fatalf("spooled to %s, not in the group's snapshot directory %s", sp.f.Name(), q.bodies.dir)
	}
	got, err := io.ReadAll(rc)
	if err != nil || int64(len(got)) != meta.Size || meta.Size <= metas[0].Size {
		t.Fatalf("read %d bytes (%v), size %d, stored %d", len(got), err, meta.Size, metas[0].Size)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sp.f.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spooled file is still there after Close: %v", err)
	}

	// The reference: expanded in memory, each body read from the log on
	// its own (readBody), with the spooled one's nonce.
	_, stored, err := snaps.SnapshotStore.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Close()
	var want bytes.Buffer
	nonce := (&decoder{b: got[2:10]}).u64()
	if err := expand(&want, stored, bodySource{message: q.readBody, file: q.bodies.open}, nonce); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the spooled snapshot differs from the expanded one")
	}
	// What the replica restores from it: every body, in order, in its
	// body file (the cache's budget here is 100).
	bf, _ := testBodies(t)
	m, err := restoreBudget(bf, got, 100)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	each(m, func(x *msg) {
		b, err := x.ref.read()
		if err != nil || string(b.Body) != bodies[i] || b.Exchange != "ex" || b.RoutingKey != "rk" {
			t.Fatalf("message %d: %v %q, want %q", i, err, b.Body, bodies[i])
		}
		if (x.body != nil) != (i < 100) {
			t.Fatalf("message %d cached %v", i, x.body != nil)
		}
		i++
	})
	if i != len(bodies) || m.cachedN != 100 {
		t.Fatalf("%d messages, %d cached", i, m.cachedN)
	}

	// Empty, the queue's snapshot is self-contained: sent as stored.
	if n := q.Purge(); n != len(bodies) {
		t.Fatalf("purged %d", n)
	}
	if err := q.r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	metas, _ = snaps.List()
	_, rc, err = snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, ok := rc.(*bufferedSnapshot); !ok {
		t.Fatalf("a self-contained snapshot sent is a %T", rc)
	}
}

// Where a replica keeps a body (log, cache, body file) changes nothing it
// applies: a machine restored from an expanded snapshot, its bodies in a
// body file and a few cached, applies the rest of a log with the same
// effects as the machine that applied it all, and ends in the same state
// (their snapshots, expanded, are the same bytes).
func TestSnapshotRestoredAppliesAlike(t *testing.T) {
	for seed := range uint64(20) {
		log := randomLog(seed, 300)
		half, _ := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log[:150])
		snap, _, _ := half.encode()
		var x bytes.Buffer
		if err := expand(&x, bytes.NewReader(snap), bodySource{message: fakeLog}, seed+1); err != nil {
			t.Fatal(err)
		}
		bf, _ := testBodies(t)
		restored, err := restoreBudget(bf, x.Bytes(), 3)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		_, tHalf := run(half, log[150:])
		_, tRest := run(restored, log[150:])
		if tHalf != tRest {
			t.Fatalf("seed %d: effects after a restore differ:\n%s\nvs\n%s", seed, tHalf, tRest)
		}
		sh, _, _ := half.encode()
		sr, _, _ := restored.encode()
		var eh, er bytes.Buffer
		if err := expand(&eh, bytes.NewReader(sh), bodySource{message: fakeLog}, 9); err != nil {
			t.Fatal(err)
		}
		if err := expand(&er, bytes.NewReader(sr), bodySource{message: fakeLog, file: bf.open}, 9); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(eh.Bytes(), er.Bytes()) {
			t.Fatalf("seed %d: the state after a restore differs", seed)
		}
		checkInvariants(t, restored)
		// The cache's count is its bodies' (restored ones included).
		inMemory, bytesIn := 0, int64(0)
		each(restored, func(m *msg) {
			if m.body != nil {
				inMemory++
				bytesIn += int64(m.size)
			}
		})
		if inMemory != restored.cachedN || bytesIn != restored.cachedB {
			t.Fatalf("seed %d: %d bodies (%d bytes) in memory, the cache counts %d (%d)", seed, inMemory, bytesIn, restored.cachedN, restored.cachedB)
		}
	}
}
