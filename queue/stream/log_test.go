package stream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue/stream/group"
)

// appendN writes n records (one batch each when one, else one batch) to
// l with bodies "<offset>" and timestamps 1000+offset.
func appendN(t *testing.T, l *Log, n int, batch bool) {
	t.Helper()
	var recs []Record
	for range n {
		off, ts := l.reserve(0)
		ts = 1000 + int64(off)
		recs = append(recs, Record{Offset: off, Timestamp: ts, Exchange: "x", RoutingKey: "k",
			Props: []byte{0, 0}, Body: []byte(fmt.Sprint(off))})
		if !batch {
			if err := l.Write(recs); err != nil {
				t.Fatal(err)
			}
			recs = nil
		}
	}
	if err := l.Write(recs); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	defer r.Close()
	var out []string
	for {
		rec, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		if string(rec.Body) != fmt.Sprint(rec.Offset) || rec.Exchange != "x" || rec.RoutingKey != "k" {
			t.Fatalf("record %d: %+v", rec.Offset, rec)
		}
		out = append(out, string(rec.Body))
	}
}

func seqs(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func want(t *testing.T, what string, got, w []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s: got %v, want %v", what, got, w)
	}
}

func TestLogAppendRollLookup(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 1024)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 300, false)
	appendN(t, l, 200, true) // one batch across several segments
	if l.Segments() < 10 {
		t.Fatalf("%d segments for 500 records at 1 KiB each, want rolls", l.Segments())
	}
	for _, off := range []uint64{0, 1, 37, 299, 300, 451, 499, 500} {
		r, err := l.ReaderAt(off)
		if err != nil {
			t.Fatal(err)
		}
		want(t, fmt.Sprintf("from %d", off), readAll(t, r), seqs(int(off), 500))
	}
	r, _ := l.ReaderAtTime(1000 + 123)
	want(t, "from time 1123", readAll(t, r), seqs(123, 500))
	r, _ = l.ReaderAtTime(0)
	want(t, "from time 0", readAll(t, r), seqs(0, 500))
	r, _ = l.ReaderAtTime(1 << 40)
	want(t, "from the future", readAll(t, r), nil)
	if _, _, last := l.Bounds(); last != 300 {
		t.Fatalf("last chunk starts at %d, want 300 (the batch)", last)
	}
	l.Close()

	// Reopened, everything is there, and appends continue the offsets.
	l, err = OpenLog(dir, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if first, end, last := l.Bounds(); first != 0 || end != 500 || last != 300 {
		t.Fatalf("bounds after reopen %d %d %d, want 0 500 300", first, end, last)
	}
	appendN(t, l, 5, false)
	r, _ = l.ReaderAt(490)
	want(t, "after reopen", readAll(t, r), seqs(490, 505))
	l.Close()
}

// A reader at the end sees later appends; it never reads past the
// committed end.
func TestLogReaderFollowsTail(t *testing.T) {
	l, err := OpenLog(t.TempDir(), 512)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, _ := l.ReaderAt(0)
	defer r.Close()
	for i := range 50 {
		appendN(t, l, 1, false)
		rec, ok, err := r.Next()
		if err != nil || !ok || rec.Offset != uint64(i) {
			t.Fatalf("after append %d: %v %v %v", i, rec.Offset, ok, err)
		}
		if _, ok, _ := r.Next(); ok {
			t.Fatal("read past the end")
		}
	}
}

func lastSeg(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	return m[len(m)-1]
}

func TestLogTornTailCut(t *testing.T) {
	dir := t.TempDir()
	l, _ := OpenLog(dir, 1<<20)
	appendN(t, l, 10, false)
	l.Close()
	seg := lastSeg(t, dir)
	st, _ := os.Stat(seg)
	// Half a record appended, as a kill during a write leaves it.
	rec := encodeRecord(nil, &Record{Offset: 10, Body: []byte("torn")})
	f, _ := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(rec[:len(rec)/2])
	f.Close()
	l, err := OpenLog(dir, 1<<20)
	if err != nil {
		t.Fatalf("a torn tail refused: %v", err)
	}
	if st2, _ := os.Stat(seg); st2.Size() != st.Size() {
		t.Fatalf("torn tail not cut: %d bytes, want %d", st2.Size(), st.Size())
	}
	appendN(t, l, 1, false)
	r, _ := l.ReaderAt(0)
	want(t, "after the cut", readAll(t, r), seqs(0, 11))
	l.Close()
}

