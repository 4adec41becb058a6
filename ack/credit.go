package ack

// Credit is a channel's prefetch accounting, basic.qos as RabbitMQ has it:
// a limit per consumer (for consumers started after it is set) and a
// limit shared by the channel's consumers; a consumer gets a delivery
// only while both leave room. Deliveries to no-ack consumers and basic.get
// take no credit. It is not safe for concurrent use; the channel guards
// it, and each consumer's ConsumerCredit with it.
type Credit struct {
	prefetch uint16 // per-consumer limit for consumers started later
	global   uint16 // limit shared by the channel's consumers
	taken    int    // deliveries holding credit, on all consumers
}

// ConsumerCredit is one consumer's share of its channel's Credit.
type ConsumerCredit struct {
	limit uint16
	taken int
}

// Qos applies basic.qos. As in RabbitMQ, a per-consumer limit lifts the
// channel's shared one.
func (c *Credit) Qos(count uint16, global bool) {
	if global {
		c.global = count
		return
	}
	c.prefetch, c.global = count, 0
}

// Prefetch returns the per-consumer and the shared limit (0: none).
func (c *Credit) Prefetch() (perConsumer, global uint16) { return c.prefetch, c.global }

// NewConsumer returns the credit of a consumer starting now.
func (c *Credit) NewConsumer() ConsumerCredit { return ConsumerCredit{limit: c.prefetch} }

// Limit is the consumer's prefetch limit (0: none).
func (k *ConsumerCredit) Limit() uint16 { return k.limit }

// Room reports whether k may take one more delivery.
func (c *Credit) Room(k *ConsumerCredit) bool {
	return (k.limit == 0 || k.taken < int(k.limit)) && (c.global == 0 || c.taken < int(c.global))
}

// Take records a delivery to k that awaits an ack.
func (c *Credit) Take(k *ConsumerCredit) {
	k.taken++
	c.taken++
}

// Release gives back the credit that settled deliveries held, and reports
// whether a limit applied to any of them (so that consumers may get more
// now).
func (c *Credit) Release(ds []Delivery) (limited bool) {
	for _, d := range ds {
		if k := d.Credit; k != nil {
			k.taken--
			c.taken--
			limited = limited || k.limit > 0 || c.global > 0
		}
	}
	return limited
}

// Reset forgets every delivery's credit, for a channel that closed.
func (c *Credit) Reset() { c.taken = 0 }
