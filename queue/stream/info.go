// info.go: what management shows of a stream and does to its groups
// (issue 13, section 3, "Management API and warrenctl").

package stream

import (
	"errors"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream/group"
)

// Info is a stream's partitions and consumer groups.
type Info struct {
	Partitions []PartitionInfo
	// Groups are the stream's consumer groups, by name: those with members
	// and those with committed offsets only.
	Groups []GroupInfo
}

// PartitionInfo is one partition's log.
type PartitionInfo struct {
	Partition int
	First     uint64 // the first retained offset
	Next      uint64 // the offset the next message gets: Next-First are retained
	Segments  int
	Bytes     int64
}

// GroupInfo is one consumer group of a stream.
type GroupInfo struct {
	Name string
	// AutoTracking: a consumer's x-stream-automatic-offset-tracking group,
	// named by its consumer tag.
	AutoTracking bool
	Members      []MemberInfo
	Partitions   []GroupPartitionInfo // one per partition of the stream, in order
}

// MemberInfo is one member of a group.
type MemberInfo struct {
	Tag string
	// Consumer is the broker's consumer (it knows its channel and
	// connection).
	Consumer   queue.Consumer
	Partitions []int // the partitions it owns; none: a standby
}

// GroupPartitionInfo is a group's position in one partition.
type GroupPartitionInfo struct {
	Partition int
	Owner     string // the owner's consumer tag; "" when unowned
	// Committed is the next offset the group has to process; HasCommit is
	// false while the group never committed in this partition (Committed
	// is then where it would start).
	Committed uint64
	HasCommit bool
	// Lag is the messages after Committed (from the first retained one,
	// when Committed was dropped) up to the partition's Next.
	Lag uint64
}

// Errors of ResetGroup and DeleteGroup.
var (
	// ErrNoGroup: the stream has no group of that name.
	ErrNoGroup = errors.New("stream: no such consumer group")
	// ErrGroupActive: the group has members; its offsets change only while
	// it has none.
	ErrGroupActive = errors.New("stream: the consumer group has members")
)

// ResetGroup sets the committed offset of group name in every partition
// to where to points (first, last, next, an offset or a timestamp), durably,
// while the group has no members.
func (q *Queue) ResetGroup(name string, to group.OffsetSpec) error {
	return q.resetGroup(name, to)
}

// DeleteGroup forgets group name and its committed offsets, while it has
// no members.
func (q *Queue) DeleteGroup(name string) error {
	return q.deleteGroup(name)
}
