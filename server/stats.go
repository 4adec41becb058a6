package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/queue"
)

// vhostStats are a vhost's channel-level message_stats counters (RabbitMQ's
// publish, confirm, return_unroutable, drop_unroutable); the queue-level
// ones (deliver, get, ack, ...) are kept per queue (queue/stats.go) and
// summed. Each event costs one or two atomic adds.
type vhostStats struct {
	publish          atomic.Uint64
	confirm          atomic.Uint64
	returnUnroutable atomic.Uint64
	dropUnroutable   atomic.Uint64
}

// routed counts a publish that reached queues or not; an unroutable one is
// returned when it was mandatory, else dropped.
func (st *vhostStats) routed(routed, mandatory bool) {
	st.publish.Add(1)
	switch {
	case routed:
	case mandatory:
		st.returnUnroutable.Add(1)
	default:
		st.dropUnroutable.Add(1)
	}
}

// VHostMessageStats are a vhost's counters at one moment: its
// channel-level counters and the sum of its live queues' counters.
type VHostMessageStats struct {
	VHost                                              string
	Publish, Confirm, ReturnUnroutable, DropUnroutable uint64
	Queues                                             queue.MessageStats
}

// QueueMessageStats are one queue's counters.
type QueueMessageStats struct {
	VHost, Name string
	Stats       queue.MessageStats
}

// MessageStats reads every vhost's and every queue's message_stats
// counters. Counters of deleted queues and vhosts are gone; callers that
// keep totals (the management API's sampler) carry them over.
func (s *Server) MessageStats() ([]VHostMessageStats, []QueueMessageStats) {
	vs, _ := s.vhostsFor("")
	var vout []VHostMessageStats
	var qout []QueueMessageStats
	for _, v := range vs {
		vm := VHostMessageStats{
			VHost: v.name, Publish: v.stats.publish.Load(), Confirm: v.stats.confirm.Load(),
			ReturnUnroutable: v.stats.returnUnroutable.Load(), DropUnroutable: v.stats.dropUnroutable.Load(),
		}
		for _, q := range v.queueList() {
			qs := q.MessageStats()
			vm.Queues.Add(qs)
			qout = append(qout, QueueMessageStats{VHost: v.name, Name: q.Name, Stats: qs})
		}
		vout = append(vout, vm)
	}
	return vout, qout
}
