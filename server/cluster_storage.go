package server

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/raftstore"
)

// raftStorage keeps the metadata group's log, votes and snapshots in a
// raftstore under <data-dir>/cluster/raft, so that a node restarts with
// its state and a whole cluster restarted at once keeps its metadata.
//
// TODO(issue 14): share one raftstore with the quorum queues' groups
// (queue/quorum opens its own under <data-dir>/quorum/raft), as the issue
// asks: one Badger for every group of a node.
func (s *Server) raftStorage() cluster.Storage {
	return func(group string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
		if group != cluster.MetadataGroup {
			return nil, nil, nil, fmt.Errorf("no storage for Raft group %q", group)
		}
		st, err := raftstore.Open(filepath.Join(s.cfg.DataDir, "cluster", "raft"), raftstore.Options{
			Logger: func(f string, a ...any) { s.log.Warn().Msgf("cluster raft store: "+f, a...) },
		})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open the cluster's raft store: %w", err)
		}
		g, err := st.Group(metadataGroupID)
		if err != nil {
			st.Close()
			return nil, nil, nil, err
		}
		snaps, err := st.SnapshotStore(metadataGroupID, 2)
		if err != nil {
			st.Close()
			return nil, nil, nil, err
		}
		cg := &closingGroup{Group: g, st: st}
		return cg, cg, snaps, nil
	}
}

// metadataGroupID is the metadata group's id in its raftstore.
const metadataGroupID = 1

// closingGroup is a raftstore group whose Close closes its store (once:
// it is both the log and the stable store).
type closingGroup struct {
	*raftstore.Group
	st   *raftstore.Store
	once sync.Once
	err  error
}

func (g *closingGroup) Close() error {
	g.once.Do(func() { g.err = g.st.Close() })
	return g.err
}
