package quorum

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster"
)

// A replica reopened after its node restarted (RecoverMember) follows no
// leader, and raft makes it stand only after its heartbeat timeout: 5 to
// 10 s with a cluster's timeouts, kept long so that idle groups wake
// rarely. So, as the cluster package's restarted metadata member does
// (cluster.ShouldStand has the rule), while such a replica knows no
// leader its type asks the group's other voters what they know
// (Config.Views, answered by Type.Views there) every cluster.RestartRound,
// one question per node for all its groups, and each replica that
// should stand does.

// Views reports this node's view of each of groups, as node asker is told
// it (Config.Views, cluster.ViewOf).
func (t *Type) Views(asker string, groups []uint64) []cluster.View {
	qs := make([]*Queue, len(groups))
	asking := make([]bool, len(groups))
	t.mu.Lock()
	for i, g := range groups {
		qs[i] = t.queues[g]
		asking[i] = qs[i] != nil && t.restarting[qs[i]] != nil
	}
	t.mu.Unlock()
	out := make([]cluster.View, len(groups))
	for i, q := range qs {
		if q != nil {
			out[i] = cluster.ViewOf(q.r, asker, asking[i])
		}
	}
	return out
}

// restarting is a reopened replica waiting for a leader.
type restarting struct {
	since time.Time
	stood time.Time // when it last stood (zero: never)
}

// awaitLeader has the type look after reopened replica q until it sees a
// leader (see above). No-op without Config.Views.
func (t *Type) awaitLeader(q *Queue) {
	if t.cfg.Views == nil || q.place == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.restarting == nil {
		t.restarting = map[*Queue]*restarting{}
	}
	t.restarting[q] = &restarting{since: time.Now()}
	if !t.restartLoop {
		t.restartLoop = true
		go t.electRestarted()
	}
}

// electRestarted runs rounds while reopened replicas wait for a leader.
func (t *Type) electRestarted() {
	for {
		time.Sleep(cluster.RestartRound)
		t.mu.Lock()
		if t.closed {
			t.restarting = nil
		}
		now := time.Now()
		for q, rs := range t.restarting {
			_, id := q.r.LeaderWithID()
			if id != "" || q.r.State() == raft.Leader || q.r.State() == raft.Shutdown || now.Sub(rs.since) > cluster.RestartAskFor {
				delete(t.restarting, q)
			}
		}
		if len(t.restarting) == 0 {
			t.restartLoop = false
			t.mu.Unlock()
			return
		}
		var due []*Queue
		for q, rs := range t.restarting {
			if now.Sub(rs.stood) >= cluster.RestartRestand {
				due = append(due, q)
			}
		}
		t.mu.Unlock()
		for _, q := range t.restartRound(due) {
			t.mu.Lock()
			if rs := t.restarting[q]; rs != nil {
				rs.stood = time.Now()
			}
			t.mu.Unlock()
			t.logErr(q.standNow(), "quorum queue: cannot stand for election after a restart")
		}
	}
}

// restartRound asks the other voters of qs' groups what they know, one
// question per node, and returns the replicas that should stand.
func (t *Type) restartRound(qs []*Queue) []*Queue {
	ask := map[string][]uint64{}
	for _, q := range qs {
		others, _ := cluster.Voters(q.r, t.cfg.NodeID)
		for _, node := range others {
			ask[node] = append(ask[node], q.gid)
		}
	}
	views := make(map[uint64]map[string]cluster.View, len(qs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for node, gids := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), cluster.RestartRound)
			defer cancel()
			vs, err := t.cfg.Views(ctx, node, gids)
			if err != nil || len(vs) != len(gids) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, g := range gids {
				if views[g] == nil {
					views[g] = map[string]cluster.View{}
				}
				views[g][node] = vs[i]
			}
		}()
	}
	wg.Wait()
	var stand []*Queue
	for _, q := range qs {
		if cluster.ShouldStand(q.r, t.cfg.NodeID, views[q.gid]) {
			stand = append(stand, q)
		}
	}
	return stand
}
