package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// GroupTransport is one Raft group's raft.Transport over the node's
// shared connections (raftmux.go): its requests to a peer go on the one
// connection this node keeps to that peer for every group, and the
// peer's requests for the group arrive from the peer's. A group costs
// no connection, goroutine or buffer of its own while it is idle (a
// raft.NetworkTransport per group had a listener goroutine, a pool of up
// to three connections per peer and 256 KiB of buffer per connection: a
// few hundred idle quorum queues held hundreds of megabytes, over the
// broker's memory limit, and kept the collector running).
//
// Heartbeats go to raft's heartbeat handler at once, as NetworkTransport
// has them (never behind a group's AppendEntries waiting for its disk);
// a group's other requests from one peer are served in order. There is
// no pipeline: raft sends a follower one AppendEntries at a time, each
// carrying every entry appended since the one before. InstallSnapshot
// opens a connection of its own for the snapshot's stream.
//
// An AppendEntries that fails does not fail at once for a follower that
// does not answer. Why: hashicorp/raft (v1.8.0, replication.go) counts
// each failed AppendEntries to a follower and, before the next attempt,
// sleeps 10 ms * 2^(failures-2), capped at 10.24 s from the twelfth
// failure on; only a successful one resets the count. A leader tries a
// dead follower every commit timeout, so ten seconds after a node died
// each attempt waits 10 s, and a node that came back waited up to that
// long before the leader sent it anything: it caught up, and served, 5 to
// 10 s after its restart. So a failed AppendEntries is retried here at
// once while it failed fast (a connection the peer had closed), then
// waits until the follower answers the node's probes again (Timing.Probe)
// and retries, for at most Timing.FollowerWait: raft sees one failure per
// FollowerWait instead of one per attempt, its backoff stays in
// milliseconds for minutes of downtime, and the returning follower gets
// its entries within about a probe of answering. Heartbeats go through
// AppendEntries too; they wait alike (a dead follower has no use for
// them). The wait ends when the node or the transport closes.
//
// raft.Shutdown closes the transport only after its goroutines ended: a
// group stopped while a follower is down should Close its transport
// first (Node.Close does, for every group), else Shutdown waits for up to
// FollowerWait.
type GroupTransport struct {
	n       *Node
	group   string
	consume chan raft.RPC

	hbMu sync.Mutex
	hb   func(raft.RPC)

	commitLimit atomic.Pointer[func() uint64] // LimitCommit's
	hinted      atomic.Uint64                 // the commit index raft was last told, at most (raftServer.commitFirst)

	seenMu sync.Mutex
	seen   map[raft.ServerAddress]heartbeatSeen // each follower's last heartbeat answer (answerHeartbeat)
	// refreshNs: see SetHeartbeatTimeout; 0 is heartbeatRefresh.
	refreshNs atomic.Int64

	closed    chan struct{}
	closeOnce sync.Once
}

var (
	_ raft.Transport   = (*GroupTransport)(nil)
	_ raft.WithClose   = (*GroupTransport)(nil)
	_ raft.WithPreVote = (*GroupTransport)(nil)
)

// Transport returns group's transport over the node's connections (see
// GroupTransport). Closing it unregisters the group: requests for it are
// answered with an error from then on. The metadata group uses one, and
// so does each quorum queue's group.
func (n *Node) Transport(group string) (*GroupTransport, error) {
	if group == "" || len(channelSnapshot+group) > 255 {
		return nil, fmt.Errorf("cluster: group name %q: want 1 to %d bytes", group, 255-len(channelSnapshot))
	}
	t := &GroupTransport{n: n, group: group, consume: make(chan raft.RPC), closed: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return nil, ErrClosed
	}
	if _, ok := n.groups[group]; ok {
		return nil, fmt.Errorf("cluster: group %q already has a transport", group)
	}
	n.groups[group] = t
	return t, nil
}

// Consumer implements raft.Transport.
func (t *GroupTransport) Consumer() <-chan raft.RPC { return t.consume }

// LocalAddr implements raft.Transport: the node's advertised address.
func (t *GroupTransport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.n.advertise) }

