package quorum

import (
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/queue"
)

// Decl implements queue.Queue.
func (q *Queue) Decl() *queue.Decl { return &q.decl }

// Type implements queue.Queue.
func (q *Queue) Type() queue.Type { return q.typ }

// AddConsumer implements queue.Queue: the consumer is attached through
// the log (its prefetch is its credit in the machine) and deliveries
// start once that is applied.
func (q *Queue) AddConsumer(o queue.ConsumeOptions) error {
	q.mu.Lock()
	if q.deleted || q.stopped {
		q.mu.Unlock()
		return queue.ErrDeleted
	}
	q.nextKey++
	key := q.pid + q.nextKey
	credit := int(o.Prefetch)
	if credit == 0 || o.NoAck {
		credit = unlimitedCredit
	}
	lc := &local{key: key, tag: o.Tag, c: o.Consumer, noAck: o.NoAck, prefetch: credit, priority: o.Priority, exclusive: o.Exclusive}
	q.register(lc)
	q.mu.Unlock()
	if _, err := q.attachNew(lc); err != nil {
		if err == errClosed {
			return queue.ErrDeleted
		}
		return err
	}
	q.use()
	return nil
}

// register makes lc this node's consumer under lc.key, its attach on
// its way (attaching). Call with mu held.
func (q *Queue) register(lc *local) {
	q.consumers[lc.key] = lc
	if q.attaching == nil {
		q.attaching = map[uint64]bool{}
	}
	q.attaching[lc.key] = true
}

// attachNew attaches lc, registered (register), and waits for it. If
// that fails, lc is unregistered and its attach undone: one that timed
// out may still be applied, and its detach then undoes it (else it is a
// no-op), so that no consumer stays attached that no channel has. gone:
// lc was removed meanwhile (RemoveConsumer cancelled its key).
func (q *Queue) attachNew(lc *local) (gone bool, err error) {
	key := lc.key
	_, err = q.call(opAttach, func(e *encoder) {
		e.u64(key)
		e.str(q.typ.cfg.NodeID)
		e.u32(uint32(lc.prefetch))
		e.u32(uint32(int32(lc.priority)))
		e.u8(b2u(lc.exclusive))
	})
	q.mu.Lock()
	delete(q.attaching, key)
	if err != nil {
		gone = q.consumers[key] != lc
		if !gone {
			delete(q.consumers, key)
		}
	}
	q.mu.Unlock()
	if err != nil && !gone && err != errClosed {
		q.propose(opDetach, func(e *encoder) { e.u64(key) }, nil)
	}
	return gone, err
}

// errDetachedLive is what the log says of a consumer reattach.
var errDetachedLive = errors.New("the leader detached a live consumer of this node")

// reattach runs when the machine detached a consumer this node still
// has: a leader took this node for down (its probes were cut off, or it
// had just started) while the consumer's channel lived on. As
// rabbit_fifo reinstates the consumers of a node that comes back, the
// consumer is attached again under a new key (a leader that still holds
// the node for down detaches only the keys it saw then); what it held was
// returned by the detach and comes again, redelivered. If the attach is
// refused (another consumer took the queue exclusively meanwhile) or
// fails, the consumer is cancelled and its client told (basic.cancel).
func (q *Queue) reattach(old uint64) {
	q.mu.Lock()
	lc := q.consumers[old]
	if lc == nil || q.deleted || q.stopped {
		q.mu.Unlock()
		return
	}
	delete(q.consumers, old)
	q.nextKey++
	lc.key = q.pid + q.nextKey
	lc.held, lc.blocked = nil, false // the detach gave it back; the new key is not blocked
	q.register(lc)
	q.mu.Unlock()
	q.typ.logErr(errDetachedLive, fmt.Sprintf("quorum queue %q: consumer %q: attaching it again", q.decl.Name, lc.tag))
	gone, err := q.attachNew(lc)
	if err == nil {
		return
	}
	q.mu.Lock()
	stopped := q.deleted || q.stopped
	q.mu.Unlock()
	if gone || stopped {
		return
	}
	q.typ.logErr(err, fmt.Sprintf("quorum queue %q: consumer %q cannot attach again; cancelling it", q.decl.Name, lc.tag))
	if q.hooks.Cancel != nil {
		q.hooks.Cancel(q, queue.ConsumerRef{Tag: lc.tag, Consumer: lc.c})
	}
}

