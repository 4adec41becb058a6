package server

// This file is the admin API's view of stream queues (issue 13, section 3):
// a stream's partitions and consumer groups, and the two actions on a group
// that has no members (reset its committed offsets, delete it). The stream
// answers them itself (stream.Queue.Info, ResetGroup, DeleteGroup); this
// file finds the stream and words its members as /api/consumers words a
// consumer (connection name, channel number, tag).

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/warrenmq/warren/queue/stream"
	"github.com/warrenmq/warren/queue/stream/group"
)

// StreamInfo describes a stream queue's log and its consumer groups.
type StreamInfo struct {
	VHost      string
	Name       string
	Partitions []StreamPartitionInfo
	Groups     []StreamGroupInfo // by name
}

// StreamPartitionInfo is one partition of a stream.
type StreamPartitionInfo struct {
	Partition int
	First     uint64 // the first retained offset
	Next      uint64 // the offset the next message gets
	Messages  uint64 // retained: Next - First
	Segments  int
	Bytes     int64
}

// StreamGroupInfo is one consumer group of a stream.
type StreamGroupInfo struct {
	VHost  string
	Stream string
	Name   string
	// AutoTracking: an x-stream-automatic-offset-tracking consumer's group,
	// named by its consumer tag.
	AutoTracking bool
	Members      []StreamMemberInfo
	Partitions   []StreamGroupPartitionInfo // one per partition, in order
	Lag          uint64                     // the sum of the partitions' lags
}

// StreamMemberInfo is one member of a consumer group.
type StreamMemberInfo struct {
	Tag        string
	Connection string // RabbitMQ's connection name, as ConsumerInfo's
	Channel    uint16
	User       string
	PeerHost   string
	PeerPort   int
	Partitions []int // owned; none: a standby
}

// StreamGroupPartitionInfo is a group's position in one partition.
type StreamGroupPartitionInfo struct {
	Partition int
	Owner     string // the owner's consumer tag; "" when unowned
	// Committed is the next offset the group has to process; HasCommit is
	// false while the group never committed in the partition (Committed is
	// then where it would start).
	Committed uint64
	HasCommit bool
	Lag       uint64
}

// StreamOffset is where ResetStreamGroup moves a group: Kind "first",
// "last", "next", "offset" (Offset) or "timestamp" (Time).
type StreamOffset struct {
	Kind   string
	Offset int64
	Time   time.Time
}

// ErrStreamGroupActive is ResetStreamGroup's and DeleteStreamGroup's
// refusal of a group that has members.
var ErrStreamGroupActive = stream.ErrGroupActive

// NotAStreamError: the queue exists but is not a stream.
type NotAStreamError struct{ Name, VHost string }

func (e *NotAStreamError) Error() string {
	return "queue '" + e.Name + "' in vhost '" + e.VHost + "' is not a stream"
}

// stream returns the stream queue name of vhost: a 404 *amqp.Error when
// the vhost or the queue does not exist, a *NotAStreamError when the queue
// is of another type.
func (s *Server) stream(vhost, name string) (*stream.Queue, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return nil, err
	}
	q := v.lookupQueue(name)
	if q == nil {
		return nil, notFoundQueue(name, vhost)
	}
	sq, ok := q.(*stream.Queue)
	if !ok {
		return nil, &NotAStreamError{Name: name, VHost: vhost}
	}
	return sq, nil
}

// Stream describes the stream queue name of vhost (see stream for the
// errors).
func (s *Server) Stream(vhost, name string) (StreamInfo, error) {
	sq, err := s.stream(vhost, name)
	if err != nil {
		return StreamInfo{}, err
	}
	return s.streamInfo(vhost, name, sq), nil
}

// Streams lists the stream queues of every vhost, sorted by vhost and name.
func (s *Server) Streams() []StreamInfo {
	vs, _ := s.vhostsFor("")
	var out []StreamInfo
	for _, v := range vs {
		for _, q := range v.queueList() {
			if sq, ok := q.(*stream.Queue); ok {
				out = append(out, s.streamInfo(v.name, q.Decl().Name, sq))
			}
		}
	}
	return out
}

// StreamGroup describes group of the stream name of vhost, or returns a
// 404 *amqp.Error when the stream has no such group.
func (s *Server) StreamGroup(vhost, name, group string) (StreamGroupInfo, error) {
	si, err := s.Stream(vhost, name)
	if err != nil {
		return StreamGroupInfo{}, err
	}
	for _, g := range si.Groups {
		if g.Name == group {
			return g, nil
		}
	}
	return StreamGroupInfo{}, notFoundGroup(group, name, vhost)
}

