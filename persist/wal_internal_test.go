package persist

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// walTestStore opens an engine on the memory disk d with its message log
// in dir, so that tests can look at (and damage) both.
func walTestStore(t *testing.T, d *MemoryDisk, dir string) *engine {
	t.Helper()
	var logs []string
	s, err := newEngine(memKV{d}, func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }, logOptions{dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func walWait(t *testing.T, submit func(done func(error))) {
	t.Helper()
	ch := make(chan error, 1)
	submit(func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func walMsg(id uint64) MessageRecord {
	return MessageRecord{Exchange: "x", RoutingKey: fmt.Sprint(id), Props: []byte{byte(id)}, Body: bytes.Repeat([]byte{byte(id)}, 100+int(id%50))}
}

// walEntries returns the queue's entries as "seq:msgID[:r]" strings, with
// each body checked against walMsg.
func walEntries(t *testing.T, s *engine, q uint64) []string {
	t.Helper()
	var got []string
	if _, err := s.RecoverQueue(q, func(e RecoveredEntry) error {
		want := walMsg(e.MsgID)
		if !bytes.Equal(e.Msg.Body, want.Body) || e.Msg.RoutingKey != want.RoutingKey {
			t.Errorf("seq %d: body of message %d differs", e.Seq, e.MsgID)
		}
		v := fmt.Sprintf("%d:%d", e.Seq, e.MsgID)
		if e.Redelivered {
			v += ":r"
		}
		got = append(got, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// walWorkload publishes messages 1..n to q1 (seq = id) and the even ones
// to q2 too, marks 1..n/2 delivered in q1, settles the multiples of 3 in
// q1 and of 4 in q2, and returns what q1 and q2 must hold.
func walWorkload(t *testing.T, s *engine, q1, q2 uint64, n uint64) (want1, want2 []string) {
	t.Helper()
	for id := uint64(1); id <= n; id++ {
		es := []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}
		if id%2 == 0 {
			es = append(es, QueueSeq{QueueID: q2, Seq: id, MsgID: id})
		}
		s.Publish(id, walMsg(id), es, nil)
	}
	var del, set []QueueSeq
	for id := uint64(1); id <= n; id++ {
		if id <= n/2 {
			del = append(del, QueueSeq{QueueID: q1, Seq: id})
		}
		if id%3 == 0 {
			set = append(set, QueueSeq{QueueID: q1, Seq: id})
		}
		if id%4 == 0 {
			set = append(set, QueueSeq{QueueID: q2, Seq: id})
		}
	}
	s.Delivered(del)
	walWait(t, func(done func(error)) { s.Settle(set, done) })
	for id := uint64(1); id <= n; id++ {
		if id%3 != 0 {
			v := fmt.Sprintf("%d:%d", id, id)
			if id <= n/2 {
				v += ":r"
			}
			want1 = append(want1, v)
		}
		if id%2 == 0 && id%4 != 0 {
			want2 = append(want2, fmt.Sprintf("%d:%d", id, id))
		}
	}
	return want1, want2
}

func walQueues(t *testing.T, s *engine) (q1, q2 uint64) {
	t.Helper()
	a := &QueueRecord{VHost: "/", Name: "q1", Durable: true}
	b := &QueueRecord{VHost: "/", Name: "q2", Durable: true}
	if err := s.SaveQueue(a); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveQueue(b); err != nil {
		t.Fatal(err)
	}
	return a.ID, b.ID
}

func walCheck(t *testing.T, s *engine, q1, q2 uint64, want1, want2 []string) {
	t.Helper()
	if got := walEntries(t, s, q1); !slices.Equal(got, want1) {
		t.Errorf("q1 = %v\nwant %v", got, want1)
	}
	if got := walEntries(t, s, q2); !slices.Equal(got, want2) {
		t.Errorf("q2 = %v\nwant %v", got, want2)
	}
	if err := Check(s); err != nil {
		t.Error(err)
	}
}

// TestWALReplayUnapplied: ops that were logged (done called) but not yet
// applied when the process died come back from the log.
func TestWALReplayUnapplied(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	s.wl.pendAge = time.Hour // the ops stay pending until the "crash"
	q1, q2 := walQueues(t, s)
	want1, want2 := walWorkload(t, s, q1, q2, 300)
	// Simulate a crash: the disk keeps only what was applied; the
	// committer's pending ops are lost with the process.
	snapshot := d.clone()
	if s.pendCount.Load() == 0 {
		t.Fatal("nothing pending: the test does not exercise the replay")
	}
	s.Close()
	s = walTestStore(t, snapshot, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, want1, want2)
}

// TestWALReplayIdempotent: a replay over a kv that already has the ops
// (the checkpoint is older than the last apply) ends in the same state,
// reference counts included.
func TestWALReplayIdempotent(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	q1, q2 := walQueues(t, s)
	want1, want2 := walWorkload(t, s, q1, q2, 300)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	first := s.wl.w.pos.seg
	s.Close()
	// Move the checkpoint back to the start of the log.
	d.data[string(metaKey(metaWAL))] = walPos{seg: first}.bytes()
	s = walTestStore(t, d, dir)
	walCheck(t, s, q1, q2, want1, want2)
	// And the store keeps working after it.
	walWait(t, func(done func(error)) {
		s.Settle([]QueueSeq{{QueueID: q1, Seq: 1}, {QueueID: q2, Seq: 2}}, done)
	})
	s.Close()
	s = walTestStore(t, d, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, want1[1:], want2[1:])
}

// TestWALTornTail: garbage after the last record (a torn write, or a
// record of an earlier use of a recycled file) ends the replay there.
func TestWALTornTail(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	q1, q2 := walQueues(t, s)
	want1, want2 := walWorkload(t, s, q1, q2, 50)
	snapshot := d.clone()
	name := segName(dir, s.wl.w.pos.seg)
	end := s.wl.w.pos.off
	s.Close()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A plausible header of this segment with a wrong CRC, then a header
	// of another segment.
	var junk [2 * walHeaderLen]byte
	junk[3], junk[15] = 8, byte(s.wl.w.pos.seg)
	junk[walHeaderLen+3], junk[walHeaderLen+15] = 8, byte(s.wl.w.pos.seg+7)
	if _, err := f.WriteAt(junk[:], end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = walTestStore(t, snapshot, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, want1, want2)
}

// TestWALRecycledSegment: a released segment is reused under a new number
// and its old records are not replayed.
func TestWALRecycledSegment(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	pub := func(id uint64) []op {
		return []op{{kind: opPublish, msgID: id, msg: walMsg(id), qs: []QueueSeq{{QueueID: 1, Seq: id, MsgID: id}}}}
	}
	for id := uint64(1); id <= 20; id++ {
		if err := w.appendOps(pub(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.start(w.pos.seg + 1); err != nil {
		t.Fatal(err)
	}
	if err := w.release(w.pos.seg); err != nil {
		t.Fatal(err)
	}
	if len(w.spares) != 1 {
		t.Fatalf("spares = %v", w.spares)
	}
	// The next segment takes the spare file, with segment 1's records
	// still in it past what is written now.
	if err := w.start(w.pos.seg + 1); err != nil {
		t.Fatal(err)
	}
	if err := w.appendOps(pub(100)); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(segName(dir, w.pos.seg)); err != nil || st.Size() < 20*100 {
		t.Fatalf("recycled segment: %v, %v", st, err)
	}
	w.close()
	var ids []uint64
	if _, err := replayWAL(dir, walPos{}, replayOptions{}, func(p []byte) error {
		ops, err := walDecode(p)
		for _, o := range ops {
			ids = append(ids, o.msgID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []uint64{100}) {
		t.Fatalf("replayed %v, want [100]", ids)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 {
		t.Fatalf("files %v", m)
	}
}

// TestWALWriteError: a failed log write fails its ops and nothing else; the
// log goes on in a new segment and a restart finds every op that succeeded.
func TestWALWriteError(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	q1, q2 := walQueues(t, s)
	walWait(t, func(done func(error)) { s.Publish(1, walMsg(1), []QueueSeq{{QueueID: q1, Seq: 1, MsgID: 1}}, done) })
	// Break the segment's file under the writer: the next write fails.
	if err := Check(s); err != nil { // runs on the committer: no race with it
		t.Fatal(err)
	}
	s.wl.w.f.Close()
	ch := make(chan error, 1)
	s.Publish(2, walMsg(2), []QueueSeq{{QueueID: q1, Seq: 2, MsgID: 2}}, func(err error) { ch <- err })
	if err := <-ch; err == nil {
		t.Fatal("publish on a broken log succeeded")
	}
	walWait(t, func(done func(error)) { s.Publish(3, walMsg(3), []QueueSeq{{QueueID: q2, Seq: 3, MsgID: 3}}, done) })
	snapshot := d.clone()
	s.Close()
	s = walTestStore(t, snapshot, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, []string{"1:1"}, []string{"3:3"})
}

// TestWALApplyFailure: when applying the log to the kv fails, the
// checkpoint stays, so a restart replays what the kv missed.
func TestWALApplyFailure(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	q1, q2 := walQueues(t, s)
	walWait(t, func(done func(error)) { s.Publish(1, walMsg(1), []QueueSeq{{QueueID: q1, Seq: 1, MsgID: 1}}, done) })
	d.FailCommits(func() error { return fmt.Errorf("disk on fire") })
	if err := s.Sync(); err != nil {
		t.Fatal(err) // the apply failed, but the ops are durable in the log
	}
	d.FailCommits(nil)
	walWait(t, func(done func(error)) { s.Publish(2, walMsg(2), []QueueSeq{{QueueID: q2, Seq: 2, MsgID: 2}}, done) })
	s.Close()
	s = walTestStore(t, d, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, []string{"1:1"}, []string{"2:2"})
}

// clone copies the disk's committed state: what a crash would leave.
func (d *MemoryDisk) clone() *MemoryDisk {
	d.mu.RLock()
	defer d.mu.RUnlock()
	c := NewMemoryDisk()
	for k, v := range d.data {
		c.data[k] = v
	}
	return c
}

// TestWALCompactKeepsDeliveredMarks: when pending bytes pass the limit,
// publishes already settled are folded away before the apply, and a
// delivered mark folded into a pending publish survives until its apply.
func TestWALCompactKeepsDeliveredMarks(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	defer s.Close()
	s.wl.pendAge = time.Hour // only the byte limit applies, however slow the machine
	q1, _ := walQueues(t, s)
	big := func(id uint64, n int) MessageRecord {
		return MessageRecord{RoutingKey: fmt.Sprint(id), Body: bytes.Repeat([]byte{byte(id)}, n)}
	}
	pub := func(id uint64, m MessageRecord) {
		walWait(t, func(done func(error)) { s.Publish(id, m, []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}, done) })
	}
	pub(1, big(1, walPendBytes/4))
	pub(2, big(2, walPendBytes*5/16))
	pub(3, big(3, walPendBytes*5/16))
	s.Delivered([]QueueSeq{{QueueID: q1, Seq: 1}})
	walWait(t, func(done func(error)) { s.Settle([]QueueSeq{{QueueID: q1, Seq: 2}, {QueueID: q1, Seq: 3}}, done) })
	// This batch takes pending to the limit: 2 and 3 fold away (and the
	// delivered mark into 1), and 1 and 4 stay pending: 3/8 of the limit
	// is under the apply threshold.
	pub(4, big(4, walPendBytes/8))
	var pending int
	var folded uint64
	// The probe runs on the committer after pub 4's batch is done.
	if err := s.submitWait(op{kind: opProbe, probe: func() {
		pending, folded = len(s.wl.pend.ops), s.Stats().Folded
	}}); err != nil {
		t.Fatal(err)
	}
	if pending != 2 || folded != 2 {
		t.Fatalf("after the compaction: %d ops pending, %d entries folded; want 2 and 2", pending, folded)
	}
	var got []string
	if _, err := s.RecoverQueue(q1, func(e RecoveredEntry) error {
		got = append(got, fmt.Sprintf("%d:%v:%d", e.Seq, e.Redelivered, len(e.Msg.Body)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("1:true:%d", walPendBytes/4), fmt.Sprintf("4:false:%d", walPendBytes/8)}
	if !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

// TestWALRecordLimit: a batch whose encoding passes the record limit is
// logged as several records and replayed whole; an Atomic op that no
// record can hold is refused with ErrTooLarge before anything of it is
// logged, so nothing acknowledged is unreadable by a replay.
func TestWALRecordLimit(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	s.wl.pendAge = time.Hour
	q1, q2 := walQueues(t, s)
	s.wl.w.maxPayload = 4 << 10 // set before the next op reaches the committer
	// Hold the committer so that every op below lands in one batch.
	release := make(chan struct{})
	s.submit(op{kind: opProbe, probe: func() { <-release }})
	const n = 100
	acked := make(chan error, n+1)
	var want1 []string
	for id := uint64(1); id <= n; id++ {
		s.Publish(id, walMsg(id), []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}, func(err error) { acked <- err })
		want1 = append(want1, fmt.Sprintf("%d:%d", id, id))
	}
	big := MessageRecord{RoutingKey: "big", Body: make([]byte, 8<<10)}
	tooBig := make(chan error, 1)
	s.Atomic([]PublishOp{{MsgID: n + 1, Msg: big, Entries: []QueueSeq{{QueueID: q2, Seq: 1, MsgID: n + 1}}}}, nil, func(err error) { tooBig <- err })
	close(release)
	for range n {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-tooBig; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Atomic op over the record limit: done(%v), want ErrTooLarge", err)
	}
	snapshot := d.clone() // a crash: only the log has the publishes
	if s.pendCount.Load() == 0 {
		t.Fatal("nothing pending: the test does not exercise the replay")
	}
	s.Close()
	records := 0
	if _, err := replayWAL(dir, walPos{}, replayOptions{}, func([]byte) error { records++; return nil }); err != nil {
		t.Fatal(err)
	}
	if records < 3 {
		t.Fatalf("%d records for %d publishes over a 4 KiB record limit", records, n)
	}
	s = walTestStore(t, snapshot, dir)
	defer s.Close()
	walCheck(t, s, q1, q2, want1, nil)
}

// walRecords returns the offsets of the records in segment file name of
// segment seg, markers included.
func walRecords(t *testing.T, name string, seg uint64) []int64 {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	var offs []int64
	for off := int64(0); ; {
		p, _, err := readRecord(f, st.Size(), seg, off)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			return offs
		}
		offs = append(offs, off)
		off += walHeaderLen + int64(len(p))
	}
}

func flipByte(t *testing.T, name string, off int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// crashedLog runs the workload and returns a snapshot of the kv and a copy
// of the log directory as a crash would leave them.
func crashedLog(t *testing.T, roll bool) (d *MemoryDisk, dir string, q1, q2 uint64, want1, want2 []string) {
	t.Helper()
	live := t.TempDir()
	var copied string
	d = NewMemoryDisk()
	s := walTestStore(t, d, live)
	s.wl.pendAge = time.Hour // no apply by age: every record stays to replay
	q1, q2 = walQueues(t, s)
	for id := uint64(1); id <= 40; id++ {
		es := []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}
		if id%2 == 0 {
			es = append(es, QueueSeq{QueueID: q2, Seq: id, MsgID: id})
		}
		walWait(t, func(done func(error)) { s.Publish(id, walMsg(id), es, done) })
		if roll && id == 20 {
			if err := s.submitWait(op{kind: opProbe, probe: func() {
				if err := s.wl.w.start(s.wl.w.pos.seg + 1); err != nil {
					t.Error(err)
				}
			}}); err != nil {
				t.Fatal(err)
			}
		}
		want1 = append(want1, fmt.Sprintf("%d:%d", id, id))
		if id%2 == 0 {
			want2 = append(want2, fmt.Sprintf("%d:%d", id, id))
		}
	}
	// The crash: the committer is held while the kv and the log files are
	// copied, so nothing is applied in between.
	if err := s.submitWait(op{kind: opProbe, probe: func() {
		if s.pendCount.Load() == 0 {
			t.Error("nothing pending: the replay is not exercised")
		}
		d = d.clone()
		copied = copyDir(t, live)
	}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return d, copied, q1, q2, want1, want2
}

// TestWALCorruptRecord: a record in the middle of the log that fails its
// checksum, with valid records after it, is damage, not a torn tail: Open
// refuses with an error naming the file and the offset; with the repair
// option it drops that record, says so, and replays everything else.
func TestWALCorruptRecord(t *testing.T) {
	d, dir, q1, q2, want1, want2 := crashedLog(t, false)
	segs, _, _ := listSegments(dir)
	name := segName(dir, segs[len(segs)-1])
	offs := walRecords(t, name, segs[len(segs)-1])
	if len(offs) < 10 {
		t.Fatalf("%d records", len(offs))
	}
	victim := offs[5]
	flipByte(t, name, victim+walHeaderLen+3)
	_, err := newEngine(memKV{d.clone()}, nil, logOptions{dir: dir})
	var ce *CorruptLogError
	if !errors.As(err, &ce) || ce.File != name || ce.Offset != victim || ce.Next != offs[6] {
		t.Fatalf("open over a damaged record at %d of %s: %v", victim, name, err)
	}
	if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprint(victim)) || !strings.Contains(err.Error(), "--repair-message-log") {
		t.Fatalf("the error does not name the file, the offset and the repair option: %v", err)
	}
	var logs []string
	s, err := newEngine(memKV{d}, func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }, logOptions{dir: dir, repair: true})
	if err != nil {
		t.Fatalf("open with repair: %v", err)
	}
	defer s.Close()
	if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "repair") && strings.Contains(l, name) }) {
		t.Fatalf("repair said nothing about what it dropped: %q", logs)
	}
	// Record 5 (after the marker and the definitions' batches) held one
	// publish: exactly that message is gone.
	got1 := walEntries(t, s, q1)
	got2 := walEntries(t, s, q2)
	if len(got1)+len(got2) != len(want1)+len(want2)-1 && len(got1)+len(got2) != len(want1)+len(want2)-2 {
		t.Fatalf("after the repair: q1 %v q2 %v; want all but one message", got1, got2)
	}
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
}

// TestWALCorruptSegmentEnd: the last record of a segment that is not the
// last one is damaged. No valid record follows it in its file, but the
// next segment's marker says where the segment ends, so this too is damage.
func TestWALCorruptSegmentEnd(t *testing.T) {
	d, dir, _, _, _, _ := crashedLog(t, true)
	segs, _, _ := listSegments(dir)
	if len(segs) < 2 {
		t.Fatalf("segments %v", segs)
	}
	name := segName(dir, segs[len(segs)-2])
	offs := walRecords(t, name, segs[len(segs)-2])
	victim := offs[len(offs)-1]
	flipByte(t, name, victim+walHeaderLen+1)
	_, err := newEngine(memKV{d}, nil, logOptions{dir: dir})
	var ce *CorruptLogError
	if !errors.As(err, &ce) || ce.File != name || ce.Offset != victim {
		t.Fatalf("open over a damaged segment end at %d of %s: %v", victim, name, err)
	}
}

// TestWALRandomDamage flips a byte at random offsets of a crashed log:
// each time, Open either refuses naming the damaged file, or every
// acknowledged message is there. (A damaged last record of the last
// segment reads as a torn write and is dropped: that record is skipped
// here; a crash can leave it torn.)
func TestWALRandomDamage(t *testing.T) {
	d, dir, q1, q2, want1, want2 := crashedLog(t, true)
	segs, _, _ := listSegments(dir)
	rng := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for round := range 40 {
		n := segs[rng.IntN(len(segs))]
		offs := walRecords(t, segName(dir, n), n)
		end := offs[len(offs)-1]
		if n != segs[len(segs)-1] {
			st, _ := os.Stat(segName(dir, n))
			end = st.Size()
		}
		work := copyDir(t, dir)
		name := segName(work, n)
		at := rng.Int64N(end)
		flipByte(t, name, at)
		s, err := newEngine(memKV{d.clone()}, nil, logOptions{dir: work})
		if err != nil {
			var ce *CorruptLogError
			if !errors.As(err, &ce) || ce.File != name {
				t.Fatalf("round %d: byte %d of %s flipped: %v", round, at, name, err)
			}
			refused++
			continue
		}
		walCheck(t, s, q1, q2, want1, want2)
		s.Close()
	}
	if refused == 0 {
		t.Fatal("no flip was refused: the test does not reach the records")
	}
	t.Logf("%d of 40 flips refused, the rest lost nothing", refused)
}

// TestWALDiskWatch: the log looks at the free space before it writes;
// when a record would leave less than the limit, it calls OnDiskLow at
// once and deletes its spare segments, and it goes on looking before every
// record until there is room again.
func TestWALDiskWatch(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	var free atomic.Uint64
	free.Store(1 << 40)
	lows := make(chan uint64, 100)
	s, err := newEngine(memKV{d}, nil, logOptions{dir: dir, diskFreeLimit: 50 << 20, onDiskLow: func(f uint64) { lows <- f }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	looks := atomic.Int64{}
	var clock atomic.Int64 // ns since the epoch
	clock.Store(time.Now().UnixNano())
	// Set before the next op reaches the committer.
	s.wl.w.disk.statfs = func(string) (uint64, bool) { looks.Add(1); return free.Load(), true }
	s.wl.w.disk.now = func() time.Time { return time.Unix(0, clock.Load()) }
	q1, _ := walQueues(t, s)
	pub := func(id uint64) {
		walWait(t, func(done func(error)) { s.Publish(id, walMsg(id), []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}, done) })
	}
	pub(1)
	// Two spare segments, as after a drained backlog.
	if err := s.submitWait(op{kind: opProbe, probe: func() {
		for range 2 {
			if err := s.wl.w.start(s.wl.w.pos.seg + 1); err != nil {
				t.Error(err)
			}
		}
		if err := s.wl.w.release(s.wl.w.pos.seg); err != nil {
			t.Error(err)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	spares, _ := filepath.Glob(filepath.Join(dir, "spare-*"))
	if len(spares) != 2 {
		t.Fatalf("spares %v", spares)
	}
	select {
	case f := <-lows:
		t.Fatalf("OnDiskLow(%d) with 1 TiB free", f)
	default:
	}
	free.Store(50<<20 + 100) // the next record takes it under the limit
	pub(2)
	select {
	case f := <-lows:
		t.Fatalf("OnDiskLow(%d) before a look was due", f)
	default:
	}
	clock.Add(int64(diskCheckAge))
	pub(7)
	select {
	case f := <-lows:
		if f != 50<<20+100 {
			t.Fatalf("OnDiskLow(%d)", f)
		}
	default:
		t.Fatal("OnDiskLow not called before the write that passes the limit")
	}
	if spares, _ := filepath.Glob(filepath.Join(dir, "spare-*")); len(spares) != 0 {
		t.Fatalf("spare segments kept on a full disk: %v", spares)
	}
	// While low, every record looks again.
	before := looks.Load()
	pub(3)
	pub(4)
	if looks.Load()-before < 2 {
		t.Fatalf("%d looks for two records on a low disk", looks.Load()-before)
	}
	free.Store(1 << 40)
	pub(5)
	before = looks.Load()
	clock.Add(int64(diskCheckAge / 2))
	pub(6)
	if looks.Load() != before {
		t.Fatal("still looking before every record with room again")
	}
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
}

// TestWALApplyRetry: after an apply fails (a full disk, say), the log is
// replayed into the kv once the apply works again, without a restart: the
// checkpoint moves on, the old segments are trimmed, and nothing is lost
// or counted twice.
func TestWALApplyRetry(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	defer s.Close()
	s.wl.retryAge = 0 // before the first op: the committer reads it after
	q1, q2 := walQueues(t, s)
	walWait(t, func(done func(error)) { s.Publish(1, walMsg(1), []QueueSeq{{QueueID: q1, Seq: 1, MsgID: 1}}, done) })
	d.FailCommits(func() error { return fmt.Errorf("no space left on device") })
	if err := s.Sync(); err != nil {
		t.Fatal(err) // the apply failed, but the ops are durable in the log
	}
	var held error
	probe := func() {
		t.Helper()
		if err := s.submitWait(op{kind: opProbe, probe: func() { held = s.wl.held }}); err != nil {
			t.Fatal(err)
		}
	}
	probe()
	if held == nil {
		t.Fatal("the failed apply was not noticed")
	}
	walWait(t, func(done func(error)) { s.Publish(2, walMsg(2), []QueueSeq{{QueueID: q2, Seq: 2, MsgID: 2}}, done) })
	// A new segment while held: it must go once the retry succeeds.
	if err := s.submitWait(op{kind: opProbe, probe: func() {
		if err := s.wl.w.start(s.wl.w.pos.seg + 1); err != nil {
			t.Error(err)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	walWait(t, func(done func(error)) { s.Publish(3, walMsg(3), []QueueSeq{{QueueID: q1, Seq: 3, MsgID: 3}}, done) })
	d.FailCommits(nil)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	probe()
	if held != nil {
		t.Fatalf("still held after the disk recovered: %v", held)
	}
	var ckpt, pos walPos
	if err := s.submitWait(op{kind: opProbe, probe: func() { ckpt, pos = s.wl.ckpt, s.wl.w.pos }}); err != nil {
		t.Fatal(err)
	}
	if ckpt != pos {
		t.Fatalf("checkpoint %v, log end %v: the log is not trimmed", ckpt, pos)
	}
	if segs, _, _ := listSegments(dir); len(segs) != 1 {
		t.Fatalf("segments %v kept after the retry", segs)
	}
	walCheck(t, s, q1, q2, []string{"1:1", "3:3"}, []string{"2:2"})
}

// TestWALNoSegmentReuse: once every segment was released (a clean stop),
// the next start must not number a segment as one before it: the recycled
// file still holds that segment's records, which would read as valid
// (replayed, or taken for damage) after a crash.
func TestWALNoSegmentReuse(t *testing.T) {
	d, dir := NewMemoryDisk(), t.TempDir()
	s := walTestStore(t, d, dir)
	q1, _ := walQueues(t, s)
	var all []QueueSeq
	for id := uint64(1); id <= 20; id++ {
		walWait(t, func(done func(error)) { s.Publish(id, walMsg(id), []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}, done) })
		all = append(all, QueueSeq{QueueID: q1, Seq: id})
	}
	walWait(t, func(done func(error)) { s.Settle(all, done) })
	s.Close()
	// A start with nothing to do releases the segment: only a spare is
	// left, as after a crash check.
	s = walTestStore(t, d, dir)
	s.Close()
	if sp, _ := filepath.Glob(filepath.Join(dir, "spare-*")); len(sp) != 1 {
		t.Fatalf("spares %v", sp)
	}
	if segs, _, _ := listSegments(dir); len(segs) != 0 {
		t.Fatalf("segments %v", segs)
	}
	s = walTestStore(t, d, dir)
	s.wl.pendAge = time.Hour
	walWait(t, func(done func(error)) { s.Publish(21, walMsg(21), []QueueSeq{{QueueID: q1, Seq: 21, MsgID: 21}}, done) })
	var snap *MemoryDisk
	var copied string
	if err := s.submitWait(op{kind: opProbe, probe: func() { snap, copied = d.clone(), copyDir(t, dir) }}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := newEngine(memKV{snap}, nil, logOptions{dir: copied})
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	defer s.Close()
	if got := walEntries(t, s, q1); !slices.Equal(got, []string{"21:21"}) {
		t.Fatalf("q1 = %v, want [21:21]", got)
	}
}

// TestWALFullDiskSegments: on a full disk every log write fails; the
// failed writes must not leave a new (empty) segment each, and once there
// is room the log goes on and a restart finds what was confirmed.
func TestWALFullDiskSegments(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	d := NewMemoryDisk()
	s := walTestStore(t, d, dir)
	s.wl.pendAge = time.Hour
	q1, _ := walQueues(t, s)
	big := func(id uint64) MessageRecord {
		return MessageRecord{RoutingKey: fmt.Sprint(id), Body: bytes.Repeat([]byte{byte(id)}, 300<<10)}
	}
	var ok []string
	failed := 0
	for id := uint64(1); id <= 40; id++ {
		ch := make(chan error, 1)
		s.Publish(id, big(id), []QueueSeq{{QueueID: q1, Seq: id, MsgID: id}}, func(err error) { ch <- err })
		if err := <-ch; err != nil {
			failed++
		} else {
			ok = append(ok, fmt.Sprintf("%d:%d", id, id))
		}
	}
	if failed < 20 || len(ok) == 0 {
		t.Fatalf("%d publishes failed, %d succeeded: the disk did not fill as planned", failed, len(ok))
	}
	if segs, _, _ := listSegments(dir); len(segs) > 2 {
		t.Fatalf("%d failed writes left %d segments: %v", failed, len(segs), segs)
	}
	snap := d.clone()
	s.Close()
	// Room again, as when an operator frees some: the replay needs it.
	if out, err := exec.Command("mount", "-o", "remount,size=64m", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	s, err := newEngine(memKV{snap}, nil, logOptions{dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	if _, err := s.RecoverQueue(q1, func(e RecoveredEntry) error {
		got = append(got, fmt.Sprintf("%d:%d", e.Seq, e.MsgID))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ok) {
		t.Fatalf("after the restart %v, want the confirmed %v", got, ok)
	}
}
