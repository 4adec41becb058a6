package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
)

// Publisher confirms: confirm.select, and the resolution of one publish's
// confirm once its store writes and its enqueue are done.

func (ch *channel) confirmSelect(m *amqp.ConfirmSelect) error {
	if ch.tx != nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "cannot switch from tx to confirm mode")
	}
	if ch.confirms == nil {
		out, id := ch.c.out, ch.id
		ch.confirms = ack.NewConfirms(func(tag uint64, multiple, nack bool) {
			if nack {
				out.sendMethod(id, &amqp.BasicNack{DeliveryTag: tag, Multiple: multiple})
			} else {
				out.sendAck(id, tag, multiple) // coalesces with an unsent ack
			}
		})
		ch.confirmMode.Store(true)
	}
	return ch.reply(m.NoWait, &amqp.ConfirmSelectOk{})
}

// pendingConfirm resolves one publish's confirm once both the store write
// and the enqueue are done: a basic.nack if either failed (a disk error, or
// a queue refusing the message for its length), else a basic.ack.
type pendingConfirm struct {
	seq      uint64
	confirms *ack.Confirms
	n        atomic.Int32
	failed   atomic.Bool
}

func (pc *pendingConfirm) storeDone(err error) {
	if err != nil {
		pc.failed.Store(true)
	}
	pc.resolve()
}

func (pc *pendingConfirm) resolve() {
	if pc.n.Add(-1) == 0 {
		pc.confirms.Resolve(pc.seq, !pc.failed.Load())
	}
}
