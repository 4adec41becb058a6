package raftstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func group(t *testing.T, s *Store, id uint64) *Group {
	t.Helper()
	g, err := s.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func testLog(idx uint64, data string) *raft.Log {
	return &raft.Log{Index: idx, Term: idx/10 + 1, Type: raft.LogCommand, Data: []byte(data), AppendedAt: time.Unix(0, int64(idx)*1000)}
}

// The cases raft-boltdb's tests check of a raft.LogStore and
// raft.StableStore: bounds of an empty and a filled log, GetLog of a
// missing entry (raft.ErrLogNotFound), StoreLog/StoreLogs round trips,
// DeleteRange moving the bounds, stable values and their "not found".
func TestLogStoreContract(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	g := group(t, s, 7)
	if f, _ := g.FirstIndex(); f != 0 {
		t.Fatalf("empty FirstIndex = %d", f)
	}
	if l, _ := g.LastIndex(); l != 0 {
		t.Fatalf("empty LastIndex = %d", l)
	}
	var got raft.Log
	if err := g.GetLog(1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a missing entry = %v, want ErrLogNotFound", err)
	}
	if err := g.StoreLog(testLog(1, "one")); err != nil {
		t.Fatal(err)
	}
	if err := g.StoreLogs([]*raft.Log{testLog(2, "two"), testLog(3, "three"), {Index: 4, Term: 2, Type: raft.LogConfiguration, Extensions: []byte("ext")}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"one", "two", "three"} {
		if err := g.GetLog(uint64(i+1), &got); err != nil {
			t.Fatal(err)
		}
		w := testLog(uint64(i+1), want)
		if got.Index != w.Index || got.Term != w.Term || got.Type != w.Type || string(got.Data) != want || !got.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i+1, got, w)
		}
	}
	if err := g.GetLog(4, &got); err != nil || string(got.Extensions) != "ext" || got.Type != raft.LogConfiguration || got.Data != nil && len(got.Data) != 0 {
		t.Fatalf("GetLog(4) = %+v %v", got, err)
	}
	if f, _ := g.FirstIndex(); f != 1 {
		t.Fatalf("FirstIndex = %d", f)
	}
	if l, _ := g.LastIndex(); l != 4 {
		t.Fatalf("LastIndex = %d", l)
	}
	// Another group sees none of it.
	h := group(t, s, 8)
	if l, _ := h.LastIndex(); l != 0 {
		t.Fatalf("another group's LastIndex = %d", l)
	}
	if err := h.GetLog(1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("another group's GetLog = %v", err)
	}
	if err := g.DeleteRange(1, 2); err != nil {
		t.Fatal(err)
	}
	if f, _ := g.FirstIndex(); f != 3 {
		t.Fatalf("FirstIndex after DeleteRange(1,2) = %d", f)
	}
	if err := g.GetLog(2, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a deleted entry = %v", err)
	}
	// A conflict: the tail goes, then new entries take its place.
	if err := g.DeleteRange(4, 4); err != nil {
		t.Fatal(err)
	}
	if l, _ := g.LastIndex(); l != 3 {
		t.Fatalf("LastIndex after deleting the tail = %d", l)
	}
	if err := g.DeleteRange(3, 3); err != nil {
		t.Fatal(err)
	}
	if f, l := must(g.FirstIndex()), must(g.LastIndex()); f != 0 || l != 0 {
		t.Fatalf("bounds after deleting all = %d %d", f, l)
	}

	// Stable values.
	if _, err := g.Get([]byte("k")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key = %v, want not found", err)
	}
	if _, err := g.GetUint64([]byte("n")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key = %v, want not found", err)
	}
	if err := g.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := g.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q %v", v, err)
	}
	if err := g.SetUint64([]byte("n"), 42); err != nil {
		t.Fatal(err)
	}
	if n, err := g.GetUint64([]byte("n")); err != nil || n != 42 {
		t.Fatalf("GetUint64 = %d %v", n, err)
	}
	if _, err := h.Get([]byte("k")); err == nil {
		t.Fatal("another group reads the stable value")
	}
}

func must(n uint64, err error) uint64 {
	if err != nil {
		panic(err)
	}
	return n
}