// RemoveConsumer implements queue.Queue. A quorum queue is never
// auto-deleted. What the consumer holds stays checked out until settled
// (basic.cancel: opCancel); the consumer of a closed channel, which
// requeued what it held first, is detached, so that nothing checked out
// to it can stay so for want of a settlement that will never come
// (queue.ChannelCloser).
func (q *Queue) RemoveConsumer(tag string, c queue.Consumer) bool {
	cc, _ := c.(queue.ChannelCloser)
	closed := cc != nil && cc.ChannelClosed()
	q.mu.Lock()
	var key uint64
	for k, lc := range q.consumers {
		if lc.tag == tag && lc.c == c {
			key = k
		}
	}
	op := uint8(opDetach) // a no-ack consumer holds nothing: what comes meanwhile goes back
	if lc := q.consumers[key]; lc != nil {
		if len(lc.held) > 0 {
			// What it refused never reached its channel: back to the
			// queue, ahead of its cancel (propose takes only pmu).
			ids := lc.heldIDs()
			q.propose(opUnassign, func(e *encoder) { e.u64(key); e.ids(ids) }, nil)
		}
		if !lc.noAck && !closed {
			op = opCancel
			if q.cancelling == nil {
				q.cancelling = map[uint64]bool{}
			}
			q.cancelling[key] = true
		}
		delete(q.consumers, key)
	}
	q.mu.Unlock()
	if key != 0 {
		q.propose(op, func(e *encoder) { e.u64(key) }, nil)
		q.use()
	}
	return false
}

// Kick implements queue.Queue: consumers that refused deliveries are
// offered what they hold again, in order; one that was blocked in the
// machine and took it all is unblocked, and the machine checks messages
// out to it again.
func (q *Queue) Kick(ctx any) {
	var keys, settled []uint64
	q.mu.Lock()
	for k, lc := range q.consumers {
		if len(lc.held) > 0 {
			q.deliverHeld(lc, ctx, &settled)
		}
		if lc.blocked && len(lc.held) == 0 {
			lc.blocked = false
			keys = append(keys, k)
		}
	}
	q.mu.Unlock()
	q.settleNoAck(settled)
	for _, k := range keys {
		q.propose(opUnblock, func(e *encoder) { e.u64(k) }, nil)
	}
}

// Settle implements queue.Queue: the settlement is proposed; it takes
// effect once applied (Sync waits for that).
func (q *Queue) Settle(entries []queue.Entry, op queue.SettleOp) {
	if len(entries) == 0 {
		return
	}
	ids := make([]uint64, len(entries))
	for i, e := range entries {
		ids[i] = e.Seq
	}
	c := opSettle
	switch op {
	case queue.Reject:
		c = opDiscard
	case queue.Requeue:
		c = opReturn
	case queue.Nack:
		c = opReturnLast
	}
	if op == queue.Ack {
		q.mu.Lock()
		q.stats.Ack += uint64(len(entries))
		q.mu.Unlock()
	}
	if !q.propose(uint8(c), func(e *encoder) { e.ids(ids) }, nil) && q.hasLeft() {
		// Delivered before this replica left its group (Leave): the
		// group still has them checked out.
		q.settleLeft(uint8(c), ids)
	}
}

// hasLeft reports whether the replica left its group (Leave).
func (q *Queue) hasLeft() bool {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	return q.leaving
}

