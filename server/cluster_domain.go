package server

import (
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/queue"
)

// The domain API's cluster paths (domain.go calls them): what a node
// proposes to the metadata group, and what only a queue's home decides.

// replicaOf is q's record in the metadata group, nil for a queue of this
// node only (exclusive, or no cluster).
func (v *vhost) replicaOf(q queue.Queue) *replica {
	if !v.srv.clustered() {
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	name := q.Decl().Name
	if v.queues[name] != q {
		return nil
	}
	return v.replicas[name]
}

// replicatedBinding reports whether a binding to d is the metadata
// group's: in a cluster, all but those to an exclusive queue.
func (v *vhost) replicatedBinding(d binding.Destination) bool {
	if !v.srv.clustered() {
		return false
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return !v.localDest(d)
}

// deleteReplicated deletes a replicated queue: only its home can tell
// whether it is unused or empty, so the home checks and proposes.
func (v *vhost) deleteReplicated(q queue.Queue, r *replica, ifUnused, ifEmpty bool) (int, error) {
	if rq, ok := q.(*remoteQueue); ok && !rq.ghost {
		return rq.remoteDelete(ifUnused, ifEmpty)
	}
	return v.deleteHomed(q, r, ifUnused, ifEmpty)
}

// deleteHomed is a deletion on the queue's home: its checks, then the
// unconditional deletion proposed.
func (v *vhost) deleteHomed(q queue.Queue, r *replica, ifUnused, ifEmpty bool) (int, error) {
	name := q.Decl().Name
	st := q.Stats()
	switch {
	case ifUnused && st.Consumers > 0:
		return 0, &PreconditionError{Reason: InUse, Kind: "queue", Name: name, VHost: v.name}
	case ifEmpty && st.Ready > 0:
		return 0, &PreconditionError{Reason: NotEmpty, Kind: "queue", Name: name, VHost: v.name}
	}
	// A quorum queue's count is its leader's ready messages before the
	// deletion, as RabbitMQ's (rabbit_quorum_queue:delete asks stat/1
	// first); this node's replica may lag the leader.
	ready, _, quorumReplica := v.srv.replicatedCounts(q)
	res, err := v.srv.propose(&metaCmd{Op: opQueueDelete, VHost: v.name, Name: name, Inc: r.inc, System: true})
	if quorumReplica && err == nil {
		return ready, nil
	}
	return res.N, err
}

// homeDown is the error of an operation on a queue whose home node is
// down (a stand-in's), nil otherwise.
func homeDown(q queue.Queue) error {
	rq, ok := q.(*remoteQueue)
	if !ok || rq.homeUp() {
		return nil
	}
	return &HomeDownError{Name: rq.decl.Name, VHost: rq.decl.VHost, Node: rq.home}
}
