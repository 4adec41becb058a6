package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/queue"
)

// vhostStats are a vhost's channel-level message_stats counters (RabbitMQ's
// publish, confirm, return_unroutable, drop_unroutable); the queue-level
// ones (deliver, get, ack, ...) are kept per queue (queue/stats.go) and
// summed. Each event costs one or two atomic adds, on one of statShards
// cache-line-sized shards chosen by connection id, so that publishers on
// different connections do not contend for one counter.
type vhostStats struct {
	shards [statShards]statShard
}

const statShards = 16

type statShard struct {
	publish          atomic.Uint64
	confirm          atomic.Uint64
	returnUnroutable atomic.Uint64
	dropUnroutable   atomic.Uint64
	_                [32]byte // pad to a 64-byte cache line
}

func (st *vhostStats) shard(conn uint64) *statShard { return &st.shards[conn%statShards] }

// routed counts a publish on connection conn that reached queues or not;
// an unroutable one is returned when it was mandatory, else dropped.
func (st *vhostStats) routed(conn uint64, routed, mandatory bool) {
	sh := st.shard(conn)
	sh.publish.Add(1)
	switch {
	case routed:
	case mandatory:
		sh.returnUnroutable.Add(1)
	default:
		sh.dropUnroutable.Add(1)
	}
}

// confirmed counts a publish in confirm mode: each gets one basic.ack or
// basic.nack.
func (st *vhostStats) confirmed(conn uint64) { st.shard(conn).confirm.Add(1) }

// load sums the shards.
func (st *vhostStats) load() (m VHostMessageStats) {
	for i := range st.shards {
		sh := &st.shards[i]
		m.Publish += sh.publish.Load()
		m.Confirm += sh.confirm.Load()
		m.ReturnUnroutable += sh.returnUnroutable.Load()
		m.DropUnroutable += sh.dropUnroutable.Load()
	}
	return m
}

// VHostMessageStats are a vhost's counters at one moment: its
// channel-level counters and the sum of its live queues' counters.
type VHostMessageStats struct {
	VHost                                              string
	Publish, Confirm, ReturnUnroutable, DropUnroutable uint64
	Queues                                             queue.MessageStats
}

// QueueMessageStats are one queue's counters, and its lengths.
type QueueMessageStats struct {
	VHost, Name    string
	Stats          queue.MessageStats
	Ready, Unacked int
}

// MessageStats reads every vhost's and every queue's message_stats
// counters, and each queue's lengths. Counters of deleted queues and vhosts are gone; callers that
// keep totals (the management API's sampler) carry them over.
func (s *Server) MessageStats() ([]VHostMessageStats, []QueueMessageStats) {
	vs, _ := s.vhostsFor("")
	var vout []VHostMessageStats
	var qout []QueueMessageStats
	for _, v := range vs {
		vm := v.stats.load()
		vm.VHost = v.name
		for _, q := range v.queueList() {
			qs := q.MessageStats()
			vm.Queues.Add(qs)
			st := q.Stats()
			qout = append(qout, QueueMessageStats{VHost: v.name, Name: q.Decl().Name, Stats: qs, Ready: st.Ready, Unacked: st.Unacked})
		}
		vout = append(vout, vm)
	}
	return vout, qout
}

// churn counts connections and channels opened and closed since start
// (RabbitMQ's churn_rates and its Prometheus *_opened_total/_closed_total).
type churn struct {
	connOpened, connClosed atomic.Uint64
	chanOpened, chanClosed atomic.Uint64
	// queueDeclared counts queue.declare methods that succeeded (passive
	// ones excepted), queueCreated those that made a queue, and
	// queueDeleted the queues removed, however (RabbitMQ's
	// queues_declared_total, queues_created_total, queues_deleted_total).
	queueDeclared, queueCreated, queueDeleted atomic.Uint64
}

// Churn is a snapshot of the churn counters.
type Churn struct {
	ConnectionsOpened, ConnectionsClosed         uint64
	ChannelsOpened, ChannelsClosed               uint64
	QueuesDeclared, QueuesCreated, QueuesDeleted uint64
}

func (c *churn) load() Churn {
	return Churn{
		c.connOpened.Load(), c.connClosed.Load(), c.chanOpened.Load(), c.chanClosed.Load(),
		c.queueDeclared.Load(), c.queueCreated.Load(), c.queueDeleted.Load(),
	}
}
