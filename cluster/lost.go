package cluster

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// A process that dies (kill -9, a crash) has every connection it held
// closed by its kernel at once, and its listener refuses from then on.
// Its peers see that long before their probes (3.5 probe rounds) or
// Raft's heartbeat timeout (1.5 to 3 s, then an election timeout) would
// tell them, as Erlang distribution tells RabbitMQ's nodes at once: a
// connection from a peer that ends makes this node dial the peer's
// listener (so does the end of this node's own Raft link to the peer; up
// to three times, 100 ms apart, for a peer that closes its connections
// before its listener), and a refusal makes it lost now (peerLost). Anything else
// (the dial works, or times out: a loaded or partitioned peer) leaves it
// to the probes and timeouts.

// connLost runs when a connection accepted from node ended (its reader
// saw the end, or its transport closed it), or this node's Raft link to
// it did.
func (n *Node) connLost(node string) {
	if node == "" || node == n.cfg.NodeName {
		return
	}
	n.mu.Lock()
	if n.closing || n.checking[node] {
		n.mu.Unlock()
		return
	}
	n.checking[node] = true
	n.wg.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.wg.Done()
		// A peer stopping cleanly may close its connections a moment
		// before its listener: asked again shortly, it refuses.
		at := time.Now()
		refused := n.refuses(node)
		for i := 1; i < lostChecks && !refused; i++ {
			select {
			case <-time.After(lostCheckGap):
			case <-n.ctx.Done():
			}
			if n.ctx.Err() != nil {
				break
			}
			at = time.Now()
			refused = n.refuses(node)
		}
		n.mu.Lock()
		delete(n.checking, node)
		n.mu.Unlock()
		if refused {
			n.peerLost(node, at)
		}
	}()
}

// lostChecks is how many times connLost dials a peer whose connection
// ended, lostCheckGap apart, before it leaves it to the probes.
const (
	lostChecks   = 3
	lostCheckGap = 100 * time.Millisecond
)

// refuses reports whether node's listener refuses a connection now.
func (n *Node) refuses(node string) bool {
	if !n.ready.Load() {
		return false // n.meta is not set yet
	}
	var addr string
	for _, s := range n.meta.GetConfiguration().Configuration().Servers {
		if string(s.ID) == node {
			addr = string(s.Address)
		}
	}
	if addr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.timing.Probe)
	defer cancel()
	c, err := n.opts.Dial(ctx, addr)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// peerLost: node's process was found gone at at (its listener refused a
// dial begun then). Its members see it down now (the probe round that
// follows no longer counts it running), and the groups it led here elect
// another leader now (Campaign): the metadata group, then those
// Options.PeerLost looks after. A new process of node that completed a
// handshake since at (it restarted that fast) is not lost.
func (n *Node) peerLost(node string, at time.Time) {
	if !n.members.lost(node, at) {
		return // known down already
	}
	n.log.Warn().Str("peer_node", node).Msg("cluster peer lost: its connections ended and its listener refuses")
	select {
	case n.probeNow <- struct{}{}:
	default:
	}
	n.lostNow(node)
}

// lostNow is what follows once node is marked lost (membership.lost):
// the campaigns and Options.PeerLost.
func (n *Node) lostNow(node string) {
	if n.meta != nil && n.metaTrans != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			self := n.cfg.NodeName
			Campaign(n.meta, self, node, 0, CampaignStagger, n.ctx.Done(), func() error { return TimeoutNow(n.metaTrans, self) })
		}()
	}
	if n.opts.PeerLost != nil {
		n.opts.PeerLost(node)
	}
}

// CampaignStagger is how long the second surviving voter of a group
// waits before standing for election in the first one's place (and the
// third twice that): see Campaign.
const CampaignStagger = 300 * time.Millisecond

// Campaign makes r, a voter of a group whose leader was node lost, stand
// for election now instead of after its heartbeat timeout, and reports
// whether it did. Only one surviving voter should (two at once split the
// vote, and a split vote waits an election timeout): the first of the
// voters in name order, less lost, at once; the next after stagger if
// the group still has no leader (the first lost the vote: its log was
// behind, or it is gone too), and so on. It returns at once when r is no
// follower of lost, and early when stop closes.
//
// standNow sends r a TimeoutNow (TimeoutNow does, through a group's
// transport), Raft's request that a follower start an election at once
// (the last step of a leadership transfer): r becomes a candidate whose
// vote requests the other voters grant although they still know lost as
// leader, if its log is as up to date as theirs (Raft's rule: a stale
// replica never wins).
//
// lostTerm is the term in which r last knew lost as its leader (0: not
// known), for the first voter's check above.
func Campaign(r *raft.Raft, self, lost string, lostTerm uint64, stagger time.Duration, stop <-chan struct{}, standNow func() error) bool {
	if !followsLost(r, lost) {
		return false
	}
	voters, ok := Voters(r, lost)
	if !ok {
		return false
	}
	slices.Sort(voters)
	rank := slices.Index(voters, self)
	if rank < 0 {
		return false
	}
	if rank > 0 {
		timer := time.NewTimer(time.Duration(rank) * stagger)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-stop:
			return false
		}
		if !followsLost(r, lost) {
			return false
		}
	} else if lostTerm != 0 && r.CurrentTerm() > lostTerm {
		// r has seen a vote request since lost led: another voter
		// stands (the one lost handed its leadership to as it stopped,
		// or one whose own timeout ran out). Standing now would depose
		// it as it wins; should it lose, the next voter stands after
		// stagger.
		return false
	}
	return standNow() == nil
}

// votersOf lists the voters of r's latest configuration but except, in
// its order; false if raft cannot tell (it is shutting down).
func Voters(r *raft.Raft, except string) ([]string, bool) {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	var voters []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != except {
			voters = append(voters, string(s.ID))
		}
	}
	return voters, true
}

// TimeoutNow sends the raft on t (this node's member of a group, named
// self) a TimeoutNow: it stands for election at once.
func TimeoutNow(t raft.Transport, self string) error {
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: []byte(t.LocalAddr())}}
	var resp raft.TimeoutNowResponse
	return t.TimeoutNow(raft.ServerID(self), t.LocalAddr(), req, &resp)
}

// followsLost: r follows and its leader is lost, or none since lost's
// (a follower whose heartbeat timed out becomes a candidate, and one
// that heard another leader names it).
func followsLost(r *raft.Raft, lost string) bool {
	if r.State() != raft.Follower {
		return false
	}
	_, id := r.LeaderWithID()
	return string(id) == lost || id == ""
}
