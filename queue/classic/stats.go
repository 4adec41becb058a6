package classic

import (
	"sync/atomic"

	"github.com/warrenmq/warren/queue"
)

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
func (q *Queue) MessageStats() queue.MessageStats {
	c := &q.ctr
	return queue.MessageStats{
		Publish: c.publish.Load(), Deliver: c.deliver.Load(), DeliverNoAck: c.deliverNoAck.Load(),
		Get: c.get.Load(), GetNoAck: c.getNoAck.Load(), GetEmpty: c.getEmpty.Load(),
		Redeliver: c.redeliver.Load(), Ack: c.ack.Load(),
	}
}

// got counts a basic.get: found reports whether it took a message.
func (c *counters) got(found, noAck, redelivered bool) {
	switch {
	case !found:
		c.getEmpty.Add(1)
		return
	case noAck:
		c.getNoAck.Add(1)
	default:
		c.get.Add(1)
	}
	if redelivered {
		c.redeliver.Add(1)
	}
}
