package stream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenmq/warren/queue"
)

// A partitioned stream of n partitions with segments of seg bytes, in a
// type rooted at root.
func newJournaled(t *testing.T, root string, n int, seg int64) (queue.Decl, *Queue) {
	t.Helper()
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 3,
		Args: map[string]any{"x-stream-partitions": int64(n), "x-stream-max-segment-size-bytes": seg}}
	l, _ := queue.ParseArgs(nil)
	q, err := NewType(Config{Dir: root}).New(d, l, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return d, q.(*Queue)
}

func recoverJournaled(root string, d queue.Decl) (*Queue, error) {
	l, _ := queue.ParseArgs(nil)
	q, _, err := NewType(Config{Dir: root}).Recover(d, l, queue.Hooks{})
	if err != nil {
		return nil, err
	}
	return q.(*Queue), nil
}

// publishBursts publishes bodies from..to-1 in bursts of burst messages
// (so that a write cycle holds several partitions), each burst confirmed
// before the next.
func publishBursts(t *testing.T, q *Queue, from, to, burst int) {
	t.Helper()
	for i := from; i < to; i += burst {
		n := min(burst, to-i)
		done := make(chan error, n)
		for k := range n {
			q.typ.Publish(&queue.Message{Exchange: "x", RoutingKey: "k", Props: []byte{0, 0}, Body: []byte(fmt.Sprint(i + k))},
				[]queue.Queue{q}, nil, func(err error) { done <- err })
		}
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// contents reads every partition's bodies in offset order.
func contents(t *testing.T, q *Queue) []string {
	t.Helper()
	var out []string
	for _, p := range q.parts {
		r, err := p.log.ReaderAt(0)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for {
			rec, ok, err := r.Next()
			if err != nil {
				t.Fatalf("partition %d: %v", p.n, err)
			}
			if !ok {
				break
			}
			bodies = append(bodies, string(rec.Body))
		}
		r.Close()
		out = append(out, strings.Join(bodies, ","))
	}
	return out
}

// crashCopy copies the stream files under root to a new root as a kill -9
// at that moment leaves them (the writer is idle: every publish was
// confirmed).
func crashCopy(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // a journal file a checkpoint removed meanwhile
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// loseUnsynced does to each partition's active segment what a power loss
// may do to what was written after the journal's first record of it
// (never synced in the partition's file): from there the file holds half
// a record, a hole of zeros and then a valid record of a later offset, as
// when pages reach the disk out of order.
func loseUnsynced(t *testing.T, streamDir string, n int) {
	t.Helper()
	cuts, _, err := journalCuts(streamDir, n)
	if err != nil {
		t.Fatal(err)
	}
	for p := range n {
		if cuts[p] == noCut {
			continue
		}
		seg := lastSeg(t, partitionDir(streamDir, p))
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		pos := segHeader
		for pos < len(data) {
			r, k, err := decodeRecord(data[pos:])
			if err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
			if r.Offset >= cuts[p] {
				break
			}
			pos += k
		}
		later := encodeRecord(nil, &Record{Offset: cuts[p] + 3, Body: []byte("from a later page")})
		junk := append(append(append([]byte(nil), later[:len(later)/2]...), make([]byte, 5000)...), later...)
		if err := os.WriteFile(seg, append(data[:pos:pos], junk...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func journalCount(t *testing.T, dir string) int {
	t.Helper()
	seqs, err := journalFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(seqs)
}

// A confirm waits for the journal's sync only; after a crash that lost
// every partition's unsynced writes (torn, with holes and stray later
// records), the stream reopens with every confirmed record from the
// journal, in order, rolls included, and a fresh journal.
func TestJournalReplaysLostPartitionWrites(t *testing.T) {
	root := t.TempDir()
	d, q := newJournaled(t, root, 3, 400)
	publishBursts(t, q, 0, 90, 7)
	before := contents(t, q)
	crashed := crashCopy(t, root)
	q.Stop()
	sdir := filepath.Join(crashed, "3")
	if journalCount(t, sdir) == 0 {
		t.Fatal("a running partitioned stream has no journal file")
	}
	loseUnsynced(t, sdir, 3)
	q2, err := recoverJournaled(crashed, d)
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	if got := contents(t, q2); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after the crash:\n got %q\nwant %q", got, before)
	}
	if n := journalCount(t, sdir); n != 1 {
		t.Fatalf("%d journal files after the replay, want the new one", n)
	}
	// It goes on where the journal ended, and a clean stop leaves no
	// journal to replay.
	publishBursts(t, q2, 90, 100, 7)
	want := contents(t, q2)
	q2.Stop()
	if n := journalCount(t, sdir); n != 0 {
		t.Fatalf("%d journal files after a clean stop", n)
	}
	q3, err := recoverJournaled(crashed, d)
	if err != nil {
		t.Fatal(err)
	}
	defer q3.Stop()
	if got := contents(t, q3); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a clean stop:\n got %q\nwant %q", got, want)
	}
}

// Checkpoints sync the partitions and remove the journal files before
// them; a crash after some checkpoints loses nothing confirmed.
func TestJournalCheckpoints(t *testing.T) {
	defer func(m int64) { journalMax = m }(journalMax)
	journalMax = 2000
	root := t.TempDir()
	d, q := newJournaled(t, root, 4, 1000)
	sdir := filepath.Join(root, "3")
	most := 0
	for i := 0; i < 400; i += 20 {
		publishBursts(t, q, i, i+20, 5)
		most = max(most, journalCount(t, sdir))
	}
	if seqs, _ := journalFiles(sdir); seqs[len(seqs)-1] < 5 {
		t.Fatalf("journal files %v: no checkpoints", seqs)
	}
	if most > 3 {
		t.Fatalf("%d journal files at once: checkpoints do not remove them", most)
	}
	before := contents(t, q)
	crashed := crashCopy(t, root)
	q.Stop()
	loseUnsynced(t, filepath.Join(crashed, "3"), 4)
	q2, err := recoverJournaled(crashed, d)
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	defer q2.Stop()
	if got := contents(t, q2); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after the crash:\n got %q\nwant %q", got, before)
	}
}

// A torn journal entry (the cycle a kill -9 interrupted) was never
// confirmed: the stream opens without it, and the records that cycle had
// appended to a partition's file are cut.
func TestJournalTornTail(t *testing.T) {
	root := t.TempDir()
	d, q := newJournaled(t, root, 2, 1<<20)
	publishBursts(t, q, 0, 30, 4)
	before := contents(t, q)
	crashed := crashCopy(t, root)
	q.Stop()
	sdir := filepath.Join(crashed, "3")
	// The interrupted cycle: records 15.. of partition 0 in its file,
	// half of their entry in the journal.
	seg := lastSeg(t, partitionDir(sdir, 0))
	var recs []Record
	for i := range 3 {
		recs = append(recs, Record{Offset: uint64(15 + i), Exchange: "x", RoutingKey: "k", Props: []byte{0, 0}, Body: []byte("unconfirmed")})
	}
	var b []byte
	for i := range recs {
		b = encodeRecord(b, &recs[i])
	}
	appendFile(t, seg, b)
	seqs, _ := journalFiles(sdir)
	j := &journal{}
	entry := j.encode([]journalPart{{partition: 0, recs: recs}})
	appendFile(t, filepath.Join(sdir, journalName(seqs[len(seqs)-1])), entry[:len(entry)-5])
	q2, err := recoverJournaled(crashed, d)
	if err != nil {
		t.Fatalf("a torn journal tail refused: %v", err)
	}
	defer q2.Stop()
	if got := contents(t, q2); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after the torn cycle:\n got %q\nwant %q", got, before)
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// An invalid journal entry with a valid one after it is damage: the
// stream does not open, and the error names the file.
func TestJournalDamageRefused(t *testing.T) {
	root := t.TempDir()
	d, q := newJournaled(t, root, 2, 1<<20)
	publishBursts(t, q, 0, 30, 4)
	crashed := crashCopy(t, root)
	q.Stop()
	sdir := filepath.Join(crashed, "3")
	seqs, _ := journalFiles(sdir)
	path := filepath.Join(sdir, journalName(seqs[len(seqs)-1]))
	b, _ := os.ReadFile(path)
	b[journalHeader+20] ^= 0xff // inside the first entry
	os.WriteFile(path, b, 0o644)
	_, err := recoverJournaled(crashed, d)
	var de *DamageError
	if !errors.As(err, &de) || de.File != path {
		t.Fatalf("open with a damaged journal = %v, want a DamageError naming %s", err, path)
	}
}

// A partitioned stream written before the journal existed (its
// partitions' logs and no journal file, as in testdata/v1-partitioned,
// written by 0ed129f) opens unchanged and goes on with a journal.
func TestJournalOldStreamOpens(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/v1-partitioned")); err != nil {
		t.Fatal(err)
	}
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 3,
		Args: map[string]any{"x-stream-partitions": int64(3), "x-stream-max-segment-size-bytes": int64(400)}}
	q, err := recoverJournaled(root, d)
	if err != nil {
		t.Fatal(err)
	}
	got := contents(t, q)
	want := []string{oldPartition(0), oldPartition(1), oldPartition(2)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old stream:\n got %q\nwant %q", got, want)
	}
	publishBursts(t, q, 60, 66, 3)
	after := contents(t, q)
	q.Stop()
	q2, err := recoverJournaled(root, d)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Stop()
	if got := contents(t, q2); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Fatalf("after appending:\n got %q\nwant %q", got, after)
	}
}

// oldPartition is what the fixture's partition p holds: bodies 0..59
// round robin over 3 partitions.
func oldPartition(p int) string {
	var b []string
	for i := p; i < 60; i += 3 {
		b = append(b, fmt.Sprint(i))
	}
	return strings.Join(b, ",")
}
