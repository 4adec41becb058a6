package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
)

// The consumer acknowledgement timeout (Config.ConsumerTimeout, RabbitMQ's
// consumer_timeout): a channel whose oldest unacknowledged delivery is
// older than the timeout is closed with 406 PRECONDITION_FAILED, and, as
// at any channel close, its deliveries are requeued and its consumers go
// (a stream consumer group member leaves its group).
//
// RabbitMQ 3.10 checks each channel on its tick, every minute
// (channel_tick_interval), comparing the oldest delivery's age with the
// timeout; a channel is closed between the timeout and the timeout plus a
// minute after that delivery. Warren checks each connection's channels on
// its reader goroutine, every minute or every timeout when that is
// shorter (ackCheckEvery), so its closes fall in the same window and a
// short timeout stays useful. A delivery only costs a clock reading
// (deliveredAt): there is no timer per delivery or per channel.

// maxAckCheckEvery is RabbitMQ's channel_tick_interval.
const maxAckCheckEvery = time.Minute

// monoEpoch is the origin of deliveredAt's monotonic clock.
var monoEpoch = time.Now()

// ackCheckEvery is how often a connection's channels are checked for
// overdue deliveries; 0 when the timeout is off.
func (s *Server) ackCheckEvery() time.Duration {
	t := s.cfg.ConsumerTimeout
	if t <= 0 {
		return 0
	}
	return min(t, maxAckCheckEvery)
}

// deliveredAt is a delivery's time for ack.Delivery.At: now on a
// monotonic clock, or 0 when the timeout is off.
func (s *Server) deliveredAt() int64 {
	if s.cfg.ConsumerTimeout <= 0 {
		return 0
	}
	return int64(time.Since(monoEpoch))
}

// checkAckTimeouts closes each channel whose oldest unacknowledged
// delivery is older than the consumer timeout, with RabbitMQ's 406 (class
// and method 0: no method caused it). Reader goroutine only, at its check.
func (c *conn) checkAckTimeouts(now time.Time) {
	limit := c.srv.cfg.ConsumerTimeout
	cutoff := int64(now.Sub(monoEpoch) - limit) // delivered before it: overdue
	for _, ch := range c.channels {
		if ch.closing {
			continue
		}
		ch.mu.Lock()
		d, ok := ch.unacked.Oldest()
		ch.mu.Unlock()
		if !ok || d.At >= cutoff {
			continue
		}
		c.log.Warn().Uint16("channel", ch.id).Uint64("delivery_tag", d.Tag).Str("queue", d.Queue.Decl().Name).
			Dur("timeout", limit).Msg("delivery not acknowledged within the consumer timeout")
		// A commit in flight is answered (or fails) before its channel
		// goes, as at any close.
		ch.awaitCommit()
		ch.softError(amqp.Errorf(amqp.PreconditionFailed, 0, 0,
			"delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. "+
				"This timeout value can be configured, see consumers doc guide to learn more",
			ch.id, limit.Milliseconds()))
	}
}
