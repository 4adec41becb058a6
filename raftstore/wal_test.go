package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// lastSegment is the path of dir's newest segment holding records other
// than a seal.
func segPaths(t *testing.T, dir string) []string {
	t.Helper()
	seqs, err := listSegments(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, q := range seqs {
		ps = append(ps, filepath.Join(dir, "wal", segName(q)))
	}
	return ps
}

func storeN(t *testing.T, g *Group, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := g.StoreLog(testLog(i, fmt.Sprintf("e%d-", i)+strings.Repeat("x", int(i%300)))); err != nil {
			t.Fatal(err)
		}
	}
}

func checkRange(t *testing.T, g *Group, from, to uint64) {
	t.Helper()
	if f, l := must(g.FirstIndex()), must(g.LastIndex()); f != from || l != to {
		t.Fatalf("bounds %d..%d, want %d..%d", f, l, from, to)
	}
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := g.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := fmt.Sprintf("e%d-", i) + strings.Repeat("x", int(i%300)); string(l.Data) != want || l.Index != i {
			t.Fatalf("entry %d holds %q", i, l.Data)
		}
	}
}

// A torn tail (the last group commit cut short, or garbage past the last
// record) is cut at open: what was written before is there, the torn
// entry is not, and the log takes new entries and reopens again.
func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string, lastOff, lastLen int64)
	}{
		{"cut record", func(t *testing.T, path string, off, n int64) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			defer f.Close()
			// Zero the second half of the last record (the rest of a
			// preallocated file is zeros).
			f.WriteAt(make([]byte, n-n/2), off+n/2)
		}},
		{"flipped byte", func(t *testing.T, path string, off, n int64) {
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			defer f.Close()
			b := make([]byte, 1)
			f.ReadAt(b, off+n-3)
			b[0] ^= 1
			f.WriteAt(b, off+n-3)
		}},
		{"truncated file", func(t *testing.T, path string, off, n int64) {
			if err := os.Truncate(path, off+n-5); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			g := group(t, s, 3)
			storeN(t, g, 1, 50)
			g.mu.Lock()
			at := g.locs[len(g.locs)-1]
			g.mu.Unlock()
			s.Close()
			// The seal Close does not write: the segment ends with the
			// records (as after kill -9).
			path := filepath.Join(dir, "wal", segName(uint64(at.seq)))
			tc.tear(t, path, int64(at.off), int64(at.n))

			s = open(t, dir)
			g = group(t, s, 3)
			checkRange(t, g, 1, 49)
			storeN(t, g, 50, 60)
			s.Close()
			s = open(t, dir)
			defer s.Close()
			checkRange(t, group(t, s, 3), 1, 60)
		})
	}
}

// A segment that is not the last and does not end in a seal is damage:
// Open refuses it, naming the segment, rather than dropping what
// follows.
func TestDamagedSegmentRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, 1)
	storeN(t, g, 1, 600)
	s.Close()
	ps := segPaths(t, dir)
	if len(ps) < 4 {
		t.Fatalf("%d segments, want several", len(ps))
	}
	f, _ := os.OpenFile(ps[1], os.O_RDWR, 0)
	f.WriteAt([]byte{0xff, 0xff}, 100)
	f.Close()
	_, err = Open(dir, Options{SegmentBytes: 16 << 10})
	if err == nil || !strings.Contains(err.Error(), filepath.Base(ps[1])) {
		t.Fatalf("open of a damaged segment: %v", err)
	}
}