// AppendEntriesPipeline implements raft.Transport: not supported, raft
// sends a follower one AppendEntries at a time, each with every entry
// appended since the one before. (A pipeline over the link was measured,
// session 12: no change of the cluster's confirmed rate or its p99, and a
// goroutine more per follower of every group.)
func (t *GroupTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// fastFailure: an AppendEntries that failed within this most likely went
// out on a connection the peer had closed (it restarted); it is retried
// at once, at most fastRetries times.
const (
	fastFailure = 100 * time.Millisecond
	fastRetries = 2
)

// AppendEntries implements raft.Transport; see GroupTransport.
func (t *GroupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	heartbeat := isHeartbeat(args)
	if heartbeat && t.answerHeartbeat(target, args, resp, time.Now()) {
		return nil
	}
	deadline := time.Now().Add(t.n.timing.FollowerWait)
	fast := 0
	for {
		start := time.Now()
		err := t.call(target, args, resp)
		if err == nil {
			if heartbeat && resp.Success {
				t.sawHeartbeat(target, args.Term, resp, start)
			}
			return nil
		}
		if time.Since(start) < fastFailure && fast < fastRetries {
			fast++
			continue
		}
		if !t.waitAnswer(string(id), time.Now(), deadline) {
			return err
		}
		fast = 0
	}
}

// Heartbeats answered here. hashicorp/raft's leader sends each follower
// of each group a heartbeat every HeartbeatTimeout/10 to 2x that (150 to
// 300 ms for the metadata group, 500 ms to 1 s for a quorum queue),
// besides the AppendEntries it sends every CommitTimeout even when idle,
// and either tells the follower its leader is alive. With a thousand idle
// groups that is most of what a node does at rest. So a heartbeat to a
// follower that answered one of the same term with success less than
// heartbeatRefresh ago, over a link that has carried an answer from that
// node within heartbeatRefresh/2 (the peer is alive and serving), is
// answered here with that answer instead of sent: the follower gets a
// real one at least every heartbeatRefresh plus a heartbeat interval
// (1.3 s, under the 1.5 s it waits before standing for election; a quorum
// queue's group, SetHeartbeatTimeout: 2.5 s plus 1 s, under its 5 s), and
// AppendEntries every commit timeout or up to twice that. raft's
// heartbeat uses an answer only to note the follower's contact (its leader lease,
// VerifyLeader): a leader cut off from a follower sees the link fall
// silent and sends its heartbeats, which fail, within heartbeatRefresh/2,
// so it loses its lease at most that much later. A follower of a higher
// term answers a real heartbeat without success (not remembered), and
// the leader learns the term from its next AppendEntries anyway.
const heartbeatRefresh = time.Second

// SetHeartbeatTimeout tells t its group's raft HeartbeatTimeout when it is
// longer than the metadata group's: a follower then waits longer before
// it stands for election, and its real heartbeats may come as rarely as
// every half of it (heartbeatRefresh is the least). Call it before the
// group's raft starts.
func (t *GroupTransport) SetHeartbeatTimeout(d time.Duration) {
	t.refreshNs.Store(int64(max(heartbeatRefresh, d/2)))
}

// refresh is how long a follower's heartbeat answer may stand for the
// next heartbeats (see heartbeatRefresh).
func (t *GroupTransport) refresh() time.Duration {
	if d := t.refreshNs.Load(); d > 0 {
		return time.Duration(d)
	}
	return heartbeatRefresh
}

// heartbeatSeen is a follower's last successful heartbeat answer.
type heartbeatSeen struct {
	term uint64
	at   time.Time
	resp raft.AppendEntriesResponse
}

// answerHeartbeat fills resp with target's last answer to a heartbeat
// and reports true when that may stand for sending this one (see
// heartbeatRefresh).
func (t *GroupTransport) answerHeartbeat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, now time.Time) bool {
	t.seenMu.Lock()
	seen, ok := t.seen[target]
	t.seenMu.Unlock()
	refresh := t.refresh()
	if !ok || seen.term != args.Term || now.Sub(seen.at) >= refresh {
		return false
	}
	if !t.n.link(string(target)).answeredSince(now.Add(-refresh / 2)) {
		return false
	}
	*resp = seen.resp
	return true
}

// sawHeartbeat remembers target's successful answer to a heartbeat of
// term sent at sent.
func (t *GroupTransport) sawHeartbeat(target raft.ServerAddress, term uint64, resp *raft.AppendEntriesResponse, sent time.Time) {
	t.seenMu.Lock()
	if t.seen == nil {
		t.seen = map[raft.ServerAddress]heartbeatSeen{}
	}
	t.seen[target] = heartbeatSeen{term: term, at: sent, resp: *resp}
	t.seenMu.Unlock()
}

// RequestVote implements raft.Transport.
func (t *GroupTransport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.call(target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *GroupTransport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.call(target, args, resp)
}

// TimeoutNow implements raft.Transport.
func (t *GroupTransport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.call(target, args, resp)
}

// EncodePeer implements raft.Transport.
func (t *GroupTransport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer implements raft.Transport.
func (t *GroupTransport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// LimitCommit makes every AppendEntries the group sends tell a commit
// index no later than limit() (a leader's durable index, when it stores
// its own entries before they are synced: quorum's early stores).
func (t *GroupTransport) LimitCommit(limit func() uint64) { t.commitLimit.Store(&limit) }

// SetHeartbeatHandler implements raft.Transport.
func (t *GroupTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.hbMu.Lock()
	t.hb = cb
	t.hbMu.Unlock()
}

func (t *GroupTransport) heartbeatHandler() func(raft.RPC) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	return t.hb
}

// Close implements raft.WithClose: the group is unregistered, and what
// waits on the transport ends.
func (t *GroupTransport) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		t.n.mu.Lock()
		if t.n.groups[t.group] == t {
			delete(t.n.groups, t.group)
		}
		t.n.mu.Unlock()
	})
	return nil
}

