package cluster

import "github.com/hashicorp/raft"

// Storage opens one Raft group's stores (the group's name: MetadataGroup,
// or a quorum queue's). Stores that are io.Closers are closed with the
// group.
type Storage func(group string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error)

// DefaultStorage is the Storage a node uses when Options.Storage is nil.
//
// TODO(issue 14, raftstore): point this at the shared raftstore package
// (one store under the data directory for every group of a node) once it
// lands. Until then it keeps each group's log, votes and snapshots in
// memory: a restarted process has no state and rejoins its cluster as a
// new node, from a snapshot the leader sends (formation's "a seed is in a
// cluster already: join it"), so restarting the whole cluster at once
// loses the metadata. The in-process tests give their own storage that
// survives a node's restart (clustertest).
func DefaultStorage() Storage {
	return func(string) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
		st := raft.NewInmemStore()
		return st, st, raft.NewInmemSnapshotStore(), nil
	}
}
