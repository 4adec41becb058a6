package mgmt

// Streams in the management API (issue 13, section 3). A stream queue's
// GET /api/queues/{vhost}/{name} has RabbitMQ 3.10's fields for a stream
// (type "stream", leader, members, online, committed_offset; none of a
// classic queue's paging fields) and Warren's partitions and groups. The
// consumer groups have endpoints of their own, Warren's:
//
//	GET    /api/stream-groups/{vhost}/{stream}                the stream's groups
//	GET    /api/stream-groups/{vhost}/{stream}/{group}        one group
//	DELETE /api/stream-groups/{vhost}/{stream}/{group}        forget it (no members)
//	POST   /api/stream-groups/{vhost}/{stream}/{group}/reset  {"offset": ...} (no members)
//
// GET needs read permission on the stream, DELETE and reset configure
// permission, as a queue's GET and DELETE in RabbitMQ's management API
// (rabbit_mgmt_util:is_authorized_vhost plus the resource check). Unknown
// vhost, stream or group: 404 {"error":"Object Not Found","reason":"Not
// Found"}, as RabbitMQ answers an unknown object; a queue that is not a
// stream: 404 with a reason that says so; a group with members: 409
// {"error":"conflict",...}; a bad body: 400.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
)

// streamQueueJSON holds the fields RabbitMQ 3.10 gives a stream queue
// (rabbit_stream_queue's info keys) and Warren's partitions and groups
// (single-queue GET only).
type streamQueueJSON struct {
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
	// CommittedOffset is the last offset written (osiris' committed
	// chunk), -1 when none; single-queue GET of a stream of one
	// partition only (each partition has its own: see Partitions).
	CommittedOffset *int64                 `json:"committed_offset,omitempty"`
	Partitions      *[]streamPartitionJSON `json:"partitions,omitempty"`
	Groups          *[]streamGroupJSON     `json:"groups,omitempty"`
}

type streamPartitionJSON struct {
	Partition   int    `json:"partition"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
	Messages    uint64 `json:"messages"`
	Segments    int    `json:"segments"`
	Bytes       int64  `json:"bytes"`
}

type streamGroupJSON struct {
	Name         string                     `json:"name"`
	VHost        string                     `json:"vhost"`
	Stream       string                     `json:"stream"`
	AutoTracking bool                       `json:"automatic_offset_tracking"`
	Lag          uint64                     `json:"lag"`
	Members      []streamMemberJSON         `json:"members"`
	Partitions   []streamGroupPartitionJSON `json:"partitions"`
}

type streamMemberJSON struct {
	ConsumerTag    string          `json:"consumer_tag"`
	ChannelDetails chanDetailsJSON `json:"channel_details"`
	Partitions     []int           `json:"partitions"`
}

type streamGroupPartitionJSON struct {
	Partition       int     `json:"partition"`
	Owner           *string `json:"owner"` // a member's consumer tag; null when unowned
	CommittedOffset uint64  `json:"committed_offset"`
	Committed       bool    `json:"committed"` // false: the group never committed here
	Lag             uint64  `json:"lag"`
}

func toStreamPartitions(si server.StreamInfo) []streamPartitionJSON {
	out := make([]streamPartitionJSON, 0, len(si.Partitions))
	for _, p := range si.Partitions {
		out = append(out, streamPartitionJSON{
			Partition: p.Partition, FirstOffset: p.First, NextOffset: p.Next, Messages: p.Messages,
			Segments: p.Segments, Bytes: p.Bytes,
		})
	}
	return out
}

func toStreamGroup(node string, g server.StreamGroupInfo) streamGroupJSON {
	j := streamGroupJSON{
		Name: g.Name, VHost: g.VHost, Stream: g.Stream, AutoTracking: g.AutoTracking, Lag: g.Lag,
		Members: []streamMemberJSON{}, Partitions: []streamGroupPartitionJSON{},
	}
	for _, m := range g.Members {
		parts := m.Partitions
		if parts == nil {
			parts = []int{}
		}
		j.Members = append(j.Members, streamMemberJSON{
			ConsumerTag: m.Tag, Partitions: parts,
			ChannelDetails: chanDetailsJSON{
				Name: channelName(m.Connection, m.Channel), ConnectionName: m.Connection, Node: node,
				Number: int(m.Channel), PeerHost: m.PeerHost, PeerPort: m.PeerPort, User: m.User,
			},
		})
	}
	for _, p := range g.Partitions {
		pj := streamGroupPartitionJSON{Partition: p.Partition, CommittedOffset: p.Committed, Committed: p.HasCommit, Lag: p.Lag}
		if p.Owner != "" {
			owner := p.Owner
			pj.Owner = &owner
		}
		j.Partitions = append(j.Partitions, pj)
	}
	return j
}

func toStreamGroups(node string, si server.StreamInfo) []streamGroupJSON {
	out := make([]streamGroupJSON, 0, len(si.Groups))
	for _, g := range si.Groups {
		out = append(out, toStreamGroup(node, g))
	}
	return out
}

// withStream adds a stream queue's partitions, groups and committed
// offset to its single-queue GET.
func (s *Server) withStream(j *queueJSON) {
	if j.streamQueueJSON == nil {
		return
	}
	si, err := s.broker.Stream(j.VHost, j.Name)
	if err != nil {
		return // deleted since
	}
	parts, groups := toStreamPartitions(si), toStreamGroups(j.Node, si)
	j.Partitions, j.Groups = &parts, &groups
	if len(si.Partitions) == 1 {
		last := int64(si.Partitions[0].Next) - 1
		j.CommittedOffset = &last
	}
}

func (s *Server) streamRoutes() []route {
	r := func(method, pattern string, h func(*request) error) route {
		return route{method: method, pattern: strings.Split(pattern, "/"), h: h}
	}
	return []route{
		r(http.MethodGet, "stream-groups/{vhost}/{stream}", s.getStreamGroups),
		r(http.MethodGet, "stream-groups/{vhost}/{stream}/{group}", s.getStreamGroup),
		r(http.MethodDelete, "stream-groups/{vhost}/{stream}/{group}", s.deleteStreamGroup),
		r(http.MethodPost, "stream-groups/{vhost}/{stream}/{group}/reset", s.resetStreamGroup),
	}
}

// streamError words the admin API's stream errors for the request's
// stream and group; others pass.
func streamError(q *request, err error) error {
	var ns *server.NotAStreamError
	switch {
	case errors.As(err, &ns):
		return &httpError{http.StatusNotFound, "Object Not Found", ns.Error(), nil}
	case errors.Is(err, server.ErrStreamGroupActive):
		return &httpError{http.StatusConflict, "conflict", sprintf("consumer group '%s' of stream '%s' in vhost '%s' has members: "+
			"its offsets are reset and it is deleted only while it has none", q.param("group"), q.param("stream"), q.param("vhost")), nil}
	}
	var bo *server.BadStreamOffsetError
	if errors.As(err, &bo) {
		return badRequest("%s", bo.Error())
	}
	return err
}

// streamParam checks that the user has permission p on the path's stream
// and returns its name.
func (s *Server) streamParam(q *request, p auth.Perm) (string, error) {
	name := q.param("stream")
	if _, err := s.broker.Stream(q.param("vhost"), name); err != nil {
		return "", streamError(q, err)
	}
	if err := s.checkPerm(q, p, "queue", name); err != nil {
		return "", err
	}
	return name, nil
}

func (s *Server) getStreamGroups(q *request) error {
	name, err := s.streamParam(q, auth.Read)
	if err != nil {
		return err
	}
	si, err := s.broker.Stream(q.param("vhost"), name)
	if err != nil {
		return streamError(q, err)
	}
	return q.reply(toStreamGroups(s.broker.NodeName(), si))
}

func (s *Server) getStreamGroup(q *request) error {
	name, err := s.streamParam(q, auth.Read)
	if err != nil {
		return err
	}
	g, err := s.broker.StreamGroup(q.param("vhost"), name, q.param("group"))
	if err != nil {
		return streamError(q, err)
	}
	return q.reply(toStreamGroup(s.broker.NodeName(), g))
}

func (s *Server) deleteStreamGroup(q *request) error {
	name, err := s.streamParam(q, auth.Configure)
	if err != nil {
		return err
	}
	if err := s.broker.DeleteStreamGroup(q.param("vhost"), name, q.param("group")); err != nil {
		return streamError(q, err)
	}
	return q.noContent(false)
}

func (s *Server) resetStreamGroup(q *request) error {
	name, err := s.streamParam(q, auth.Configure)
	if err != nil {
		return err
	}
	var body struct {
		Offset any `json:"offset"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	to, err := offsetJSON(body.Offset)
	if err != nil {
		return err
	}
	if err := s.broker.ResetStreamGroup(q.param("vhost"), name, q.param("group"), to); err != nil {
		return streamError(q, err)
	}
	return q.noContent(false)
}