// The bounds, entries, stable values and commit index survive a reopen;
// DeleteGroup removes all of a group's and nothing of another's.
func TestReopenAndDeleteGroup(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	a, b := group(t, s, 1), group(t, s, 2)
	for i := uint64(5); i <= 20; i++ {
		if err := a.StoreLog(testLog(i, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	a.StageCommitIndex(15)
	a.StoreLog(testLog(21, "21"))
	b.StoreLog(testLog(1, "b"))
	a.SetUint64([]byte("CurrentTerm"), 3)
	os.MkdirAll(s.SnapshotDir(1), 0o755)
	s.Close()

	s = open(t, dir)
	defer s.Close()
	a, b = group(t, s, 1), group(t, s, 2)
	if f, l := must(a.FirstIndex()), must(a.LastIndex()); f != 5 || l != 21 {
		t.Fatalf("bounds after reopen = %d %d", f, l)
	}
	if c, _ := a.GetCommitIndex(); c != 15 {
		t.Fatalf("commit index = %d, want 15", c)
	}
	if n, _ := a.GetUint64([]byte("CurrentTerm")); n != 3 {
		t.Fatalf("term = %d", n)
	}
	ids, _ := s.GroupIDs()
	if len(ids) != 2 {
		t.Fatalf("GroupIDs = %v", ids)
	}
	if err := s.DeleteGroup(1); err != nil {
		t.Fatal(err)
	}
	a = group(t, s, 1)
	if l := must(a.LastIndex()); l != 0 {
		t.Fatalf("deleted group's LastIndex = %d", l)
	}
	if _, err := a.Get([]byte("CurrentTerm")); err == nil {
		t.Fatal("deleted group kept a stable value")
	}
	if _, err := os.Stat(s.SnapshotDir(1)); !os.IsNotExist(err) {
		t.Fatalf("deleted group's snapshots: %v", err)
	}
	var got raft.Log
	if err := b.GetLog(1, &got); err != nil || string(got.Data) != "b" {
		t.Fatalf("the other group after DeleteGroup: %v %q", err, got.Data)
	}
	if ids, _ := s.GroupIDs(); len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("GroupIDs after delete = %v", ids)
	}
}

// A damaged entry is an error, never served.
func TestDecodeRefusesDamage(t *testing.T) {
	b := encodeLog(testLog(9, "payload"))
	var l raft.Log
	if err := decodeLog(1, 9, b, &l); err != nil || string(l.Data) != "payload" {
		t.Fatalf("decode: %v", err)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		var ce *CorruptError
		if err := decodeLog(1, 9, c, &l); !errors.As(err, &ce) {
			t.Fatalf("byte %d flipped: %v, want a CorruptError", i, err)
		}
	}
	if err := decodeLog(1, 9, b[:len(b)-1], &l); err == nil {
		t.Fatal("a cut entry decoded")
	}
}

// Concurrent StoreLogs of many groups share syncs (group commit across
// groups).
func TestGroupCommitAcrossGroups(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	const groups, each = 50, 40
	var wg sync.WaitGroup
	for gid := range groups {
		g := group(t, s, uint64(gid+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := g.StoreLogs([]*raft.Log{testLog(uint64(i+1), strings.Repeat("x", 1024))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.Appends != groups*each {
		t.Fatalf("appends = %d", st.Appends)
	}
	if st.AppendsPerSync() < 2 {
		t.Fatalf("appends per sync = %.1f with %d groups appending at once, want shared syncs", st.AppendsPerSync(), groups)
	}
	t.Logf("%d appends in %d syncs (%.1f per sync)", st.Appends, st.Syncs, st.AppendsPerSync())
}

// TestKill9 kills a writer process that reports each StoreLogs as it
// returns; after a reopen every reported entry is there and intact, the
// log has no holes, and nothing past its end is served.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 rounds")
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$")
		// Small segments: the kills land in rolls and reclaims too.
		cmd.Env = append(os.Environ(), "RAFTSTORE_CHILD_DIR="+dir, "RAFTSTORE_CHILD_SEGMENT=262144")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[uint64]uint64{} // group -> last index reported durable
		sc := bufio.NewScanner(out)
		deadline := time.After(time.Duration(300+round*200) * time.Millisecond)
		lines := 0
	read:
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 {
				gid, _ := strconv.ParseUint(f[0], 10, 64)
				idx, _ := strconv.ParseUint(f[1], 10, 64)
				acked[gid] = max(acked[gid], idx)
				lines++
			}
			select {
			case <-deadline:
				break read
			default:
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		go func() {
			for sc.Scan() {
			}
		}()
		cmd.Wait()
		if lines == 0 {
			t.Fatal("the child reported nothing")
		}
		s := open(t, dir)
		for gid, last := range acked {
			g := group(t, s, gid)
			f, l := must(g.FirstIndex()), must(g.LastIndex())
			if l < last {
				t.Fatalf("round %d group %d: last index %d, but %d was reported durable", round, gid, l, last)
			}
			for i := f; i <= l; i++ {
				var e raft.Log
				if err := g.GetLog(i, &e); err != nil {
					t.Fatalf("round %d group %d entry %d (of %d..%d): %v", round, gid, i, f, l, err)
				}
				if want := childData(gid, i); string(e.Data) != want {
					t.Fatalf("round %d group %d entry %d: data %q", round, gid, i, e.Data)
				}
			}
			if err := g.GetLog(l+1, &raft.Log{}); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("past the end: %v", err)
			}
		}
		s.Close()
		t.Logf("round %d: %d appends reported, all there", round, lines)
	}
}

func childData(gid, idx uint64) string {
	return fmt.Sprintf("g%d-i%d-", gid, idx) + strings.Repeat("d", int(idx%2000))
}

// TestKill9Child is the writer TestKill9 kills: 20 groups appending from
// where their logs end, each reporting "group index" once durable.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv("RAFTSTORE_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestKill9")
	}
	seg, _ := strconv.ParseInt(os.Getenv("RAFTSTORE_CHILD_SEGMENT"), 10, 64)
	s, err := Open(dir, Options{SegmentBytes: seg})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for gid := uint64(1); gid <= 20; gid++ {
		g, _ := s.Group(gid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := must(g.LastIndex()) + 1
			for {
				batch := []*raft.Log{}
				for range 1 + next%3 {
					batch = append(batch, &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: []byte(childData(gid, next))})
					next++
				}
				if err := g.StoreLogs(batch); err != nil {
					return
				}
				// Even groups compact as they go, odd ones keep all: old
				// segments are pinned by a few live entries, copied on.
				if gid%2 == 0 && next > 200 && next%50 < 3 {
					if err := g.DeleteRange(1, next-150); err != nil {
						return
					}
				}
				mu.Lock()
				fmt.Fprintf(w, "%d %d\n", gid, next-1)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestStoreLogsEarly: entries stored early are readable at once and
// durable once their sync is done (WaitDurable, Durable); a suffix cut
// takes the durable index back below it, compaction does not; entries
// stored early and synced are there after a reopen; a closed store's
// wait for what never became durable ends with an error.
func TestStoreLogsEarly(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	g, err := s.Group(7)
	if err != nil {
		t.Fatal(err)
	}
	logs := func(from, to uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i <= to; i++ {
			out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint("e", i))})
		}
		return out
	}
	if err := g.StoreLogsEarly(logs(1, 10)); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := g.GetLog(10, &l); err != nil || string(l.Data) != "e10" {
		t.Fatalf("entry 10 after an early store: %v %q", err, l.Data)
	}
	if err := g.WaitDurable(10); err != nil {
		t.Fatal(err)
	}
	if d := g.Durable(); d != 10 {
		t.Fatalf("durable %d, want 10", d)
	}
	// Compaction leaves it; a cut of the suffix takes it back.
	if err := g.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if d := g.Durable(); d != 10 {
		t.Fatalf("durable %d after compaction, want 10", d)
	}
	if err := g.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if d := g.Durable(); d != 7 {
		t.Fatalf("durable %d after the suffix 8..10 was cut, want 7", d)
	}
	if err := g.StoreLogs(logs(8, 12)); err != nil {
		t.Fatal(err)
	}
	if d := g.Durable(); d != 12 {
		t.Fatalf("durable %d after a synced store, want 12", d)
	}
	s.Close()

	s = open(t, dir)
	defer s.Close()
	g, _ = s.Group(7)
	if d := g.Durable(); d != 12 {
		t.Fatalf("durable %d after a reopen, want 12", d)
	}
	if first, _ := g.FirstIndex(); first != 4 {
		t.Fatalf("first %d after a reopen, want 4", first)
	}
	done := make(chan error, 1)
	go func() { done <- g.WaitDurable(13) }()
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a wait for an entry never stored ended without an error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a wait for an entry never stored outlived its store")
	}
}

// A group's deletion does not make another group's stable writes fail:
// raft panics when it cannot save its term (a node of a cluster crashed
// so when a quorum queue's replica was dropped while other groups held
// an election: Badger's DropPrefix blocks every write while it runs).
func TestDeleteGroupWhileOthersSet(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	busy := group(t, s, 1)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if err := busy.SetUint64([]byte("CurrentTerm"), i); err != nil {
				errs <- fmt.Errorf("set %d: %w", i, err)
				return
			}
		}
	}()
	for id := uint64(100); id < 140; id++ {
		g := group(t, s, id)
		if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
			t.Fatal(err)
		}
		storeN(t, g, 1, 3)
		if err := s.DeleteGroup(id); err != nil {
			t.Fatal(err)
		}
		if _, err := group(t, s, id).GetUint64([]byte("CurrentTerm")); err == nil {
			t.Fatalf("group %d's term is still there", id)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("another group's stable write failed while groups were deleted: %v", err)
	}
}
