package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// form runs while this node has no stored state: it bootstraps the
// metadata group or joins a cluster (Start's comment), retrying every
// Timing.Probe until the group has state here or the node closes.
func (n *Node) form() {
	defer n.wg.Done()
	var lastWait time.Time
	for attempt := 0; ; attempt++ {
		if n.Bootstrapped() {
			return
		}
		done, waiting := n.formOnce()
		if done {
			return
		}
		if waiting != "" && time.Since(lastWait) >= 15*time.Second {
			n.log.Info().Str("waiting_for", waiting).Msg("cluster not formed yet")
			lastWait = time.Now()
		}
		select {
		case <-time.After(n.timing.Probe):
		case <-n.ctx.Done():
			return
		}
	}
}

// formOnce makes one attempt; waiting says what the node waits for.
func (n *Node) formOnce() (done bool, waiting string) {
	ctx, cancel := context.WithTimeout(n.ctx, 2*n.timing.Probe+time.Second)
	defer cancel()
	switch {
	case n.cfg.Join != "":
		if err := n.join(ctx, []string{n.cfg.Join}); err != nil {
			return false, "join through " + n.cfg.Join + ": " + err.Error()
		}
		return true, ""
	case len(n.cfg.Seeds) == 0:
		return n.bootstrap([]raft.Server{{ID: raft.ServerID(n.cfg.NodeName), Address: raft.ServerAddress(n.advertise)}}), ""
	}
	// Ask every seed who it is and whether it is in a cluster already.
	type answer struct {
		seed string
		h    helloInfo
		err  error
	}
	answers := make([]answer, len(n.cfg.Seeds))
	var wg sync.WaitGroup
	for i, s := range n.cfg.Seeds {
		wg.Go(func() {
			if s == n.advertise {
				answers[i] = answer{seed: s, h: helloInfo{Name: n.cfg.NodeName, Seeds: sortedSeeds(n.cfg.Seeds)}}
				return
			}
			h, err := n.hello(ctx, s)
			answers[i] = answer{s, h, err}
		})
	}
	wg.Wait()
	var inCluster, missing, differ []string
	servers := make([]raft.Server, 0, len(answers))
	for _, a := range answers {
		switch {
		case a.err != nil:
			missing = append(missing, a.seed)
		case a.h.HasState:
			inCluster = append(inCluster, a.seed)
		case !slices.Equal(a.h.Seeds, sortedSeeds(n.cfg.Seeds)):
			differ = append(differ, a.seed+" ("+strings.Join(a.h.Seeds, ",")+")")
		}
		if a.err == nil {
			servers = append(servers, raft.Server{ID: raft.ServerID(a.h.Name), Address: raft.ServerAddress(a.seed)})
		}
	}
	if len(inCluster) > 0 {
		// A seed is in a cluster already (this node's disk was wiped, or it
		// started after the others formed): join it.
		if err := n.join(ctx, inCluster); err != nil {
			return false, "join through " + strings.Join(inCluster, ",") + ": " + err.Error()
		}
		return true, ""
	}
	switch {
	case len(differ) > 0:
		n.log.Error().Strs("seeds", n.cfg.Seeds).Strs("other_seeds", differ).Msg("cluster seeds differ between nodes: not bootstrapping")
		return false, "seeds that agree on the seed list"
	case len(missing) > 0:
		return false, "seeds " + strings.Join(missing, ", ")
	case !n.inSeeds:
		return false, "a seed to be in a cluster (this node is not a seed)"
	}
	for i, s := range servers {
		if slices.ContainsFunc(servers[:i], func(o raft.Server) bool { return o.ID == s.ID }) {
			n.log.Error().Str("name", string(s.ID)).Msg("two seeds have the same node name: not bootstrapping")
			return false, "unique seed names"
		}
	}
	return n.bootstrap(servers), ""
}

// bootstrap bootstraps the metadata group with servers; false if it
// could not (and the node has no state yet).
func (n *Node) bootstrap(servers []raft.Server) bool {
	err := n.meta.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		if n.ctx.Err() == nil {
			n.log.Warn().Err(err).Msg("cluster bootstrap failed")
		}
		return false
	}
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = string(s.ID)
	}
	if err == nil {
		n.log.Info().Strs("members", names).Msg("cluster bootstrapped")
	}
	return true
}

// join asks the first of targets that can to add this node as a voter.
func (n *Node) join(ctx context.Context, targets []string) error {
	b, _ := json.Marshal(joinRequest{Name: n.cfg.NodeName, Addr: n.advertise})
	var err error
	for _, t := range targets {
		if _, err = n.CallAddr(ctx, t, "cluster.join", b); err == nil {
			n.log.Info().Str("through", t).Msg("cluster joined")
			return nil
		}
	}
	return err
}
