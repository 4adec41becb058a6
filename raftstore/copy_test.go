package raftstore

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// CopyGroup moves a group between stores under another id: its log
// entries (bounds and contents), stable values, staged commit index and
// snapshots, replacing what the target held, and leaving other groups of
// the target as they were.
func TestCopyGroup(t *testing.T) {
	src, dst := open(t, t.TempDir()), open(t, t.TempDir())
	defer src.Close()
	defer dst.Close()
	g := group(t, src, 1)
	g.StageCommitIndex(4)
	var logs []*raft.Log
	for i := uint64(3); i <= 9; i++ {
		logs = append(logs, testLog(i, "entry"))
	}
	if err := g.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := g.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	snaps, err := src.SnapshotStore(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 5, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("the state"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	// What the target had under the id goes; its other groups stay.
	stale := group(t, dst, MetadataGroup)
	stale.StoreLogs([]*raft.Log{testLog(50, "stale")})
	other := group(t, dst, 2)
	other.StoreLogs([]*raft.Log{testLog(1, "other")})

	if err := CopyGroup(src, 1, dst, MetadataGroup); err != nil {
		t.Fatal(err)
	}
	c := group(t, dst, MetadataGroup)
	if f, _ := c.FirstIndex(); f != 3 {
		t.Fatalf("FirstIndex %d", f)
	}
	if l, _ := c.LastIndex(); l != 9 {
		t.Fatalf("LastIndex %d", l)
	}
	var l raft.Log
	if err := c.GetLog(6, &l); err != nil || string(l.Data) != "entry" || l.Index != 6 {
		t.Fatalf("GetLog(6) = %+v, %v", l, err)
	}
	if err := c.GetLog(50, &l); err != raft.ErrLogNotFound {
		t.Fatalf("the target's own entry survived: %v", err)
	}
	if v, err := c.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm = %d, %v", v, err)
	}
	if ci, err := c.GetCommitIndex(); err != nil || ci != 4 {
		t.Fatalf("commit index = %d, %v", ci, err)
	}
	if l, _ := group(t, dst, 2).LastIndex(); l != 1 {
		t.Fatalf("another group of the target: last %d", l)
	}
	ds, err := dst.SnapshotStore(MetadataGroup, 2)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ds.List()
	if err != nil || len(list) != 1 || list[0].Index != 5 {
		t.Fatalf("snapshots: %+v, %v", list, err)
	}
	_, rc, err := ds.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, []byte("the state")) {
		t.Fatalf("snapshot holds %q", b)
	}
	// Copied again (a crash after a copy, before its source went):
	// the same result.
	if err := CopyGroup(src, 1, dst, MetadataGroup); err != nil {
		t.Fatal(err)
	}
	if l, _ := group(t, dst, MetadataGroup).LastIndex(); l != 9 {
		t.Fatalf("after a second copy: last %d", l)
	}
}

func TestIsSystemGroup(t *testing.T) {
	for id, want := range map[uint64]bool{1: false, 1<<61 - 1: false, MetadataGroup: true, 1<<61 | 5: true, 1 << 62: false, 1<<62 | 1<<61: false, 1<<63 | 1: false} {
		if IsSystemGroup(id) != want {
			t.Errorf("IsSystemGroup(%#x) = %v", id, !want)
		}
	}
}
