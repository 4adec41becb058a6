package server

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/warrenmq/warren/cluster"
)

// raftStorage keeps each Raft group's log and votes in a BoltDB file and
// its snapshots in files, under <data-dir>/cluster/<group>/, so that a
// node restarts with its state and a whole cluster restarted at once has
// its metadata.
//
// TODO(issue 14, raftstore): the shared raftstore (one Badger for every
// group of a node, on branch h-quorum) replaces this once it lands.
// raft-boltdb/v2 is at v2.3.0: v2.3.1 imports go-metrics/compat, which
// the go-metrics v0.7.0 that hashicorp/raft v1.8.0 needs no longer has.
func (s *Server) raftStorage() cluster.Storage {
	root := filepath.Join(s.cfg.DataDir, "cluster")
	return func(group string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
		dir := filepath.Join(root, group)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, nil, err
		}
		bs, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open raft log of group %s: %w", group, err)
		}
		snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
		if err != nil {
			bs.Close()
			return nil, nil, nil, err
		}
		return bs, bs, snaps, nil
	}
}