// Segments roll as they fill; once compaction (or a deleted group) leaves
// no live entry in the oldest, it goes; a mostly dead oldest segment
// pinned by another group's few entries has them copied to the head and
// goes too. A reopen sees the same entries.
func TestSegmentsReclaimed(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 32 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	pin := group(t, s, 1)
	storeN(t, pin, 1, 3) // three entries that stay
	busy := group(t, s, 2)
	for i := uint64(1); i <= 2000; i += 100 {
		storeN(t, busy, i, i+99)
		if err := busy.DeleteRange(1, i+49); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Copied == 0 {
		t.Fatalf("nothing copied forward: %+v", st)
	}
	// 2000 entries of ~200 bytes: ~400 KiB written, ~13 segments; what
	// is live is 50 entries and the three pinned.
	if st.Segments > 5 {
		t.Fatalf("%d segments on disk with a few KiB live", st.Segments)
	}
	if n := len(segPaths(t, dir)); n != st.Segments {
		t.Fatalf("%d segment files, stats say %d", n, st.Segments)
	}
	checkRange(t, pin, 1, 3)
	checkRange(t, busy, 1951, 2000)
	s.Close()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkRange(t, group(t, s, 1), 1, 3)
	checkRange(t, group(t, s, 2), 1951, 2000)
	if err := s.DeleteGroup(2); err != nil {
		t.Fatal(err)
	}
	storeN(t, group(t, s, 1), 4, 400)
	if n := s.Stats().Segments; n > 5 {
		t.Fatalf("%d segments after the busy group went", n)
	}
}

// An idle group whose last entries fill more than a quarter of the
// oldest segment (too live for that segment alone to be worth copying)
// does not pin the log: once most of the sealed log behind it is dead,
// its entries are copied on and the segments recycled, so a busy group
// that keeps compacting keeps the log at a few segments. A reopen sees
// both groups' entries.
func TestIdleGroupDoesNotPinLog(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 32 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	idle := group(t, s, 1)
	storeN(t, idle, 201, 260) // ~16 KiB: half a segment, then nothing
	busy := group(t, s, 2)
	maxSegs := 0
	for i := uint64(1); i <= 4000; i += 100 {
		storeN(t, busy, i, i+99)
		if err := busy.DeleteRange(1, i+49); err != nil {
			t.Fatal(err)
		}
		maxSegs = max(maxSegs, s.Stats().Segments)
	}
	// 4000 entries of ~200 bytes: ~800 KiB written, ~25 segments; what is
	// live is 50 busy entries and the 60 idle ones, about a segment.
	if st := s.Stats(); st.Segments > 6 || st.Copied == 0 {
		t.Fatalf("%d segments on disk (at most %d), %d entries copied, with ~25 KiB live", st.Segments, maxSegs, st.Copied)
	}
	checkRange(t, idle, 201, 260)
	checkRange(t, busy, 3951, 4000)
	s.Close()
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkRange(t, group(t, s, 1), 201, 260)
	checkRange(t, group(t, s, 2), 3951, 4000)
}

// putOld writes entries the way a store before the log did: in Badger,
// with the old encoding, and a commit index.
func putOld(t *testing.T, dir string, gid, from, to, commit uint64) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "log")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		for i := from; i <= to; i++ {
			l := testLog(i, fmt.Sprintf("e%d-", i)+strings.Repeat("x", int(i%300)))
			if err := txn.Set(logKey(gid, i), encodeLog(l)); err != nil {
				return err
			}
		}
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, commit)
		if err := txn.Set(commitKey(gid), v); err != nil {
			return err
		}
		return txn.Set(stableKey(gid, []byte("CurrentTerm")), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A store written before the log (entries in Badger) is moved into the
// log at open: entries, bounds, commit index and stable values as they
// were, nothing left in Badger; a move cut short (the old keys still
// there, part of them in the log) is done again with the same result.
func TestMigrateFromBadger(t *testing.T) {
	dir := t.TempDir()
	putOld(t, dir, 5, 10, 300, 250)
	putOld(t, dir, 9, 1, 7, 7)
	last9 := uint64(7)
	check := func(s *Store) {
		t.Helper()
		checkRange(t, group(t, s, 5), 10, 300)
		checkRange(t, group(t, s, 9), 1, last9)
		if c, _ := group(t, s, 5).GetCommitIndex(); c != 250 {
			t.Fatalf("commit index %d", c)
		}
		if v, err := group(t, s, 5).GetUint64([]byte("CurrentTerm")); err != nil || v != 250 {
			t.Fatalf("stable value %d %v", v, err)
		}
		s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindLog}})
			defer it.Close()
			if it.Rewind(); it.Valid() {
				t.Fatalf("Badger still holds an entry: %x", it.Item().Key())
			}
			return nil
		})
	}
	s := open(t, dir)
	check(s)
	storeN(t, group(t, s, 9), 8, 20)
	last9 = 20
	s.Close()
	s = open(t, dir)
	check(s)
	s.Close()

	// Cut short: group 5's keys are in Badger again (as if the marker
	// was never set), and the log holds them already.
	putOld(t, dir, 5, 10, 300, 250)
	s = open(t, dir)
	defer s.Close()
	check(s)
	ids, _ := s.GroupIDs()
	if len(ids) != 2 {
		t.Fatalf("GroupIDs %v", ids)
	}
	var l raft.Log
	if err := group(t, s, 5).GetLog(9, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 9: %v", err)
	}
}

// Reads of entries that are moved on and whose old segments are removed
// meanwhile always find them.
func TestReadsWhileReclaiming(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SegmentBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pin := group(t, s, 1)
	storeN(t, pin, 1, 20)
	busy := group(t, s, 2)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var l raft.Log
			idx := i%20 + 1
			if err := pin.GetLog(idx, &l); err != nil || l.Index != idx {
				errs <- fmt.Errorf("entry %d: %v", idx, err)
				return
			}
		}
	}()
	for i := uint64(1); i <= 1500; i += 100 {
		storeN(t, busy, i, i+99)
		if err := busy.DeleteRange(1, i+89); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if s.Stats().Copied == 0 {
		t.Fatal("nothing was copied on: the test did not test")
	}
}

