package queue

import "sync/atomic"

// counters are a queue's message_stats, RabbitMQ's event counters: each
// is one atomic add where the event happens (queue.go and the channel's
// basic.get and basic.ack).
type counters struct {
	publish      atomic.Uint64 // messages enqueued
	deliver      atomic.Uint64 // delivered to consumers that ack
	deliverNoAck atomic.Uint64 // delivered to no-ack consumers
	get          atomic.Uint64 // taken by basic.get with ack
	getNoAck     atomic.Uint64 // taken by basic.get without ack
	getEmpty     atomic.Uint64 // basic.get that found nothing
	redeliver    atomic.Uint64 // deliveries and gets of redelivered messages
	ack          atomic.Uint64 // acknowledged
}

// MessageStats is a snapshot of a queue's counters, named as RabbitMQ's
// message_stats fields.
type MessageStats struct {
	Publish, Deliver, DeliverNoAck, Get, GetNoAck, GetEmpty, Redeliver, Ack uint64
}

// Add adds o to s.
func (s *MessageStats) Add(o MessageStats) {
	s.Publish += o.Publish
	s.Deliver += o.Deliver
	s.DeliverNoAck += o.DeliverNoAck
	s.Get += o.Get
	s.GetNoAck += o.GetNoAck
	s.GetEmpty += o.GetEmpty
	s.Redeliver += o.Redeliver
	s.Ack += o.Ack
}

// delivered counts a delivery to a consumer.
func (c *counters) delivered(needsAck, redelivered bool) {
	if needsAck {
		c.deliver.Add(1)
	} else {
		c.deliverNoAck.Add(1)
	}
	if redelivered {
		c.redeliver.Add(1)
	}
}

// MessageStats reads the queue's counters.
func (q *Queue) MessageStats() MessageStats {
	c := &q.ctr
	return MessageStats{
		Publish: c.publish.Load(), Deliver: c.deliver.Load(), DeliverNoAck: c.deliverNoAck.Load(),
		Get: c.get.Load(), GetNoAck: c.getNoAck.Load(), GetEmpty: c.getEmpty.Load(),
		Redeliver: c.redeliver.Load(), Ack: c.ack.Load(),
	}
}

// CountGet counts a basic.get: found reports whether it took a message.
func (q *Queue) CountGet(found, noAck, redelivered bool) {
	switch {
	case !found:
		q.ctr.getEmpty.Add(1)
		return
	case noAck:
		q.ctr.getNoAck.Add(1)
	default:
		q.ctr.get.Add(1)
	}
	if redelivered {
		q.ctr.redeliver.Add(1)
	}
}

// CountAck counts n acknowledged messages.
func (q *Queue) CountAck(n int) { q.ctr.ack.Add(uint64(n)) }