// Get implements queue.Getter: a checkout through the log.
func (q *Queue) Get(noAck bool) (queue.Entry, int, bool) {
	q.use()
	r, err := q.call(opGet2, func(e *encoder) { e.u8(b2u(noAck)); e.str(q.typ.cfg.NodeID) })
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil || r.entry == nil {
		q.stats.GetEmpty++
		return queue.Entry{}, 0, false
	}
	if noAck {
		q.stats.GetNoAck++
	} else {
		q.stats.Get++
	}
	if r.entry.Redelivered {
		q.stats.Redeliver++
	}
	e := *r.entry
	e.Ref = refGet
	return e, r.n, true
}

// Purge implements queue.Purger.
func (q *Queue) Purge() int {
	r, err := q.call(opPurge, nil)
	if err != nil {
		return 0
	}
	return r.n
}

// SetLimits implements queue.LimitSetter: the new limits go through the
// log, so every replica applies them from the same point.
func (q *Queue) SetLimits(l queue.Limits) {
	q.mu.Lock()
	q.limits = l
	q.mu.Unlock()
	q.proposeConfig(l)
	q.armIdle()
}

// Expire proposes the leader's clock now, so that expired messages at
// the head go, and waits for it to be applied.
func (q *Queue) Expire() error { return q.Sync() }

// armExpiry sets the leader's timer for the head's expiry. q.mu is held.
func (q *Queue) armExpiry(at int64) {
	if at == 0 || q.deleted || q.stopped || (q.expiry != nil && q.expiryAt == at) {
		return
	}
	if q.expiry != nil {
		q.expiry.Stop()
	}
	q.expiryAt = at
	d := time.Until(time.UnixMilli(at))
	if now := q.typ.cfg.Now(); !now.IsZero() {
		d = time.UnixMilli(at).Sub(now)
	}
	var fire func()
	fire = func() {
		// The leader proposes its clock; another member checks again
		// later, in case it leads by then.
		if q.place == nil || q.Leads() {
			q.propose(opTick, nil, nil)
			return
		}
		q.mu.Lock()
		if !q.deleted && !q.stopped && q.expiryAt == at {
			q.expiry = time.AfterFunc(time.Second, fire)
		}
		q.mu.Unlock()
	}
	q.expiry = time.AfterFunc(max(d, 0)+time.Millisecond, fire)
}

// use records a use of the queue, for x-expires.
func (q *Queue) use() {
	q.mu.Lock()
	q.lastUse = q.typ.cfg.Now()
	q.mu.Unlock()
	q.armIdle()
}

// armIdle (re)arms the x-expires timer: the queue expires once it had no
// consumers and no basic.get for its x-expires.
func (q *Queue) armIdle() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.idle != nil {
		q.idle.Stop()
		q.idle = nil
	}
	exp := q.limits.Expires
	if exp <= 0 || q.deleted || q.stopped || q.hooks.Expired == nil {
		return
	}
	left := exp - q.typ.cfg.Now().Sub(q.lastUse)
	q.idle = time.AfterFunc(max(left, 0), func() {
		q.mu.Lock()
		busy := len(q.consumers) > 0 || q.deleted || q.stopped
		unused := q.typ.cfg.Now().Sub(q.lastUse) >= exp
		q.mu.Unlock()
		switch {
		case busy:
		case unused:
			q.hooks.Expired(q)
		default:
			q.armIdle()
		}
	})
}

// Touch implements queue.Queue.
func (q *Queue) Touch() { q.use() }

// Delete implements queue.Queue: once what was proposed is applied, the
// conditions are checked, the group stops and its data goes.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, nil, nil
	}
	q.mu.Unlock()
	// What was proposed is applied first, so that the conditions count
	// it. A replicated queue's were checked before its deletion was
	// committed, and every member deletes its replica without waiting.
	if q.place == nil {
		q.Sync()
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, nil, nil
	}
	if ifUnused && len(q.consumers) > 0 {
		q.mu.Unlock()
		return 0, nil, queue.ErrInUse
	}
	if ifEmpty && q.m.readyN > 0 {
		q.mu.Unlock()
		return 0, nil, queue.ErrNotEmpty
	}
	q.deleted = true
	n := q.m.readyN
	var refs []queue.ConsumerRef
	for _, lc := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: lc.tag, Consumer: lc.c})
	}
	q.consumers = map[uint64]*local{}
	q.mu.Unlock()
	q.shutdown()
	q.dropData()
	return n, refs, nil
}