// TestLogTornSegmentCreation: a kill while the next segment was being
// created leaves it empty or with part of its header; the log opens
// without it and goes on where the one before ends.
func TestLogTornSegmentCreation(t *testing.T) {
	for _, n := range []int{0, segHeader / 2} {
		dir := t.TempDir()
		l, _ := OpenLog(dir, 1<<20)
		appendN(t, l, 10, false)
		l.Close()
		next := filepath.Join(dir, segName(10, ".seg"))
		if err := os.WriteFile(next, []byte(segMagic)[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := OpenLog(dir, 1<<20)
		if err != nil {
			t.Fatalf("a segment torn at creation (%d bytes) refused: %v", n, err)
		}
		if _, err := os.Stat(next); !os.IsNotExist(err) {
			t.Fatalf("the torn segment is still there: %v", err)
		}
		appendN(t, l, 1, false)
		r, _ := l.ReaderAt(0)
		want(t, "after the torn creation", readAll(t, r), seqs(0, 11))
		l.Close()
	}
}

func TestLogDamageRefused(t *testing.T) {
	dir := t.TempDir()
	l, _ := OpenLog(dir, 1<<20)
	appendN(t, l, 10, false)
	l.Close()
	seg := lastSeg(t, dir)
	b, _ := os.ReadFile(seg)
	b[segHeader+recHeader+20] ^= 0xff // inside the first record
	os.WriteFile(seg, b, 0o644)
	_, err := OpenLog(dir, 1<<20)
	var de *DamageError
	if !errors.As(err, &de) || de.File != seg || de.Offset != segHeader {
		t.Fatalf("open of a damaged log = %v, want a DamageError naming %s at %d", err, seg, segHeader)
	}
}

// A closed segment shorter than the next one says is damage.
func TestLogShortClosedSegmentRefused(t *testing.T) {
	dir := t.TempDir()
	l, _ := OpenLog(dir, 256)
	appendN(t, l, 20, false)
	l.Close()
	m, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	st, _ := os.Stat(m[0])
	os.Truncate(m[0], st.Size()-3)
	_, err := OpenLog(dir, 256)
	var de *DamageError
	if !errors.As(err, &de) || de.File != m[0] {
		t.Fatalf("open = %v, want a DamageError naming %s", err, m[0])
	}
}

// A lost index is rebuilt from its segment.
func TestLogIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	l, _ := OpenLog(dir, 2048)
	appendN(t, l, 100, false)
	l.Close()
	m, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
	os.Remove(m[0])
	l, err := OpenLog(dir, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, _ := l.ReaderAt(3)
	want(t, "with a rebuilt index", readAll(t, r), seqs(3, 100))
}

// segFiles counts the segment files in dir.
func segFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// Retention by bytes drops whole segments, oldest first, never the active
// one; their files go at once; a reader in a dropped segment continues at
// the first retained record, released or not.
func TestLogRetainBytes(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, 40, false)
	segs := l.Segments()
	if segs < 5 {
		t.Fatalf("%d segments, want several", segs)
	}
	held, err := l.ReaderAt(0)
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := held.Next(); err != nil || !ok || rec.Offset != 0 {
		t.Fatalf("first read: %v %v %v", rec.Offset, ok, err)
	}
	released, _ := l.ReaderAt(1)
	l.mu.RLock()
	last2 := l.segs[segs-1].committed + l.segs[segs-2].committed
	keep := l.segs[segs-2].base
	l.mu.RUnlock()
	n, err := l.Retain(group.Retention{MaxBytes: last2}, time.Now())
	if err != nil || n != segs-2 {
		t.Fatalf("Retain: dropped %d (%v), want %d", n, err, segs-2)
	}
	if first, end, _ := l.Bounds(); first != keep || end != 40 {
		t.Fatalf("bounds %d..%d, want %d..40", first, end, keep)
	}
	if got := segFiles(t, dir); got != 2 || l.Bytes() != last2 {
		t.Fatalf("%d segment files, %d bytes; want 2 and %d", got, l.Bytes(), last2)
	}
	released.Release(keep)
	for _, r := range []*Reader{held, released} {
		if rec, ok, err := r.Next(); err != nil || !ok || rec.Offset != keep {
			t.Fatalf("reader after the drop: offset %d %v %v, want %d", rec.Offset, ok, err, keep)
		}
		r.Close()
	}
	if r, err := l.ReaderAt(0); err != nil || r.Offset() != keep {
		t.Fatalf("ReaderAt(0) after the drop: %v", err)
	} else {
		r.Close()
	}
	// The active segment stays, however small the limit.
	if n, _ := l.Retain(group.Retention{MaxBytes: 1}, time.Now()); n != 1 || l.Segments() != 1 {
		t.Fatalf("MaxBytes 1: dropped %d, %d segments left", n, l.Segments())
	}
	appendN(t, l, 1, false)
	if _, end, _ := l.Bounds(); end != 41 {
		t.Fatalf("end %d after an append, want 41", end)
	}
}

// Retention by age drops the segments whose newest record is older than
// now-MaxAge; the newest timestamp of a closed segment is found again
// after a reopen (from its index and tail).
func TestLogRetainAge(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 40, false) // timestamps 1000+offset
	l.Close()
	l, err = OpenLog(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.mu.RLock()
	var want uint64 // base of the segment holding offset 20
	for _, s := range l.segs {
		if s.base <= 20 {
			want = s.base
		}
		if s.lastTs == 0 {
			t.Errorf("segment %d: newest timestamp unknown after reopen", s.base)
		}
	}
	l.mu.RUnlock()
	age := time.Second
	// Offsets below 20 are older than the cutoff 1000+20 (strictly).
	now := time.UnixMilli(1000 + 20).Add(age)
	if n, err := l.Retain(group.Retention{MaxAge: age}, now.Add(-time.Hour)); n != 0 || err != nil {
		t.Fatalf("nothing is old yet: dropped %d (%v)", n, err)
	}
	if _, err := l.Retain(group.Retention{MaxAge: age}, now); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := l.Bounds(); first != want {
		t.Fatalf("first retained %d, want %d", first, want)
	}
	if n, _ := l.Retain(group.Retention{MaxAge: age}, now.Add(time.Hour)); l.Segments() != 1 || n == 0 {
		t.Fatalf("all old: %d segments left", l.Segments())
	}
}

// Append writes without making the records readable; Sync makes them
// readable. Two appends before a sync (and a roll between them) sync as
// one, and the log reopens with all of them.
func TestLogAppendThenSync(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(n int) []Record {
		var recs []Record
		for range n {
			off, ts := l.reserve(0)
			recs = append(recs, Record{Offset: off, Timestamp: 1000 + ts, Exchange: "x", RoutingKey: "k",
				Props: []byte{0, 0}, Body: []byte(fmt.Sprint(off))})
		}
		return recs
	}
	r, err := l.ReaderAt(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(batch(2)); err != nil {
		t.Fatal(err)
	}
	if _, end, _ := l.Bounds(); end != 0 {
		t.Fatalf("readable before Sync: end %d", end)
	}
	if _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("read before Sync: %v %v", ok, err)
	}
	if err := l.Append(batch(10)); err != nil { // rolls: 200-byte segments
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); fmt.Sprint(got) != fmt.Sprint(seqs(0, 12)) {
		t.Fatalf("after Sync read %v", got)
	}
	if l.Segments() < 2 {
		t.Fatal("the appends did not roll a segment")
	}
	if err := l.Sync(); err != nil { // nothing waits
		t.Fatal(err)
	}
	l.Close()
	l2, err := OpenLog(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	r2, err := l2.ReaderAt(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r2); fmt.Sprint(got) != fmt.Sprint(seqs(0, 12)) {
		t.Fatalf("after reopen read %v", got)
	}
}