func notFoundGroup(group, name, vhost string) error {
	return replyError(&NotFoundError{Kind: "consumer group '" + group + "' of stream", Name: name, VHost: vhost})
}

// ResetStreamGroup sets the committed offsets of group, in every partition
// of the stream, to where to points, while the group has no members
// (ErrStreamGroupActive otherwise). The caller checked the permissions.
func (s *Server) ResetStreamGroup(vhost, name, grp string, to StreamOffset) error {
	sq, err := s.stream(vhost, name)
	if err != nil {
		return err
	}
	spec, err := to.spec()
	if err != nil {
		return err
	}
	return groupError(sq.ResetGroup(grp, spec), grp, name, vhost)
}

// DeleteStreamGroup forgets group and its committed offsets, while it has
// no members (ErrStreamGroupActive otherwise). The caller checked the
// permissions.
func (s *Server) DeleteStreamGroup(vhost, name, grp string) error {
	sq, err := s.stream(vhost, name)
	if err != nil {
		return err
	}
	return groupError(sq.DeleteGroup(grp), grp, name, vhost)
}

func groupError(err error, grp, name, vhost string) error {
	if errors.Is(err, stream.ErrNoGroup) {
		return notFoundGroup(grp, name, vhost)
	}
	return err
}

// BadStreamOffsetError: a StreamOffset of an unknown kind or a negative
// offset.
type BadStreamOffsetError struct{ Kind string }

func (e *BadStreamOffsetError) Error() string {
	return "an offset is first, last, next, a non-negative integer or a timestamp, not " + e.Kind
}

func (o StreamOffset) spec() (group.OffsetSpec, error) {
	switch o.Kind {
	case "first":
		return group.OffsetSpec{Kind: group.OffsetFirst}, nil
	case "last":
		return group.OffsetSpec{Kind: group.OffsetLast}, nil
	case "next":
		return group.OffsetSpec{Kind: group.OffsetNext}, nil
	case "offset":
		if o.Offset < 0 {
			return group.OffsetSpec{}, &BadStreamOffsetError{Kind: "a negative offset"}
		}
		return group.OffsetSpec{Kind: group.OffsetAbsolute, Offset: o.Offset}, nil
	case "timestamp":
		return group.OffsetSpec{Kind: group.OffsetTimestamp, Time: o.Time}, nil
	}
	return group.OffsetSpec{}, &BadStreamOffsetError{Kind: "'" + o.Kind + "'"}
}

// streamInfo snapshots sq. It takes the stream's lock: the caller holds no
// vhost lock.
func (s *Server) streamInfo(vhost, name string, sq *stream.Queue) StreamInfo {
	in := sq.Info()
	si := StreamInfo{VHost: vhost, Name: name}
	for _, p := range in.Partitions {
		si.Partitions = append(si.Partitions, StreamPartitionInfo{
			Partition: p.Partition, First: p.First, Next: p.Next, Messages: p.Next - min(p.First, p.Next),
			Segments: p.Segments, Bytes: p.Bytes,
		})
	}
	for _, g := range in.Groups {
		gi := StreamGroupInfo{VHost: vhost, Stream: name, Name: g.Name, AutoTracking: g.AutoTracking}
		for _, m := range g.Members {
			mi := StreamMemberInfo{Tag: m.Tag, Partitions: slices.Clone(m.Partitions)}
			if k, ok := m.Consumer.(*consumer); ok && k.ch != nil {
				c := k.ch.c
				mi.Connection, mi.Channel, mi.User = connName(c), k.ch.id, c.user
				mi.PeerHost, mi.PeerPort = splitAddr(c.nc.RemoteAddr())
			}
			gi.Members = append(gi.Members, mi)
		}
		slices.SortFunc(gi.Members, func(a, b StreamMemberInfo) int {
			return cmp.Or(cmp.Compare(a.Connection, b.Connection), cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Tag, b.Tag))
		})
		for _, p := range g.Partitions {
			gi.Partitions = append(gi.Partitions, StreamGroupPartitionInfo{
				Partition: p.Partition, Owner: p.Owner, Committed: p.Committed, HasCommit: p.HasCommit, Lag: p.Lag,
			})
			gi.Lag += p.Lag
		}
		si.Groups = append(si.Groups, gi)
	}
	slices.SortFunc(si.Groups, func(a, b StreamGroupInfo) int { return cmp.Compare(a.Name, b.Name) })
	return si
}
