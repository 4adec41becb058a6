package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/raftstore"
)

// The node's one Raft store (issue 14, "many queues"): every Raft group of
// a node, the quorum queues' and in cluster mode the metadata group, keeps
// its log, votes and snapshots in one raftstore, so that they share its
// group commits and syncs. It lives under <data-dir>/quorum/raft, where
// the quorum queues' groups were before it was shared. Group ids:
// raftstore's ids.go (the metadata group is raftstore.MetadataGroup).

// raftDir is the shared store's directory.
func (s *Server) raftDir() string { return filepath.Join(s.cfg.DataDir, "quorum", "raft") }

// oldClusterRaftDir is where the metadata group had a store of its own
// before the store was shared (its group 1).
func (s *Server) oldClusterRaftDir() string { return filepath.Join(s.cfg.DataDir, "cluster", "raft") }

// oldMetadataGroupID was the metadata group's id in its own store.
const oldMetadataGroupID = 1

// clusterLogSpares is how many spare log segments a cluster's node
// makes when it starts (raftstore.Options.Spares): 3 of 64 MiB take its
// first three segment switches, after which segments freed by compaction
// are recycled.
const clusterLogSpares = 3

// openRaftStore opens the shared store (New), when the data directory
// exists or the node is in a cluster; else the quorum type opens one with
// its first queue (tests on an in-memory message store). A metadata
// group left in the old store of its own is moved in first.
func (s *Server) openRaftStore() error {
	if s.cfg.Cluster.Listen == "" {
		if _, err := os.Stat(s.cfg.DataDir); err != nil {
			return nil
		}
	}
	opts := raftstore.Options{
		Logger: func(f string, a ...any) { s.log.Warn().Msgf("raft store: "+f, a...) },
	}
	if s.cfg.Cluster.Listen != "" {
		// A cluster's node replicates its quorum queues: the log's spare
		// segments are made at start, not while the first publishes
		// wait behind their zero-fill.
		opts.Spares = clusterLogSpares
	}
	st, err := raftstore.Open(s.raftDir(), opts)
	if err != nil {
		return fmt.Errorf("open the raft store: %w", err)
	}
	if err := s.migrateMetadataGroup(st); err != nil {
		st.Close()
		return err
	}
	s.raft = st
	return nil
}

// migrateMetadataGroup moves the metadata group from the store of its
// own an earlier Warren kept under <data-dir>/cluster/raft into st: its
// log, votes, commit index and snapshots are copied and synced, then the
// old directory is renamed aside (the step after which it is never copied
// again: a crash before it copies again over the partial copy, nothing
// having used it yet) and removed.
func (s *Server) migrateMetadataGroup(st *raftstore.Store) error {
	old := s.oldClusterRaftDir()
	gone := old + ".migrated"
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("remove %s: %w", gone, err)
	}
	if _, err := os.Stat(filepath.Join(old, "log")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	src, err := raftstore.Open(old, raftstore.Options{
		Logger: func(f string, a ...any) { s.log.Warn().Msgf("old cluster raft store: "+f, a...) },
	})
	if err != nil {
		return fmt.Errorf("open the cluster's old raft store: %w", err)
	}
	err = raftstore.CopyGroup(src, oldMetadataGroupID, st, raftstore.MetadataGroup)
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("move the cluster metadata into the raft store: %w", err)
	}
	if err := os.Rename(old, gone); err != nil {
		return fmt.Errorf("move the cluster metadata into the raft store: %w", err)
	}
	if d, err := os.Open(filepath.Dir(old)); err == nil {
		d.Sync()
		d.Close()
	}
	s.log.Info().Str("from", old).Str("to", st.Dir()).Msg("cluster metadata moved into the node's raft store")
	return os.RemoveAll(gone)
}

// closeRaftStore closes the shared store, after every group using it
// stopped (the cluster node's and the quorum queues').
func (s *Server) closeRaftStore() {
	if s.raft == nil {
		return
	}
	if err := s.raft.Close(); err != nil {
		s.log.Error().Err(err).Msg("closing the raft store")
	}
}

// raftStorage gives the cluster node the metadata group's stores in the
// shared raft store (Close leaves the store open: the server closes it).
func (s *Server) raftStorage() cluster.Storage {
	return func(group string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
		if group != cluster.MetadataGroup {
			return nil, nil, nil, fmt.Errorf("no storage for Raft group %q", group)
		}
		if s.raft == nil {
			return nil, nil, nil, errors.New("no raft store")
		}
		g, err := s.raft.Group(raftstore.MetadataGroup)
		if err != nil {
			return nil, nil, nil, err
		}
		snaps, err := s.raft.SnapshotStore(raftstore.MetadataGroup, 2)
		if err != nil {
			return nil, nil, nil, err
		}
		return g, g, snaps, nil
	}
}