// dropData removes a stopped queue's definition and Raft data.
func (q *Queue) dropData() {
	if st := q.typ.cfg.Store; st != nil && q.decl.ID != 0 {
		q.typ.logErr(st.DeleteQueue(q.decl.VHost, q.decl.Name, q.decl.ID), "durable store write failed")
	}
	if rs := q.typ.Store(); rs != nil {
		q.typ.logErr(rs.DeleteGroup(q.gid), "cannot remove a deleted quorum queue's raft data")
	}
}

// shutdown stops the proposer (what waits is sent first) and the group;
// proposals nobody answered are failed.
func (q *Queue) shutdown() {
	q.mu.Lock()
	q.stopped = true
	if q.expiry != nil {
		q.expiry.Stop()
	}
	if q.idle != nil {
		q.idle.Stop()
	}
	q.mu.Unlock()
	q.pmu.Lock()
	was := q.closing
	q.closing = true
	q.pmu.Unlock()
	if !was {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	<-q.done
	q.typ.unwatchLeaders(q)
	if q.place != nil {
		// A cluster transport first: raft's shutdown waits for its
		// replication goroutines, which may be waiting for a follower
		// that is down.
		q.closeTransport()
		q.r.Shutdown().Error()
	} else {
		q.r.Shutdown().Error()
		q.closeTransport()
	}
	q.bodies.close()
	q.pmu.Lock()
	ws := q.waiters
	q.waiters = map[uint64]*waiter{}
	q.pmu.Unlock()
	for _, w := range ws {
		w.answer(result{err: errClosed})
	}
	q.typ.mu.Lock()
	if q.typ.queues[q.gid] == q {
		delete(q.typ.queues, q.gid)
	}
	q.typ.mu.Unlock()
}

// Deleted implements queue.Queue.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Stop implements queue.Stopper: the group stops (what was proposed is
// sent first); the queue keeps its messages in its log.
func (q *Queue) Stop() {
	q.mu.Lock()
	done := q.stopped
	q.mu.Unlock()
	if !done {
		q.shutdown()
	}
}

// Stats implements queue.Queue, from the applied state. Its consumers
// are the group's, on every node (the waiting ones of a single active
// consumer and the cancelled ones that still hold messages too), as
// rabbit_fifo's query_consumer_count has them for the management API;
// this node's that are not applied yet are counted too. Each message a
// basic.get took unsettled counts as a consumer as well: rabbit_fifo
// checks it out to a consumer of its own ({DeliveryTag, ChannelPid},
// lifetime once) that goes when the message is settled or returned.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{Ready: q.m.readyN, ReadyBytes: q.m.readyB, Unacked: max(len(q.m.out)-q.noAckOut, 0),
		Consumers: max(len(q.m.consumers), len(q.consumers)) + q.m.gotOut(), InMemory: q.m.cachedN, InMemoryBytes: q.m.cachedB}
}

// MessageStats implements queue.Queue.
func (q *Queue) MessageStats() queue.MessageStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	return s
}

// refGet marks an Entry that basic.get took (Entry.Ref).
const refGet = 1

// DeliveryProps implements queue.Queue: a delivery carries
// x-delivery-count, how often the message came back, as RabbitMQ 3.10's:
// from its first return on for a consumer's deliveries, always (0 the
// first time) for basic.get's.
func (q *Queue) DeliveryProps(e queue.Entry) []byte {
	if e.Returns == 0 && e.Ref != refGet {
		return e.Msg.Props
	}
	return queue.WithHeader(e.Msg.Props, "x-delivery-count", int64(e.Returns))
}
