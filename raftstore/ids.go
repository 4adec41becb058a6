package raftstore

// Group ids are the broker's to hand out; the store does not read them.
// One store holds every group of a node, so the users of a store share
// one id space, split by the top bits:
//
//	0 < id < 1<<61       a quorum queue's group on one node: its store record id
//	1<<61 <= id < 1<<62  groups that are not queues (SystemGroups): the
//	                     cluster's metadata group (MetadataGroup)
//	1<<62 | n            a cluster-mode quorum queue: n its metadata incarnation
//	1<<63 | n            an anonymous (not stored) quorum queue of this process
//
// A queue type that removes the groups it does not know (at start, what a
// crash left behind) must leave the system groups alone: IsSystemGroup.
const (
	// SystemGroups is the first id of the range kept for groups that are
	// not queues.
	SystemGroups uint64 = 1 << 61
	// MetadataGroup is the cluster metadata group's id.
	MetadataGroup = SystemGroups
)

// IsSystemGroup reports whether id is in the range kept for groups that
// are not queues (SystemGroups up to 1<<62).
func IsSystemGroup(id uint64) bool { return id>>61 == 1 }
