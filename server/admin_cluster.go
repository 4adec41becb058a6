package server

import (
	"context"
	"time"

	"github.com/warrenmq/warren/cluster"
)

// The admin API's view of the cluster (issue 14, section 1): its members,
// whether each runs, and the metadata group's leader; a single node is a
// cluster of one.

// ClusterMember is one node of the cluster.
type ClusterMember struct {
	Name    string
	Addr    string // its cluster listener ("" for a single node)
	Running bool
	Voter   bool // a voter of the metadata group
	Leader  bool // the metadata group's leader
	Self    bool // the node answering
}

// ClusterStatus lists the cluster's nodes by name.
func (s *Server) ClusterStatus() []ClusterMember {
	n := s.cluster
	if n == nil {
		return []ClusterMember{{Name: s.NodeName(), Running: true, Voter: true, Leader: true, Self: true}}
	}
	var out []ClusterMember
	for _, m := range n.Members() {
		out = append(out, ClusterMember{Name: m.Name, Addr: m.Addr, Running: m.Running, Voter: m.Voter, Leader: m.Leader, Self: m.Name == n.Name()})
	}
	return out
}

// HandleCluster registers h for the cluster RPC method (the management
// server answers other nodes' questions about this one); it does nothing
// on a single node.
func (s *Server) HandleCluster(method string, h func(ctx context.Context, from string, req []byte) ([]byte, error)) {
	if s.cluster != nil {
		s.cluster.Handle(method, cluster.Handler(h))
	}
}

// CallNode calls the cluster RPC method on node, waiting at most d.
func (s *Server) CallNode(node, method string, req []byte, d time.Duration) ([]byte, error) {
	if s.cluster == nil {
		return nil, cluster.ErrUnknownNode
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.cluster.Call(ctx, node, method, req)
}
