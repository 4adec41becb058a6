package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// AnswerHeartbeatAt is answerHeartbeat at now, for the tests.
func (t *GroupTransport) AnswerHeartbeatAt(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, now time.Time) bool {
	return t.answerHeartbeat(target, args, resp, now)
}

// HeartbeatRefresh is heartbeatRefresh.
const HeartbeatRefresh = heartbeatRefresh
