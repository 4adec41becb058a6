package persist_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/persist"
)

// diskUsed is what the files directly in dir take on disk.
func diskUsed(t *testing.T, dir string) int64 {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"))
	var n int64
	for _, f := range m {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			n += st.Blocks * 512
		}
	}
	return n
}

// TestValueLogReclaimedAfterDrain: a backlog of large messages drained on
// an idle store gives its disk space back, though the drain's deletes are
// too few to fill a memtable and nothing more is written (a node whose
// disk alarm is up publishes nothing until that space comes back).
func TestValueLogReclaimedAfterDrain(t *testing.T) {
	dir := memDir(t)
	o := persist.Options{GCInterval: 50 * time.Millisecond}
	s := openBadger(t, dir, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	const n = 400
	body := make([]byte, 256<<10)
	var entries []persist.QueueSeq
	for id := uint64(1); id <= n; id++ {
		done := make(chan error, 1)
		e := []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}
		s.Publish(id, persist.MessageRecord{RoutingKey: "q", Body: body}, e, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e...)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, o)
	defer s.Close()
	full := diskUsed(t, dir)
	done := make(chan error, 1)
	s.Settle(entries, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for used := diskUsed(t, dir); used > full/4; used = diskUsed(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes on disk after the drain, %d before", used, full)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
