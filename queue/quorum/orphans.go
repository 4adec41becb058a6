package quorum

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// A consumer whose node's replica left the group keeps what its channel
// was handed (opLeave) until the channel settles it, or its node is
// found down (DetachDown) or restarts (NodeRestarted: the leader saw the
// node's new process). A leader elected after such a restart did not see
// it, and the consumer, gone with the old process, would keep its
// messages checked out for as long as the node runs. So the leader asks
// the node of every consumer that is not a voter's (Config.Holds, which
// Type.Holds answers there), once the consumer has been so for
// orphanGrace, and detaches those the node no longer holds: what they
// held goes back, redelivered. A node that cannot be asked (down, an
// earlier build) is asked again later; down is DetachDown's matter.
const orphanGrace = 10 * time.Second

// orphanAsk bounds one question to a node.
const orphanAsk = 5 * time.Second

// Holds reports which of keys, consumers of group attached by this
// node, it still holds. While it has a replica of the group open or
// leaving, all of them (one attaching may be its own, not yet a voter's);
// otherwise those its replica kept when it left the group (Leave) in
// this process: a new process holds none.
func (t *Type) Holds(group uint64, keys []uint64) []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.queues[group] != nil || t.leaving[group] != nil {
		return keys
	}
	var out []uint64
	for _, k := range keys {
		if t.kept[group][k] {
			out = append(out, k)
		}
	}
	return out
}

// keep records key as a consumer of group that this node's replica kept
// as it left (see Holds).
func (t *Type) keep(group, key uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept == nil {
		t.kept = map[uint64]map[uint64]bool{}
	}
	if t.kept[group] == nil {
		t.kept[group] = map[uint64]bool{}
	}
	t.kept[group][key] = true
}

// askOrphans, on the leader: the consumers of running nodes that are not
// voters of the group, each asked about once per orphanGrace after it
// was first seen so (see orphanGrace). At most one round of questions is
// out at a time; it does not block.
func (q *Queue) askOrphans(running func(node string) bool, now time.Time) {
	if q.typ.cfg.Holds == nil {
		return
	}
	// Most groups have no consumer of another node: raft is not asked
	// for its configuration then (a request to its goroutine).
	q.mu.Lock()
	others := len(q.orphans) > 0 || slices.ContainsFunc(q.m.consumers, func(c *consumer) bool {
		return c.node != q.typ.cfg.NodeID && running(c.node)
	})
	q.mu.Unlock()
	if !others {
		return
	}
	f := q.r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := f.Configuration().Servers
	voter := func(node string) bool {
		return slices.ContainsFunc(voters, func(s raft.Server) bool { return s.Suffrage == raft.Voter && string(s.ID) == node })
	}
	ask := map[string][]uint64{}
	q.mu.Lock()
	seen := make(map[uint64]bool, len(q.orphans))
	for _, c := range q.m.consumers {
		if c.node == q.typ.cfg.NodeID || !running(c.node) || voter(c.node) {
			continue
		}
		seen[c.key] = true
		if q.orphans == nil {
			q.orphans = map[uint64]time.Time{}
		}
		since, ok := q.orphans[c.key]
		if !ok {
			q.orphans[c.key] = now
			continue
		}
		if !q.askingOrphans && now.Sub(since) >= orphanGrace && !q.detaching[c.key] {
			ask[c.node] = append(ask[c.node], c.key)
			q.orphans[c.key] = now // next time orphanGrace from now
		}
	}
	for k := range q.orphans {
		if !seen[k] {
			delete(q.orphans, k)
		}
	}
	if len(ask) == 0 {
		q.mu.Unlock()
		return
	}
	q.askingOrphans = true
	q.mu.Unlock()
	go func() {
		defer func() {
			q.mu.Lock()
			q.askingOrphans = false
			q.mu.Unlock()
		}()
		for node, keys := range ask {
			ctx, cancel := context.WithTimeout(context.Background(), orphanAsk)
			held, err := q.typ.cfg.Holds(ctx, node, q.gid, keys)
			cancel()
			if err != nil || q.r.State() != raft.Leader {
				continue
			}
			var gone []uint64
			for _, k := range keys {
				if !slices.Contains(held, k) {
					gone = append(gone, k)
				}
			}
			if len(gone) == 0 {
				continue
			}
			q.typ.logErr(fmt.Errorf("%d consumers of node %s", len(gone), node),
				fmt.Sprintf("quorum queue %q: consumers their node no longer holds detached (what they held is delivered again)", q.decl.Name))
			q.mu.Lock()
			q.markDetaching(gone)
			q.mu.Unlock()
			q.proposeDetach(gone)
		}
	}()
}
