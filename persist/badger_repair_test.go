package persist_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warrenmq/warren/persist"
)

// publishN stores n messages in queue q, ids from first, and waits for
// them.
func publishN(t *testing.T, s persist.Store, q *persist.QueueRecord, first, n uint64) map[uint64]persist.MessageRecord {
	t.Helper()
	want := map[uint64]persist.MessageRecord{}
	for id := first; id < first+n; id++ {
		m := persist.MessageRecord{RoutingKey: q.Name, Props: []byte{byte(id)}, Body: bytes.Repeat([]byte{byte(id), byte(id >> 8)}, 50+int(id%5)*400)}
		done := make(chan error, 1)
		s.Publish(id, m, []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want[id] = m
	}
	return want
}

func recoverAll(t *testing.T, s persist.Store, qid uint64) (map[uint64]persist.MessageRecord, error) {
	t.Helper()
	got := map[uint64]persist.MessageRecord{}
	_, err := s.RecoverQueue(qid, func(e persist.RecoveredEntry) error {
		got[e.MsgID] = e.Msg
		return nil
	})
	return got, err
}

func sameMessages(t *testing.T, what string, got, want map[uint64]persist.MessageRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok || !bytes.Equal(g.Body, w.Body) || g.RoutingKey != w.RoutingKey || !bytes.Equal(g.Props, w.Props) {
			t.Fatalf("%s: message %d missing or different", what, id)
		}
	}
}

func tables(t *testing.T, dir string) []string {
	t.Helper()
	ts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.Sort(ts)
	return ts
}

// logSink collects what a store logs.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(f string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
	l.mu.Unlock()
}

