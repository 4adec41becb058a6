package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/warrenmq/warren/server"
)

// The cluster's nodes (issue 14, section 1): /api/nodes lists every member
// with RabbitMQ's fields, asking each running one for its own figures over
// the cluster's RPC channel ("mgmt.node"); a node that does not answer is
// listed as RabbitMQ lists a stopped one. /api/cluster is Warren's: the
// members, whether each runs, the metadata group's leader, and every
// quorum queue's leader and replicas.

const (
	nodeMethod      = "mgmt.node"
	consumersMethod = "mgmt.consumers"
	nodeTimeout     = 2 * time.Second
)

// answerNodeCalls lets other nodes ask this one for its /api/nodes entry.
func (s *Server) answerNodeCalls() {
	s.broker.HandleCluster(nodeMethod, func(context.Context, string, []byte) ([]byte, error) {
		return json.Marshal(s.nodeInfo())
	})
	s.broker.HandleCluster(consumersMethod, func(_ context.Context, _ string, req []byte) ([]byte, error) {
		cs, err := s.localConsumers(string(req))
		if err != nil {
			return nil, err
		}
		return json.Marshal(cs)
	})
}

// localConsumers is /api/consumers' entries of this node's channels, of
// vhost ("" for every vhost).
func (s *Server) localConsumers(vhost string) ([]consumerJSON, error) {
	cs, err := s.broker.Consumers(vhost)
	if err != nil {
		return nil, err
	}
	node := s.broker.NodeName()
	out := make([]consumerJSON, 0, len(cs))
	for _, c := range cs {
		out = append(out, toConsumer(node, c))
	}
	return out, nil
}

// remoteConsumers is the other running nodes' /api/consumers entries, of
// vhost ("" for every vhost); a node that does not answer in time adds
// none.
func (s *Server) remoteConsumers(vhost string) []consumerJSON {
	var out []consumerJSON
	for _, m := range s.broker.ClusterStatus() {
		if m.Self || !m.Running {
			continue
		}
		b, err := s.broker.CallNode(m.Name, consumersMethod, []byte(vhost), nodeTimeout)
		if err != nil {
			continue
		}
		var got []consumerJSON
		if json.Unmarshal(b, &got) == nil {
			out = append(out, got...)
		}
	}
	return out
}

// clusterNodes is every node's /api/nodes entry, by name.
func (s *Server) clusterNodes() []nodeJSON {
	var out []nodeJSON
	for _, m := range s.broker.ClusterStatus() {
		if m.Self {
			out = append(out, s.nodeInfo())
			continue
		}
		n := nodeJSON{Name: m.Name, Type: "disc", Partitions: []string{}, ExchangeTypes: exchangeTypes, AuthMechanisms: authMechanisms}
		if m.Running {
			if b, err := s.broker.CallNode(m.Name, nodeMethod, nil, nodeTimeout); err == nil {
				var got nodeJSON
				if json.Unmarshal(b, &got) == nil && got.Name == m.Name {
					n = got
				}
			}
		}
		out = append(out, n)
	}
	return out
}

type clusterMemberJSON struct {
	Name           string `json:"name"`
	Address        string `json:"address"`
	Running        bool   `json:"running"`
	Voter          bool   `json:"voter"`
	MetadataLeader bool   `json:"metadata_leader"`
}

type clusterJSON struct {
	ClusterName    string              `json:"cluster_name"`
	Node           string              `json:"node"` // the node answering
	MetadataLeader string              `json:"metadata_leader"`
	Nodes          []clusterMemberJSON `json:"nodes"`
	QuorumQueues   []quorumReplicaJSON `json:"quorum_queues"`
}

// quorumReplicaJSON is a quorum queue's leader and replicas, as this
// node knows them (online: the members whose nodes run; a node without a
// replica names the leader its member named last, in /api/queues).
type quorumReplicaJSON struct {
	VHost   string   `json:"vhost"`
	Name    string   `json:"name"`
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
}

func (s *Server) getCluster(q *request) error {
	c := clusterJSON{ClusterName: s.broker.ClusterName(), Node: s.broker.NodeName(), Nodes: []clusterMemberJSON{}, QuorumQueues: []quorumReplicaJSON{}}
	for _, m := range s.broker.ClusterStatus() {
		c.Nodes = append(c.Nodes, clusterMemberJSON{Name: m.Name, Address: m.Addr, Running: m.Running, Voter: m.Voter, MetadataLeader: m.Leader})
		if m.Leader {
			c.MetadataLeader = m.Name
		}
	}
	// What this node knows, asking no other node: /api/cluster answers
	// while peers do not.
	for _, r := range s.broker.QuorumReplicas() {
		c.QuorumQueues = append(c.QuorumQueues, quorumReplicaJSON{VHost: r.VHost, Name: r.Name, Leader: r.Leader, Members: r.Members, Online: r.Online})
	}
	return q.reply(c)
}

// deleteClusterNode is DELETE /api/cluster/nodes/{node}, Warren's
// forget_cluster_node (warrenctl's): the stopped node leaves the cluster
// and the queues homed on it are deleted. 404 for a node not in the
// cluster, 409 for one that runs, 400 on a single node; the answer names
// how many queues went.
func (s *Server) deleteClusterNode(q *request) error {
	ctx, cancel := context.WithTimeout(q.r.Context(), forgetTimeout)
	defer cancel()
	n, err := s.broker.ForgetClusterNode(ctx, q.param("node"))
	var fe *server.ForgetError
	if errors.As(err, &fe) {
		switch fe.Reason {
		case "not_a_cluster_node":
			return &httpError{http.StatusNotFound, "not_found", fe.Error(), nil}
		case "rabbit_running":
			return &httpError{http.StatusConflict, "conflict", fe.Error(), nil}
		}
		return badRequest("%s", fe.Error())
	}
	if err != nil {
		return &httpError{http.StatusServiceUnavailable, "service_unavailable", err.Error(), nil}
	}
	return q.reply(map[string]any{"node": q.param("node"), "queues_deleted": n})
}

// forgetTimeout bounds a forget_cluster_node (the metadata command and
// the membership change, each committed by a majority).
const forgetTimeout = 30 * time.Second
