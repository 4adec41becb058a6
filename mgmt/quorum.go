package mgmt

import (
	"errors"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/server"
)

// Quorum queue membership (issue 14), Warren's endpoints for what
// rabbitmq-queues does over Erlang distribution (warrenctl add_member,
// delete_member, grow, shrink), for administrators:
//
//	POST   /api/quorum-queues/{vhost}/{queue}/members         {"node": N}
//	DELETE /api/quorum-queues/{vhost}/{queue}/members/{node}
//	POST   /api/quorum-queues/grow    {"node": N, "vhost_pattern": RE, "queue_pattern": RE, "strategy": "all"|"even"}
//	POST   /api/quorum-queues/shrink  {"node": N}
//
// grow and shrink answer each queue they changed: vhost, name, size (its
// members after the change) and result ("ok" or the error).

func (s *Server) quorumRoutes() []route {
	r := func(method, pattern string, h func(*request) error) route {
		return route{method: method, pattern: strings.Split(pattern, "/"), h: h, access: accessAdmin}
	}
	return []route{
		r(http.MethodPost, "quorum-queues/grow", s.growQuorum),
		r(http.MethodPost, "quorum-queues/shrink", s.shrinkQuorum),
		r(http.MethodPost, "quorum-queues/{vhost}/{queue}/members", s.addQuorumMember),
		r(http.MethodDelete, "quorum-queues/{vhost}/{queue}/members/{node}", s.deleteQuorumMember),
	}
}

// quorumError words a membership error as rabbitmq-queues prints it.
func quorumError(err error) error {
	var nf *server.NotFoundError
	switch {
	case errors.As(err, &nf):
		return &httpError{http.StatusNotFound, "Object Not Found", "not_found", nil}
	case errors.Is(err, server.ErrNotQuorum), errors.Is(err, server.ErrNodeNotRunning), errors.Is(err, server.ErrNoCluster),
		errors.Is(err, server.ErrNodeLacksFeature):
		return badRequest("%s", err.Error())
	}
	return err
}

func (s *Server) addQuorumMember(q *request) error {
	var body struct {
		Node string `json:"node"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Node == "" {
		return badRequest("node is required")
	}
	if err := s.broker.AddQuorumMember(q.param("vhost"), q.param("queue"), body.Node); err != nil {
		return quorumError(err)
	}
	return q.noContent(true)
}

func (s *Server) deleteQuorumMember(q *request) error {
	if err := s.broker.DeleteQuorumMember(q.param("vhost"), q.param("queue"), q.param("node")); err != nil {
		return quorumError(err)
	}
	return q.noContent(false)
}

type memberChangeJSON struct {
	VHost  string `json:"vhost"`
	Name   string `json:"name"`
	Size   int    `json:"size"`
	Result string `json:"result"`
}

func changesJSON(cs []server.MemberChange) []memberChangeJSON {
	out := []memberChangeJSON{}
	for _, c := range cs {
		out = append(out, memberChangeJSON{c.VHost, c.Name, c.Size, c.Result})
	}
	return out
}

func (s *Server) growQuorum(q *request) error {
	var body struct {
		Node         string `json:"node"`
		VHostPattern string `json:"vhost_pattern"`
		QueuePattern string `json:"queue_pattern"`
		Strategy     string `json:"strategy"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Node == "" {
		return badRequest("node is required")
	}
	if body.Strategy != "" && body.Strategy != "all" && body.Strategy != "even" {
		return badRequest("strategy must be all or even")
	}
	if body.VHostPattern == "" {
		body.VHostPattern = ".*"
	}
	if body.QueuePattern == "" {
		body.QueuePattern = ".*"
	}
	if _, up := s.nodeRunning(body.Node); !up {
		return badRequest("%s", server.ErrNodeNotRunning.Error())
	}
	cs, err := s.broker.GrowQuorum(body.Node, body.VHostPattern, body.QueuePattern, body.Strategy == "even")
	if err != nil {
		return quorumError(err)
	}
	return q.reply(changesJSON(cs))
}

func (s *Server) shrinkQuorum(q *request) error {
	var body struct {
		Node string `json:"node"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Node == "" {
		return badRequest("node is required")
	}
	cs, err := s.broker.ShrinkQuorum(body.Node)
	if err != nil {
		return quorumError(err)
	}
	return q.reply(changesJSON(cs))
}

// nodeRunning reports whether node is a running member of the broker's
// cluster.
func (s *Server) nodeRunning(node string) (string, bool) {
	n := s.broker.Cluster()
	if n == nil {
		return "", false
	}
	for _, m := range n.Members() {
		if m.Name == node {
			return m.Addr, m.Running
		}
	}
	return "", false
}
