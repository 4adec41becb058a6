package server

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// forget_cluster_node (issue 14, section 1), as rabbitmqctl has it: a
// stopped node is taken out of the cluster (the metadata group's
// configuration, cluster.Node.Remove), and the queues it was the home of
// are deleted everywhere (RabbitMQ's forget_all_durable deletes a
// forgotten node's classic queues: their messages were on it). A node
// that runs is refused, the node answering included (RabbitMQ refuses a
// running one; its --offline mode, for a node whose whole cluster is
// down, has no equivalent here).

// opNodeForget deletes every queue homed on metaCmd.Node (cluster_meta.go
// applies it through applyNodeForget).
const opNodeForget = "node.forget"

// forgetPing bounds the check that a node to forget does not answer.
const forgetPing = 2 * time.Second

// ForgetError is why ForgetClusterNode refused, in RabbitMQ's words.
type ForgetError struct {
	Node   string
	Reason string // "not_a_cluster_node", "rabbit_running", "not_clustered"
}

func (e *ForgetError) Error() string {
	switch e.Reason {
	case "not_a_cluster_node":
		return fmt.Sprintf("node %s: the node selected is not in the cluster", e.Node)
	case "rabbit_running":
		return fmt.Sprintf("node %s is running: it must be stopped before it can be removed from the cluster", e.Node)
	case "not_clustered":
		return "this node is not in a cluster"
	}
	return fmt.Sprintf("cannot forget node %s: %s", e.Node, e.Reason)
}

// ForgetClusterNode removes the stopped node name from the cluster and
// deletes the queues homed on it. It returns how many queues were
// deleted. Refused (a *ForgetError) for a single node, a name that is not
// a member, and a member that runs (as this node sees it: one that
// answered a probe in the last three).
func (s *Server) ForgetClusterNode(ctx context.Context, name string) (int, error) {
	n := s.cluster
	if n == nil {
		return 0, &ForgetError{Node: name, Reason: "not_clustered"}
	}
	found := false
	for _, m := range n.Members() {
		if m.Name != name {
			continue
		}
		found = true
		if m.Running {
			return 0, &ForgetError{Node: name, Reason: "rabbit_running"}
		}
	}
	if !found {
		return 0, &ForgetError{Node: name, Reason: "not_a_cluster_node"}
	}
	// The probes may not have seen a node that just started: ask it.
	pctx, cancel := context.WithTimeout(ctx, forgetPing)
	_, err := n.Call(pctx, name, "cluster.ping", nil)
	cancel()
	if err == nil {
		return 0, &ForgetError{Node: name, Reason: "rabbit_running"}
	}
	// The queues first: a failure leaves the node a member, and forgetting
	// it again finishes the work (the deletion of what is gone already
	// deletes nothing). The other way round a failure would leave queues
	// homed on a node no longer in the cluster.
	res, err := s.propose(&metaCmd{Op: opNodeForget, Node: name})
	if err != nil {
		return 0, fmt.Errorf("deleting the queues of node %s: %w", name, err)
	}
	if err := n.Remove(ctx, name); err != nil {
		return res.N, fmt.Errorf("removing node %s from the cluster: %w", name, err)
	}
	// Its quorum queue replicas go, as rabbitmqctl's forget shrinks them.
	if cs, err := s.ShrinkQuorum(name); err != nil {
		s.log.Warn().Err(err).Str("node", name).Msg("forgotten node: quorum queues not shrunk")
	} else {
		for _, c := range cs {
			if c.Result != "ok" {
				s.log.Warn().Str("node", name).Str("queue", c.Name).Str("vhost", c.VHost).Str("error", c.Result).Msg("forgotten node: quorum queue not shrunk")
			}
		}
	}
	s.log.Info().Str("node", name).Int("queues_deleted", res.N).Msg("cluster node forgotten")
	return res.N, nil
}

// applyNodeForget deletes every replicated queue homed on node, in every
// vhost (sorted, so every node deletes alike).
func (m *meta) applyNodeForget(node string) metaResult {
	deleted := 0
	var firstErr error
	for _, v := range m.s.vhostList() {
		for _, name := range v.homedOn(node) {
			if _, err := v.applyQueueDelete(name, 0); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			deleted++
		}
	}
	return metaResult{N: deleted, Err: encodeErr(firstErr)}
}

// homedOn lists, sorted, the classic queues homed on node (a quorum
// queue declared there has replicas elsewhere: forgetting the node
// shrinks it instead).
func (v *vhost) homedOn(node string) []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []string
	for name, r := range v.replicas {
		if v.queues[name] != nil && r.home == node && len(r.members) == 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