// A store with traffic moves from the growing file it opened with to a
// zero-filled spare as soon as one is made, and later segments come from
// spares too.
func TestSpareTakenEarly(t *testing.T) {
	s, err := Open(t.TempDir(), Options{SegmentBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := group(t, s, 1)
	data := strings.Repeat("d", 64<<10)
	next := uint64(1)
	store := func() {
		t.Helper()
		if err := g.StoreLog(&raft.Log{Index: next, Term: 1, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	for s.cur.end < growingBytes+1 {
		store()
	}
	first := s.cur.seq
	deadline := time.Now().Add(30 * time.Second)
	for !s.spareReady.Load() {
		if time.Now().After(deadline) {
			t.Fatal("no spare made for a growing segment with traffic")
		}
		time.Sleep(5 * time.Millisecond)
	}
	store()
	if s.cur.seq == first || !s.cur.prealloc {
		t.Fatalf("still on segment %d (prealloc %v) with a spare ready", s.cur.seq, s.cur.prealloc)
	}
	for i := 0; i < 4*(4<<20)/len(data); i++ {
		store()
	}
	checkRangeData(t, g, 1, next-1, data)
}

func checkRangeData(t *testing.T, g *Group, from, to uint64, data string) {
	t.Helper()
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := g.GetLog(i, &l); err != nil || string(l.Data) != data {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
}

// Segments that one compaction frees are kept as spares, up to
// maxSpares, and the segments written next are made from them: no
// zero-fill while recycled spares are left.
func TestSparesRecycled(t *testing.T) {
	dir := t.TempDir()
	const size = 2 << 20
	s, err := Open(dir, Options{SegmentBytes: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := group(t, s, 1)
	data := strings.Repeat("r", 64<<10)
	next := uint64(1)
	spares := func() int {
		n := 0
		for i := range maxSpares {
			if fi, err := os.Stat(filepath.Join(dir, "wal", spareSlot(i))); err == nil && fi.Size() == size {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d spares)", what, spares())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	store := func() {
		t.Helper()
		if s.cur.seq > 1 && s.cur.end+int64(2*len(data)) > size {
			// Every segment after the first is made from a spare (only
			// those are recycled): the spare maker, which zero-fills
			// one after each roll, is waited for on a loaded machine.
			waitFor("a spare before the roll", func() bool { return spares() > 0 })
		}
		if err := g.StoreLog(&raft.Log{Index: next, Term: 1, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		next++
	}
	// Past the half of the current segment, which asks for a spare.
	for s.Stats().Segments < 2*maxSpares || s.cur.end <= size/2 {
		store()
	}
	// The spare the traffic asked for is made, so that the spare maker
	// is idle from here on.
	// (spareReady is set once the spare maker has counted its zero-fill:
	// the roll into the last segment cleared it.)
	waitFor("the spare asked for", func() bool { return spares() > 0 && s.spareReady.Load() })
	// Everything but the last entry goes: all segments but the last
	// ones are free at once.
	if err := g.DeleteRange(1, next-2); err != nil {
		t.Fatal(err)
	}
	waitFor("the freed segments to be kept as spares", func() bool { return spares() == maxSpares })
	if n := s.Stats().Segments; n > 3 { // the current one, and the last entry's
		t.Fatalf("%d segments left after the compaction", n)
	}
	filled := s.Stats().ZeroFilled
	// Three segments more (the first may start on a growing file, which
	// a spare replaces once it has 1 MiB): each from a recycled spare.
	start := s.cur.seq
	for s.cur.seq < start+uint64(maxSpares-1) {
		store()
		if s.cur.seq > start && !s.cur.prealloc {
			t.Fatalf("segment %d is not made from a spare", s.cur.seq)
		}
	}
	if got := s.Stats().ZeroFilled; got != filled {
		t.Fatalf("%d spares zero-filled with recycled ones left", got-filled)
	}
	if n := spares(); n != 1 {
		t.Fatalf("%d spares left, want 1", n)
	}
	checkRangeData(t, g, next-1, next-1, data)
}

// A store opened with Options.Spares makes that many spares in the
// background before any write, and the segments the first writes fill
// are made from them: none is zero-filled while the log takes writes.
func TestSparesPrepared(t *testing.T) {
	dir := t.TempDir()
	const size = 2 << 20
	s, err := Open(dir, Options{SegmentBytes: size, Spares: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(30 * time.Second)
	// A spare is in place (renamed) a moment before the spare-maker counts
	// it: wait for both.
	for s.spareCount(size) < 3 || s.Stats().ZeroFilled < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d spares made at open, %d counted, want 3", s.spareCount(size), s.Stats().ZeroFilled)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.Stats().ZeroFilled; n != 3 {
		t.Fatalf("%d zero-filled, want 3", n)
	}
	g := group(t, s, 1)
	data := []byte(strings.Repeat("p", 64<<10))
	// Into the third segment: the growing one at open (left at 1 MiB for
	// a spare), then two spares, each past half (which asks for one more
	// only when none is left).
	for i := uint64(1); s.Stats().Rolls < 2 || s.cur.end <= size/2; i++ {
		if err := g.StoreLog(&raft.Log{Index: i, Term: 1, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.RollsUnprepared != 0 || st.ZeroFilled != 3 {
		t.Fatalf("%d rolls found no spare, %d zero-filled (3 at open): %+v", st.RollsUnprepared, st.ZeroFilled, st)
	}
}
