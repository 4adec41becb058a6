package cluster

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// AnswerHeartbeatAt is answerHeartbeat at now, for the tests.
func (t *GroupTransport) AnswerHeartbeatAt(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, now time.Time) bool {
	return t.answerHeartbeat(target, args, resp, now)
}

// HeartbeatRefresh is heartbeatRefresh.
const HeartbeatRefresh = heartbeatRefresh

// CountCalls wraps n's handler of method so that each call adds one to
// count.
func (n *Node) CountCalls(method string, count *atomic.Int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.handlers[method]
	n.handlers[method] = func(ctx context.Context, from string, req []byte) ([]byte, error) {
		count.Add(1)
		return h(ctx, from, req)
	}
}
