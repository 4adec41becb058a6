package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// GroupTransport is a Raft group's transport over the node's listener: a
// raft.NetworkTransport whose AppendEntries does not fail at once for a
// follower that does not answer.
//
// Why: hashicorp/raft (v1.8.0, replication.go) counts each failed
// AppendEntries to a follower and, before the next attempt, sleeps
// 10 ms * 2^(failures-2), capped at 10.24 s from the twelfth failure on;
// only a successful one resets the count. A leader tries a dead follower
// every commit timeout, so ten seconds after a node died each attempt
// waits 10 s, and a node that comes back waited up to that long (plus a
// failure for each stale pooled connection) before the leader sent it
// anything: it caught up, and served, 5 to 10 s after its restart, with
// seconds of replication it could have had.
//
// So a failed AppendEntries is retried here at once while it failed fast
// (stale pooled connections), then waits until the follower answers the
// node's probes again (Timing.Probe) and retries, for at most
// Timing.FollowerWait: raft sees one failure per FollowerWait instead of
// one per attempt, its backoff stays in milliseconds for minutes of
// downtime, and the returning follower gets its entries within about a
// probe of answering. Heartbeats go through AppendEntries too; they
// wait alike (a dead follower has no use for them). The wait ends when
// the node or the transport closes. InstallSnapshot, votes and the
// pipeline are the NetworkTransport's.
//
// raft.Shutdown closes the transport only after its goroutines ended: a
// group stopped while a follower is down should Close its transport
// first (Node.Close does, for every group), else Shutdown waits for up to
// FollowerWait.
type GroupTransport struct {
	*raft.NetworkTransport
	n         *Node
	closed    chan struct{}
	closeOnce sync.Once
}

var (
	_ raft.Transport   = (*GroupTransport)(nil)
	_ raft.WithClose   = (*GroupTransport)(nil)
	_ raft.WithPreVote = (*GroupTransport)(nil)
)

// fastFailure: an AppendEntries that failed within this was most likely
// sent on a pooled connection the peer had closed; it is retried at once
// (at most once per pooled connection, and one more for a fresh one).
const fastFailure = 100 * time.Millisecond

// AppendEntries implements raft.Transport; see GroupTransport.
func (t *GroupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	deadline := time.Now().Add(t.n.timing.FollowerWait)
	fast := 0
	for {
		start := time.Now()
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		if err == nil {
			return nil
		}
		if time.Since(start) < fastFailure && fast <= maxPool {
			fast++
			continue
		}
		if !t.waitAnswer(string(id), time.Now(), deadline) {
			return err
		}
		fast = 0
	}
}

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

// Close implements raft.WithClose: the waits end, then the
// NetworkTransport closes (and the group is unregistered).
func (t *GroupTransport) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return t.NetworkTransport.Close()
}