// offsetJSON reads a reset's "offset": "first", "last", "next", a
// non-negative integer, or an RFC 3339 timestamp.
func offsetJSON(v any) (server.StreamOffset, error) {
	const want = `offset must be "first", "last", "next", a non-negative integer or an RFC 3339 timestamp`
	switch x := v.(type) {
	case nil:
		return server.StreamOffset{}, badRequest("[{error,{key_missing,offset}}]")
	case json.Number:
		n, err := x.Int64()
		if err != nil || n < 0 {
			return server.StreamOffset{}, badRequest("%s, not %s", want, x)
		}
		return server.StreamOffset{Kind: "offset", Offset: n}, nil
	case string:
		switch x {
		case "first", "last", "next":
			return server.StreamOffset{Kind: x}, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return server.StreamOffset{Kind: "timestamp", Time: t}, nil
		}
		return server.StreamOffset{}, badRequest("%s, not %q", want, x)
	}
	return server.StreamOffset{}, badRequest("%s", want)
}

// streams emits Warren's stream gauges: per partition its first and next
// offset, per group its lag (summed over the partitions) and per group
// and partition its lag. At most the per-object limit of streams and of
// groups; on /metrics too, since a lag summed over the node's groups
// would tell nothing.
func (e *promScrape) streams() {
	ss := e.c.s.broker.Streams()
	if len(ss) > e.limit() {
		ss, e.truncated = ss[:e.limit()], true
	}
	groups := 0
	for _, si := range ss {
		for _, p := range si.Partitions {
			l := []string{"vhost", si.VHost, "stream", si.Name, "partition", strconv.Itoa(p.Partition)}
			e.gauge("warren_stream_partition_first_offset", "The first retained offset of a stream partition", l, float64(p.First))
			e.gauge("warren_stream_partition_next_offset", "The offset the next message of a stream partition gets", l, float64(p.Next))
		}
		for _, g := range si.Groups {
			if groups++; groups > e.limit() {
				e.truncated = true
				break
			}
			l := []string{"vhost", si.VHost, "stream", si.Name, "group", g.Name}
			e.gauge("warren_stream_group_lag", "Messages of a stream a consumer group has yet to process, summed over the partitions", l, float64(g.Lag))
			for _, p := range g.Partitions {
				pl := append(l[:len(l):len(l)], "partition", strconv.Itoa(p.Partition))
				e.gauge("warren_stream_group_partition_lag", "Messages of a stream partition a consumer group has yet to process", pl, float64(p.Lag))
			}
		}
	}
}
