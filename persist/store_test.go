package persist_test

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/persist/persisttest"
)

func TestMemory(t *testing.T) {
	var mu sync.Mutex
	disks := map[persist.Store]*persist.MemoryDisk{}
	open := func(t *testing.T) persist.Store {
		d := persist.NewMemoryDisk()
		s, err := persist.OpenMemory(d)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		disks[s] = d
		mu.Unlock()
		return s
	}
	reopen := func(t *testing.T, s persist.Store) persist.Store {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		d := disks[s]
		mu.Unlock()
		n, err := persist.OpenMemory(d)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		disks[n] = d
		mu.Unlock()
		return n
	}
	persisttest.Run(t, open, reopen)
}

func TestMemoryNoReopen(t *testing.T) {
	persisttest.Run(t, func(*testing.T) persist.Store { return persist.NewMemory() }, nil)
}

// testOptions keeps Badger small so tests stay light and batches split.
func testOptions() persist.Options {
	return persist.Options{MemTableSize: 4 << 20, GCInterval: -1}
}

// memDir returns a directory on tmpfs when there is one, else t.TempDir():
// the contract suite reopens Badger many times, and on a busy disk each
// Close (memtable flush and sync) can take a second. Tests that are about
// fsync or crashes use t.TempDir().
func memDir(t testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "warren-persist-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func openBadger(t testing.TB, dir string, o persist.Options) persist.Store {
	t.Helper()
	s, err := persist.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBadger(t *testing.T) { testBadger(t, testOptions()) }

// TestBadgerNoWAL runs the suite with message ops committed to Badger
// directly, one synced transaction per batch.
func TestBadgerNoWAL(t *testing.T) {
	o := testOptions()
	o.NoWAL = true
	testBadger(t, o)
}

func testBadger(t *testing.T, o persist.Options) {
	var mu sync.Mutex
	dirs := map[persist.Store]string{}
	open := func(t *testing.T) persist.Store {
		dir := memDir(t)
		s := openBadger(t, dir, o)
		mu.Lock()
		dirs[s] = dir
		mu.Unlock()
		return s
	}
	reopen := func(t *testing.T, s persist.Store) persist.Store {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		dir := dirs[s]
		mu.Unlock()
		n := openBadger(t, dir, o)
		mu.Lock()
		dirs[n] = dir
		mu.Unlock()
		return n
	}
	persisttest.Run(t, open, reopen)
}

func waitErr(submit func(done func(error))) error {
	ch := make(chan error, 1)
	submit(func(err error) { ch <- err })
	return <-ch
}

// TestFailedCommit: every op of a failed transaction gets the error,
// nothing of it is applied (reference counts included), and later batches
// work.
func TestFailedCommit(t *testing.T) {
	d := persist.NewMemoryDisk()
	s, err := persist.OpenMemory(d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	q2 := &persist.QueueRecord{VHost: "/", Name: "q2", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveQueue(q2); err != nil {
		t.Fatal(err)
	}
	m := persist.MessageRecord{Body: []byte("x")}
	e1 := []persist.QueueSeq{{QueueID: q.ID, Seq: 1, MsgID: 1}}
	if err := waitErr(func(d func(error)) { s.Publish(1, m, e1, d) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	d.FailCommits(func() error { return boom })
	if err := waitErr(func(d func(error)) { s.Settle(e1, d) }); !errors.Is(err, boom) {
		t.Fatalf("Settle during failure: %v", err)
	}
	e2 := []persist.QueueSeq{{QueueID: q.ID, Seq: 2, MsgID: 2}, {QueueID: q2.ID, Seq: 1, MsgID: 2}}
	if err := waitErr(func(d func(error)) { s.Publish(2, m, e2, d) }); !errors.Is(err, boom) {
		t.Fatalf("Publish during failure: %v", err)
	}
	if err := s.SaveBlob("b", nil); !errors.Is(err, boom) {
		t.Fatalf("SaveBlob during failure: %v", err)
	}
	d.FailCommits(nil)
	if _, err := s.LoadMessage(1); err != nil {
		t.Fatalf("message 1 lost by a failed settle: %v", err)
	}
	if _, err := s.LoadMessage(2); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("message 2 of a failed publish: %v", err)
	}
	// Retry the publish: the failed attempt must not have counted references.
	if err := waitErr(func(d func(error)) { s.Publish(2, m, e2, d) }); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(func(d func(error)) { s.Settle(e2[:1], d) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadMessage(2); err != nil {
		t.Fatalf("message 2 dropped with one entry left: %v", err)
	}
	if err := waitErr(func(d func(error)) { s.Settle(append(e2[1:], e1...), d) }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2} {
		if _, err := s.LoadMessage(id); !errors.Is(err, persist.ErrNotFound) {
			t.Fatalf("message %d after last settle: %v", id, err)
		}
	}
	if err := persist.Check(s); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.FailedTxns == 0 {
		t.Fatalf("stats %+v: no failed transaction counted", st)
	}
}

// TestBadgerSplitBatch fills batches beyond Badger's transaction limit (a
// 1 MiB memtable allows ~150 KiB per transaction): the committer cuts them
// between ops, an Atomic op stays whole, and an op too big for any
// transaction fails alone.
func TestBadgerSplitBatch(t *testing.T) {
	dir := memDir(t)
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 1000)
	const n = 2000
	var wg sync.WaitGroup
	var failed sync.Map
	done := func(id uint64) func(error) {
		return func(err error) {
			if err != nil {
				failed.Store(id, err)
			}
			wg.Done()
		}
	}
	// One Atomic op of ~100 KiB in the middle of the stream.
	var pubs []persist.PublishOp
	for i := range uint64(100) {
		id := 1_000_000 + i
		pubs = append(pubs, persist.PublishOp{MsgID: id, Msg: persist.MessageRecord{Body: body}, Entries: []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}})
	}
	for i := uint64(1); i <= n; i++ {
		wg.Add(1)
		s.Publish(i, persist.MessageRecord{Body: body}, []persist.QueueSeq{{QueueID: q.ID, Seq: i, MsgID: i}}, done(i))
		if i == n/2 {
			wg.Add(1)
			s.Atomic(pubs, nil, done(0))
		}
	}
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Errorf("op %v failed: %v", k, v)
		return true
	})
	st := s.Stats()
	t.Logf("stats %+v", st)
	if st.Messages != n+100 {
		t.Fatalf("stats %+v", st)
	}
	// Too big for one transaction: fails, alone.
	var huge []persist.PublishOp
	for i := range uint64(400) {
		id := 2_000_000 + i
		huge = append(huge, persist.PublishOp{MsgID: id, Msg: persist.MessageRecord{Body: body}, Entries: []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}})
	}
	wg.Add(2)
	s.Atomic(huge, nil, done(1))
	s.Publish(3_000_000, persist.MessageRecord{Body: body}, []persist.QueueSeq{{QueueID: q.ID, Seq: 3_000_000, MsgID: 3_000_000}}, done(2))
	wg.Wait()
	if _, ok := failed.Load(uint64(1)); !ok {
		t.Fatalf("oversized Atomic op did not fail")
	}
	if v, ok := failed.Load(uint64(2)); ok {
		t.Fatalf("publish after the oversized op failed: %v", v)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	defer s.Close()
	count := 0
	if _, err := s.RecoverQueue(q.ID, func(e persist.RecoveredEntry) error {
		if e.MsgID >= 2_000_000 && e.MsgID < 3_000_000 {
			t.Fatalf("entry %d of the failed Atomic op recovered", e.MsgID)
		}
		count++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if count != n+100+1 {
		t.Fatalf("recovered %d entries, want %d", count, n+101)
	}
}

// TestBadgerGC: the value-log GC goroutine runs and Close stops it.
func TestBadgerGC(t *testing.T) {
	o := testOptions()
	o.GCInterval = 5e6 // 5ms
	s := openBadger(t, memDir(t), o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10) // above the value threshold: value log
	for i := uint64(1); i <= 20; i++ {
		e := []persist.QueueSeq{{QueueID: q.ID, Seq: i, MsgID: i}}
		if err := waitErr(func(d func(error)) { s.Publish(i, persist.MessageRecord{Body: big}, e, d) }); err != nil {
			t.Fatal(err)
		}
		if err := waitErr(func(d func(error)) { s.Settle(e, d) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBadgerSynced: the fsync path, concurrent publishers sharing commits.
func TestBadgerSynced(t *testing.T) {
	dir := t.TempDir()
	o := persist.Options{MemTableSize: 4 << 20, GCInterval: -1}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range uint64(16) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(10) {
				id := w*100 + i + 1
				e := []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}
				if err := waitErr(func(d func(error)) { s.Publish(id, persist.MessageRecord{Body: []byte("x")}, e, d) }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("%d messages in %d commits", st.Messages, st.Commits)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	defer s.Close()
	n := 0
	if _, err := s.RecoverQueue(q.ID, func(persist.RecoveredEntry) error { n++; return nil }); err != nil || n != 160 {
		t.Fatalf("recovered %d, %v; want 160", n, err)
	}
}

// TestCheckFindsLeak: Check is not vacuous. Publishing one (queue, seq)
// twice (a broker bug) leaves the first body without an entry.
func TestCheckFindsLeak(t *testing.T) {
	s := persist.NewMemory()
	defer s.Close()
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 2; id++ {
		e := []persist.QueueSeq{{QueueID: q.ID, Seq: 1, MsgID: id}}
		if err := waitErr(func(d func(error)) { s.Publish(id, persist.MessageRecord{}, e, d) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := persist.Check(s); err == nil {
		t.Fatal("Check found nothing")
	} else {
		t.Log(err)
	}
}
