// Package txn buffers a transactional channel's publishes and
// acknowledgements so that tx.commit applies them together and tx.rollback
// discards them.
package txn

import (
	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/queue"
)

// Settle is a buffered basic.ack, basic.nack or basic.reject. Its
// deliveries were taken from the channel's unacked set when the method
// arrived (so an unknown tag fails at once, as in RabbitMQ); a rollback
// hands them back.
type Settle struct {
	Deliveries []ack.Delivery
	Op         queue.SettleOp
}

// Tx is one open transaction carrying publishes of type P. It is not safe
// for concurrent use; the channel that owns it serializes access.
type Tx[P any] struct {
	publishes []P
	settles   []Settle
}

// Publish buffers p.
func (t *Tx[P]) Publish(p P) { t.publishes = append(t.publishes, p) }

// Settle buffers an acknowledgement.
func (t *Tx[P]) Settle(s Settle) { t.settles = append(t.settles, s) }

// Publishes returns the buffered publishes, in arrival order, without
// taking them.
func (t *Tx[P]) Publishes() []P { return t.publishes }

// Take returns the buffered work in arrival order and starts a new
// transaction, as tx.commit does.
func (t *Tx[P]) Take() ([]P, []Settle) {
	p, s := t.publishes, t.settles
	t.publishes, t.settles = nil, nil
	return p, s
}

// Rollback discards the buffered publishes and returns the deliveries of
// the buffered acknowledgements, to go back to the unacked set.
func (t *Tx[P]) Rollback() []ack.Delivery {
	var ds []ack.Delivery
	for _, s := range t.settles {
		ds = append(ds, s.Deliveries...)
	}
	t.publishes, t.settles = nil, nil
	return ds
}
