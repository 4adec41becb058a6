package server

import (
	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/txn"
)

// txPart is one queue type's share of a tx.commit.
type txPart struct {
	typ     queue.Type
	pubs    []queue.TxPublish
	of      []int // index in the commit's publishes of each of pubs
	settles []queue.TxSettle
}

// commitTx routes a transaction's publishes and applies them with its
// settlements, each queue type's share as one (queue.Transactional) where
// the type can. done is called once all of it is durable (maybe before
// commitTx returns), on whichever goroutine completes it last.
func (ch *channel) commitTx(pubs []*publishing, settles []txn.Settle, done func(error)) {
	v := ch.c.vhost
	msgs := make([]*queue.Message, len(pubs))
	found := make([]bool, len(pubs))
	var parts []*txPart
	part := func(t queue.Type) *txPart {
		for _, p := range parts {
			if p.typ == t {
				return p
			}
		}
		p := &txPart{typ: t}
		parts = append(parts, p)
		return p
	}
	for i, p := range pubs {
		msgs[i] = newMessage(p)
		s := v.routePublish(p.method.Exchange, p.method.RoutingKey, p.cc, p.headerTable)
		found[i] = s.found
		ch.tracePublish(p, s.queues)
		for _, g := range groupByType(s.queues) {
			tp := part(g.typ)
			tp.pubs = append(tp.pubs, queue.TxPublish{Msg: msgs[i], Queues: g.queues})
			tp.of = append(tp.of, i)
		}
		v.releaseScratch(s)
	}
	for _, s := range settles {
		for _, g := range ack.ByQueue(s.Deliveries) {
			tp := part(g.Queue.Type())
			tp.settles = append(tp.settles, queue.TxSettle{Queue: g.Queue, Entries: g.Entries, Op: s.Op})
		}
	}

	j := &joinDone{done: done}
	j.n.Store(int32(len(parts) + 1))
	routed := make([]bool, len(pubs))
	ctx := ch.c.flushCtx()
	for _, tp := range parts {
		if t, ok := tp.typ.(queue.Transactional); ok {
			t.Commit(tp.pubs, tp.settles, ctx, j.one)
		} else {
			commitEach(tp, ctx, j.one)
		}
		for k, p := range tp.pubs {
			routed[tp.of[k]] = routed[tp.of[k]] || p.Routed
		}
	}
	for i, p := range pubs {
		ch.routed(p, found[i], routed[i])
	}
	j.one(nil)
}

// commitEach applies a type's share of a transaction one publish and one
// settlement at a time, for a type that cannot store them as one.
func commitEach(tp *txPart, ctx any, done func(error)) {
	j := &joinDone{done: done}
	j.n.Store(int32(len(tp.pubs) + 1))
	for i := range tp.pubs {
		p := &tp.pubs[i]
		p.Routed, p.Dropped = tp.typ.Publish(p.Msg, p.Queues, ctx, j.one)
	}
	for _, s := range tp.settles {
		s.Queue.Settle(s.Entries, s.Op)
	}
	j.one(nil)
}

func (ch *channel) txSelect() error {
	if ch.confirms != nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "cannot switch from confirm to tx mode")
	}
	if ch.tx == nil {
		ch.tx = &txn.Tx[*publishing]{}
		ch.txMode.Store(true)
	}
	return ch.c.out.sendMethod(ch.id, &amqp.TxSelectOk{})
}

// txCommit applies the transaction's publishes and acknowledgements as one
// store transaction, and answers commit-ok once it is durable: after a
// crash, all of it or none of it is there.
func (ch *channel) txCommit() error {
	if ch.tx == nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "channel is not transactional")
	}
	if n := txBytes(ch.tx.Publishes()); n > txMaxBytes {
		// The store keeps a transaction in one log record: refuse one it
		// could not read back, before any of it takes effect (its acks go
		// back to the unacked set, and are requeued with the channel).
		ch.rollback()
		return amqp.Errorf(amqp.PreconditionFailed, amqp.ClassTx, amqp.MethodTxCommit,
			"transaction of %d message bytes is larger than the %d bytes one commit can store", n, txMaxBytes)
	}
	pubs, settles := ch.tx.Take()
	result := make(chan error, 1)
	ch.commitTx(pubs, settles, func(err error) { result <- err })
	select {
	case err := <-result:
		// Nothing to wait for (no store writes, or already durable).
		return ch.finishCommit(settles, err, ch.c.flushCtx())
	default:
	}
	// The store's write is under way: the reader goes on with the other
	// channels, and this one's next frame waits for the commit-ok
	// (awaitCommit).
	done := make(chan struct{})
	ch.committing = done
	go func() {
		defer close(done)
		if err := ch.finishCommit(settles, <-result, nil); err != nil {
			ch.c.abort(err.(*amqp.Error))
		}
	}()
	return nil
}

// finishCommit answers a tx.commit whose store write is done: commit-ok,
// then the committed settlements give their prefetch credit back, so that
// the deliveries it makes room for follow commit-ok. ctx is the caller's
// dispatch context (nil off the reader). A failed write is a hard error.
func (ch *channel) finishCommit(settles []txn.Settle, err error, ctx any) error {
	if err != nil {
		return amqp.Errorf(amqp.InternalError, amqp.ClassTx, amqp.MethodTxCommit, "transaction could not be made durable: %v", err)
	}
	ch.c.out.sendMethod(ch.id, &amqp.TxCommitOk{})
	limited := false
	ch.mu.Lock()
	if !ch.closed {
		for _, s := range settles {
			limited = ch.credit.Release(s.Deliveries) || limited
		}
	}
	ch.mu.Unlock()
	if limited {
		ch.kickWith(ctx)
	}
	return nil
}

// awaitCommit waits for the channel's tx.commit in flight, if any, to be
// answered.
func (ch *channel) awaitCommit() {
	if ch.committing != nil {
		<-ch.committing
		ch.committing = nil
	}
}

func (ch *channel) txRollback() error {
	if ch.tx == nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "channel is not transactional")
	}
	ch.rollback()
	return ch.c.out.sendMethod(ch.id, &amqp.TxRollbackOk{})
}

// rollback discards the transaction's publishes and gives its acks'
// deliveries back to the unacked set.
func (ch *channel) rollback() {
	ds := ch.tx.Rollback()
	ch.mu.Lock()
	// Their credit was never given back (see settle).
	ch.unacked.Restore(ds)
	ch.mu.Unlock()
	ch.c.unackedChanged(len(ds))
}

// txMaxBytes is the largest transaction tx.commit takes (a variable for
// tests).
var txMaxBytes int64 = persist.MaxAtomicBytes

// txBytes is what the messages of a transaction's publishes weigh in the
// store (compared with persist.MaxAtomicBytes).
func txBytes(pubs []*publishing) int64 {
	var n int64
	for _, p := range pubs {
		n += int64(len(p.body) + len(p.props) + len(p.method.Exchange) + len(p.method.RoutingKey))
	}
	return n
}
