package persist_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/warrenmq/warren/persist"
)

// TestBadgerEmptyMemtableFile: a kill -9 between the creation of a
// memtable file and the writing of its header leaves an empty .mem file;
// the store must open anyway, with everything it had.
func TestBadgerEmptyMemtableFile(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir, testOptions())
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	m := persist.MessageRecord{RoutingKey: "q", Body: bytes.Repeat([]byte("x"), 3000)}
	done := make(chan error, 1)
	s.Publish(1, m, []persist.QueueSeq{{QueueID: q.ID, Seq: 1, MsgID: 1}}, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	slices.Sort(mems)
	// The next memtable number after the newest one there.
	next := "00001.mem"
	if len(mems) > 0 {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(mems[len(mems)-1]), "%d.mem", &n); err == nil {
			next = fmt.Sprintf("%05d.mem", n+1)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, next), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, testOptions())
	defer s.Close()
	got, err := s.LoadMessage(1)
	if err != nil || !bytes.Equal(got.Body, m.Body) {
		t.Fatalf("after the reopen: %v", err)
	}
}
