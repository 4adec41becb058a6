package server

import (
	"encoding/json"
	"errors"

	"github.com/warrenmq/warren/auth"
)

// Access control in the metadata group: with a cluster, auth.DB hands
// every change to the Replicator set in startCluster, which proposes it
// (opAdmin); Apply makes it with auth.DB.Apply on every node and does
// what the change means for the node's objects: a vhost's objects made
// or torn down, a deleted user's connections closed.

// adminState is the access-control part of a metadata snapshot.
type adminState struct {
	Auth   json.RawMessage `json:"auth"`
	Seeded bool            `json:"seeded,omitempty"`
}

// applyAdmin is opAdmin's Apply.
func (s *Server) applyAdmin(op *auth.Op) error {
	if op == nil {
		return errors.New("empty access-control change")
	}
	m := s.meta
	if op.Kind == auth.OpSeed {
		// The first node.started of a cluster's life seeds it; later
		// ones find it seeded.
		if m.seeded {
			return nil
		}
		m.seeded = true
	}
	if err := s.auth.Apply(*op); err != nil {
		return err
	}
	switch op.Kind {
	case auth.OpSeed:
		s.ensureVHost("/")
	case auth.OpPutVHost:
		s.ensureVHost(op.VHost.Name)
	case auth.OpDeleteVHost:
		s.teardownVHost(op.Name)
	case auth.OpDeleteUser:
		s.userDeleted(op.Name)
	}
	return nil
}

func (s *Server) adminSnapshot() (*adminState, error) {
	b, err := s.auth.Export()
	if err != nil {
		return nil, err
	}
	return &adminState{Auth: b, Seeded: s.meta.seeded}, nil
}

// restoreAdmin installs a snapshot's access control: vhosts it lacks are
// torn down, those it has made.
func (s *Server) restoreAdmin(st *adminState) error {
	if err := s.auth.Load(st.Auth); err != nil {
		return err
	}
	s.meta.seeded = st.Seeded
	want := map[string]bool{}
	for _, rec := range s.auth.VHosts() {
		want[rec.Name] = true
		s.ensureVHost(rec.Name)
	}
	for _, v := range s.vhostList() {
		if !want[v.name] {
			s.teardownVHost(v.name)
		}
	}
	return nil
}

// QueueHome is where the queue vhost/name of a cluster lives, as the
// management API shows it (RabbitMQ's node): its home node (the
// declaring one), and whether that node runs as this node sees it. ""
// for a queue of this node only (exclusive, or no cluster) or none.
func (s *Server) QueueHome(vhost, name string) (node string, up bool) {
	v := s.vhost(vhost)
	if v == nil || !s.clustered() {
		return "", false
	}
	q := v.lookupQueue(name)
	if rq, ok := q.(*remoteQueue); ok {
		return rq.home, rq.homeUp()
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if r := v.replicas[name]; r != nil && v.queues[name] == q {
		return r.home, true
	}
	return "", false
}
