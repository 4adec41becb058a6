package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Warren runs quorum queues as classic queues with the parts of their
// behaviour a client sees: x-delivery-count on every delivery and
// x-delivery-limit (see queue.Requeue).

// deliveryProps returns the properties a delivery of e from q carries: the
// message's own, plus the x-delivery-count header (how often it came back
// unsettled) for a quorum queue, as RabbitMQ's quorum queues add it. q is
// nil for a direct reply-to delivery. Small enough to inline on the hot
// path.
func deliveryProps(q *queue.Queue, e queue.Entry) []byte {
	if q == nil || !q.CountsDeliveries() {
		return e.Msg.Props
	}
	return withDeliveryCount(e)
}

func withDeliveryCount(e queue.Entry) []byte {
	p, err := amqp.DecodeProperties(e.Msg.Props)
	if err != nil {
		return e.Msg.Props
	}
	h := make(amqp.Table, len(p.Headers)+1)
	for k, v := range p.Headers {
		h[k] = v
	}
	h["x-delivery-count"] = int64(e.Returns)
	p.Headers = h
	b, err := p.Append(nil)
	if err != nil {
		return e.Msg.Props
	}
	return b
}