func (t *GroupTransport) isClosed() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// call sends req to the group's member at target over the node's link to
// it and decodes its answer into resp.
func (t *GroupTransport) call(target raft.ServerAddress, req, resp any) error {
	if t.isClosed() {
		return raft.ErrTransportShutdown
	}
	ae, isAppend := req.(*raft.AppendEntriesRequest)
	if isAppend {
		if f := t.commitLimit.Load(); f != nil {
			if c := (*f)(); ae.LeaderCommitIndex > c {
				ae.LeaderCommitIndex = c // raft builds a request per call
			}
		}
	}
	body, kind, err := encodeRequest(make(rbuf, 0, requestSize(req)), req)
	if err != nil {
		return err
	}
	// A heartbeat, or an AppendEntries of nothing (raft tells an idle
	// follower the commit index), waits for others to go with it
	// (frameWriter).
	lazy := isAppend && len(ae.Entries) == 0
	var out []byte
	for wait := time.Now().Add(noGroupWait); ; {
		out, err = t.n.link(string(target)).roundTrip(t, kind, body, lazy)
		if !errors.Is(err, errNoGroup) || time.Now().After(wait) {
			break
		}
		select {
		case <-time.After(noGroupRetry):
		case <-t.closed:
			return raft.ErrTransportShutdown
		}
	}
	if err != nil {
		return err
	}
	return decodeResponse(out, resp)
}

// A request for a group the peer does not have is sent again every
// noGroupRetry for noGroupWait: a new queue's members open their groups
// as they apply its record, a moment after the first leader opened its
// own and stood for election, and a vote that failed would leave it a
// candidate for an election timeout (raft's TimeoutNow does not restart
// an election under way).
const (
	noGroupWait  = time.Second
	noGroupRetry = 5 * time.Millisecond
)

// waitAnswer waits until node answers a probe round begun after since;
// false at deadline or when the transport or node closes.
func (t *GroupTransport) waitAnswer(node string, since, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		ok, next := t.n.members.seenAfter(node, since)
		if ok {
			return true
		}
		select {
		case <-next:
		case <-timer.C:
			return false
		case <-t.closed:
			return false
		case <-t.n.ctx.Done():
			return false
		}
	}
}

// snapshotScale: a snapshot's connection has IOTimeout for each this many
// bytes of it (NetworkTransport's scale).
const snapshotScale = 256 << 10

func (t *GroupTransport) snapshotDeadline(size int64) time.Time {
	d := t.n.timing.IOTimeout * time.Duration(max(1, size/snapshotScale))
	return time.Now().Add(d)
}

// InstallSnapshot implements raft.Transport: on a connection of its own
// (channel raftsnap/<group>), the request's frame, then the snapshot's
// Size bytes, then the answer's frame.
func (t *GroupTransport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if t.isClosed() {
		return raft.ErrTransportShutdown
	}
	// The transport's Close, or the node's, ends the transfer.
	ctx, cancel := context.WithCancel(t.n.ctx)
	defer cancel()
	go func() {
		select {
		case <-t.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, _, err := t.n.dial(ctx, string(target), channelSnapshot+t.group)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_ = c.SetDeadline(t.snapshotDeadline(args.Size))
	body, _, err := encodeRequest(make(rbuf, 4, 128), args)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(body, uint32(len(body)-4))
	w := bufio.NewWriterSize(c, 64<<10)
	w.Write(body)
	if _, err := io.Copy(w, data); err != nil {
		return fmt.Errorf("cluster: sending a snapshot of group %s: %w", t.group, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("cluster: sending a snapshot of group %s: %w", t.group, err)
	}
	r := bufio.NewReader(c)
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("cluster: the answer to a snapshot of group %s: %w", t.group, err)
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size < 1 || size > MaxRPCSize {
		return fmt.Errorf("cluster: the answer to a snapshot of group %s: a frame of %d bytes", t.group, size)
	}
	out := make([]byte, size-1)
	if _, err := io.ReadFull(r, out); err != nil {
		return fmt.Errorf("cluster: the answer to a snapshot of group %s: %w", t.group, err)
	}
	if hdr[4] != raftOK {
		return errors.New(string(out))
	}
	return decodeResponse(out, resp)
}