func (l *logSink) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestBadgerDamagedTable: a table with a damaged block stops Open with an
// error naming the table file and the repair option; with RepairStore,
// Open moves the table to a damaged-* folder, says so, and opens the
// rest: a queue whose messages were in other tables has all of them.
func TestBadgerDamagedTable(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	// Queue a's messages go to the tables of the first Close (Close
	// flushes the memtables), queue b's to a table of the second.
	s := openBadger(t, dir, o)
	qa := &persist.QueueRecord{VHost: "/", Name: "a", Durable: true}
	if err := s.SaveQueue(qa); err != nil {
		t.Fatal(err)
	}
	wantA := publishN(t, s, qa, 1, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := tables(t, dir)
	s = openBadger(t, dir, o)
	qb := &persist.QueueRecord{VHost: "/", Name: "b", Durable: true}
	if err := s.SaveQueue(qb); err != nil {
		t.Fatal(err)
	}
	wantB := publishN(t, s, qb, 101, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var fresh []string
	for _, f := range tables(t, dir) {
		if !slices.Contains(before, f) {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) == 0 || len(before) == 0 {
		t.Fatalf("tables before %v, after %v: want new ones", before, tables(t, dir))
	}
	victim := fresh[len(fresh)-1]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[40] ^= 0x55 // inside the first block
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(victim)

	_, err = persist.Open(dir, o)
	var de *persist.DamagedStoreError
	if !errors.As(err, &de) {
		t.Fatalf("open of a damaged table: %v, want a DamagedStoreError", err)
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "badger table "+name+" is damaged") || !strings.Contains(err.Error(), "--repair-store") {
		t.Fatalf("the error does not name %s and the repair option: %v", name, err)
	}
	if len(de.Files) != 1 || de.Files[0].Name != name || !de.Repairable {
		t.Fatalf("damaged files %+v, want only %s, repairable", de.Files, name)
	}

	var log logSink
	ro := o
	ro.RepairStore = true
	ro.Logger = log.logf
	s, err = persist.Open(dir, ro)
	if err != nil {
		t.Fatalf("open with repair: %v", err)
	}
	defer s.Close()
	t.Logf("repair said:\n%s", log.text())
	asides, _ := filepath.Glob(filepath.Join(dir, "damaged-*"))
	if len(asides) != 1 {
		t.Fatalf("damaged folders %v, want one", asides)
	}
	for _, f := range []string{name, "MANIFEST"} {
		if _, err := os.Stat(filepath.Join(asides[0], f)); err != nil {
			t.Fatalf("%s is not in %s: %v", f, asides[0], err)
		}
	}
	if moved, _ := os.ReadFile(filepath.Join(asides[0], name)); !bytes.Equal(moved, b) {
		t.Fatalf("%s in %s is not the damaged file", name, asides[0])
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still in the store: %v", name, err)
	}
	if !strings.Contains(log.text(), name) || !strings.Contains(log.text(), "gone") {
		t.Fatalf("the repair does not say what it moved and what that means:\n%s", log.text())
	}
	got, err := recoverAll(t, s, qa.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "queue a after the repair", got, wantA)
	// Of queue b, whatever is left must read back exactly.
	gotB, _ := recoverAll(t, s, qb.ID)
	for id, g := range gotB {
		if w := wantB[id]; !bytes.Equal(g.Body, w.Body) {
			t.Fatalf("queue b: message %d reads back damaged", id)
		}
	}
	t.Logf("queue b: %d of %d messages left", len(gotB), len(wantB))
	// The store stays usable and opens again without repair.
	more := publishN(t, s, qa, 1000, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	got, err = recoverAll(t, s, qa.ID)
	if err != nil {
		t.Fatal(err)
	}
	for id, m := range more {
		wantA[id] = m
	}
	sameMessages(t, "queue a after a reopen", got, wantA)
}

// damageBody flips a byte inside the body of the first of ids (publishN's
// bodies over 1 KiB, so in the value log) found in the newest value-log
// file that has one, and returns that id and the file. The first: an
// entry with nothing valid after it reads as a write torn by a crash.
func damageBody(t *testing.T, dir string, ids ...uint64) (uint64, string) {
	t.Helper()
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	slices.Sort(vlogs)
	slices.Reverse(vlogs)
	for _, f := range vlogs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, at := uint64(0), len(b)
		for _, id := range ids {
			if i := bytes.Index(b, bytes.Repeat([]byte{byte(id), byte(id >> 8)}, 40)); i >= 0 && i < at {
				first, at = id, i
			}
		}
		if first == 0 {
			continue
		}
		b[at+100] ^= 0xff
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return first, filepath.Base(f)
	}
	t.Fatalf("none of messages %v has its body in %v", ids, vlogs)
	return 0, ""
}

// TestBadgerDamagedValue: a body that fails its checksum in an older
// value-log file fails RecoverQueue with an error naming the message, the
// file and the repair option; damage in the newest file (which Badger's
// open would cut at the damage, silently) stops Open naming it. With
// RepairStore exactly the damaged messages are dropped, each with a
// notice, and all others are there.
func TestBadgerDamagedValue(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	want := publishN(t, s, q, 1, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Each open starts a new value-log file.
	s = openBadger(t, dir, o)
	for id, m := range publishN(t, s, q, 101, 100) {
		want[id] = m
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, oldFile := damageBody(t, dir, 77) // 1700 bytes

	s = openBadger(t, dir, o)
	_, err := recoverAll(t, s, q.ID)
	if err == nil || !strings.Contains(err.Error(), "badger value log "+oldFile+" is damaged") || !strings.Contains(err.Error(), "--repair-store") ||
		!strings.Contains(err.Error(), fmt.Sprintf("message %d", old)) {
		t.Fatalf("recovery of a damaged body: %v; want an error naming message %d, %s and the repair option", err, old, oldFile)
	}
	t.Logf("refused: %v", err)
	// The store takes new messages meanwhile, in a new value-log file.
	for id, m := range publishN(t, s, q, 201, 10) {
		want[id] = m
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	newer, newFile := damageBody(t, dir, 202, 203, 204, 206, 207, 208, 209)
	if newFile == oldFile {
		t.Fatalf("messages %d and %d are both in %s", old, newer, oldFile)
	}
	_, err = persist.Open(dir, o)
	var de *persist.DamagedStoreError
	if !errors.As(err, &de) || len(de.Files) != 1 || de.Files[0].Name != newFile || !strings.Contains(err.Error(), "--repair-store") {
		t.Fatalf("open with the newest value log damaged: %v; want a DamagedStoreError naming %s", err, newFile)
	}
	t.Logf("refused: %v", err)

	var log logSink
	ro := o
	ro.RepairStore = true
	ro.Logger = log.logf
	s = openBadger(t, dir, ro)
	got, err := recoverAll(t, s, q.ID)
	if err != nil {
		t.Fatalf("recovery with repair: %v", err)
	}
	t.Logf("repair said:\n%s", log.text())
	for _, n := range []string{fmt.Sprintf("message %d dropped", old), fmt.Sprintf("message %d dropped", newer), oldFile, newFile} {
		if !strings.Contains(log.text(), n) {
			t.Fatalf("the repair does not say %q:\n%s", n, log.text())
		}
	}
	delete(want, old)
	delete(want, newer)
	sameMessages(t, "after the repair", got, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The dropped entries are gone for good: no repair needed again.
	s = openBadger(t, dir, o)
	defer s.Close()
	got, err = recoverAll(t, s, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "after a reopen", got, want)
}

// TestBadgerMissingTable: a table the MANIFEST lists but that is gone (a
// repair interrupted after the move, or a file lost) stops Open naming
// it; RepairStore removes it from the MANIFEST and opens the rest.
func TestBadgerMissingTable(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	qa := &persist.QueueRecord{VHost: "/", Name: "a", Durable: true}
	if err := s.SaveQueue(qa); err != nil {
		t.Fatal(err)
	}
	wantA := publishN(t, s, qa, 1, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := tables(t, dir)
	s = openBadger(t, dir, o)
	qb := &persist.QueueRecord{VHost: "/", Name: "b", Durable: true}
	if err := s.SaveQueue(qb); err != nil {
		t.Fatal(err)
	}
	publishN(t, s, qb, 101, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after := tables(t, dir)
	victim := after[len(after)-1]
	if slices.Contains(before, victim) {
		t.Fatalf("no new table: %v, then %v", before, after)
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(victim)
	_, err := persist.Open(dir, o)
	if err == nil || !strings.Contains(err.Error(), "badger table "+name+" is listed in the MANIFEST but missing") {
		t.Fatalf("open with a missing table: %v", err)
	}
	ro := o
	ro.RepairStore = true
	s = openBadger(t, dir, ro)
	defer s.Close()
	got, err := recoverAll(t, s, qa.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "queue a after the repair", got, wantA)
}

// TestBadgerMissingValueLog: bodies in a value-log file that is gone fail
// RecoverQueue naming the file; with RepairStore only their messages are
// dropped.
func TestBadgerMissingValueLog(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	first := publishN(t, s, q, 1, 20) // in 000001.vlog, those over 1 KiB
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	second := publishN(t, s, q, 101, 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "000001.vlog")); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	_, err := recoverAll(t, s, q.ID)
	if err == nil || !strings.Contains(err.Error(), "badger value log 000001.vlog is missing") || !strings.Contains(err.Error(), "--repair-store") {
		t.Fatalf("recovery with a value-log file gone: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ro := o
	ro.RepairStore = true
	s = openBadger(t, dir, ro)
	defer s.Close()
	got, err := recoverAll(t, s, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := second
	for id, m := range first {
		if len(m.Body) <= 1024 { // in the tree, not in the value log
			want[id] = m
		}
	}
	sameMessages(t, "after the repair", got, want)
}

// TestBadgerManifestCut: a damaged length field in the MANIFEST reads, to
// Badger, as a change set torn by a crash: its open cuts the MANIFEST
// there and deletes every table it then does not list. Open refuses
// instead, naming the MANIFEST and the tables; the repair moves those to
// a damaged-* folder (never deleting them) and opens the rest.
func TestBadgerManifestCut(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	publishN(t, s, q, 1, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts := tables(t, dir)
	mpath := filepath.Join(dir, "MANIFEST")
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	// Magic (8 bytes), then the empty change set of a new MANIFEST (length
	// and CRC, 8 bytes), then the first real one: its length one more
	// than the bytes left.
	binary.BigEndian.PutUint32(b[16:20], uint32(len(b)-24+1))
	if err := os.WriteFile(mpath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = persist.Open(dir, o)
	if err == nil || !strings.Contains(err.Error(), "badger MANIFEST is damaged") || !strings.Contains(err.Error(), filepath.Base(ssts[0])) ||
		!strings.Contains(err.Error(), "--repair-store to move") {
		t.Fatalf("open with a cut MANIFEST: %v", err)
	}
	t.Logf("refused: %v", err)
	if !slices.Equal(tables(t, dir), ssts) {
		t.Fatalf("tables %v after the refused open, want %v", tables(t, dir), ssts)
	}
	ro := o
	ro.RepairStore = true
	s = openBadger(t, dir, ro)
	defer s.Close()
	for _, f := range ssts {
		if m, _ := filepath.Glob(filepath.Join(dir, "damaged-*", filepath.Base(f))); len(m) != 1 {
			t.Fatalf("%s is not in a damaged-* folder", filepath.Base(f))
		}
	}
	if _, err := recoverAll(t, s, q.ID); err != nil {
		t.Fatal(err)
	}
}
