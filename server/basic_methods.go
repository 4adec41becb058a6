package server

import (
	"errors"
	"math"
	"strings"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/replyto"
	"github.com/warrenmq/warren/txn"
)

func (ch *channel) basicQos(m *amqp.BasicQos) error {
	if m.PrefetchSize != 0 {
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	ch.mu.Lock()
	ch.credit.Qos(m.PrefetchCount, m.Global)
	ch.mu.Unlock()
	ch.c.out.sendMethod(ch.id, &amqp.BasicQosOk{})
	ch.kick()
	return nil
}

func (ch *channel) basicConsume(m *amqp.BasicConsume) error {
	var q queue.Queue
	name := m.Queue
	isReply := m.Queue == replyto.Name
	if isReply {
		if err := ch.checkReplyConsume(m); err != nil {
			return err
		}
	} else {
		var err error
		if name, err = ch.queueName(m.Queue); err != nil {
			return err
		}
		if err := ch.check(auth.Read, "queue", name); err != nil {
			return err
		}
		if q, err = ch.findQueue(name); err != nil {
			return err
		}
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = genName("amq.ctag-")
	}
	ch.mu.Lock()
	if _, dup := ch.consumers[tag]; dup {
		ch.mu.Unlock()
		return amqp.Errorf(amqp.NotAllowed, 0, 0, "attempt to reuse consumer tag '%s'", tag)
	}
	if _, global := ch.credit.Prefetch(); global > 0 && q != nil && isQuorum(q) {
		// rabbit_quorum_queue refuses a channel's global prefetch.
		ch.mu.Unlock()
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "queue '%s' in vhost '%s' does not support global qos", name, ch.c.vhost.name)
	}
	credit := ch.credit.NewConsumer()
	ch.mu.Unlock()
	prio, err := consumerPriority(m.Arguments, name, ch.c.vhost.name)
	if err != nil && !isReply {
		return err
	}
	if isReply {
		q = ch.openReply()
	}
	k := &consumer{ch: ch, tag: tag, noAck: m.NoAck, exclusive: m.Exclusive, credit: credit}
	k.setQueue(q)
	k.opts = queue.ConsumeOptions{Tag: tag, Consumer: k, Exclusive: m.Exclusive, Priority: prio, Args: m.Arguments,
		NoAck: m.NoAck, Prefetch: credit.Limit()}
	// A move of the consumer (a membership change replacing q: it
	// lists q's consumers, this one among them as soon as it attaches)
	// waits until the attach here is done, or failed (gone).
	k.moving.Lock()
	err = q.AddConsumer(k.opts)
	for range maxMoves {
		// A quorum queue whose object here was replaced (a membership
		// change) since findQueue: the consumer goes to the new one.
		if !errors.Is(err, queue.ErrDeleted) || !isQuorum(q) {
			break
		}
		cur := ch.c.vhost.lookupQueue(name)
		if cur == nil || cur == q || cur.Deleted() {
			break
		}
		q = cur
		k.setQueue(q)
		err = q.AddConsumer(k.opts)
	}
	if err != nil {
		k.gone.Store(true)
	}
	k.moving.Unlock()
	switch {
	case errors.Is(err, queue.ErrExclusiveConsumer):
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "queue '%s' in vhost '%s' in exclusive use", name, ch.c.vhost.name)
	case errors.Is(err, queue.ErrHasConsumers):
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "cannot obtain exclusive access to queue '%s' in vhost '%s'", name, ch.c.vhost.name)
	case errors.Is(err, queue.ErrDeleted):
		return notFoundQueue(name, ch.c.vhost.name)
	case err != nil:
		return consumeError(err, q, name, ch.c.vhost.name)
	}
	ch.mu.Lock()
	ch.consumers[tag] = k
	ch.mu.Unlock()
	ch.c.registerConsumer(k)
	// consume-ok must reach the client before the first delivery, so the
	// consumer was added without dispatch; start it now.
	if err := ch.reply(m.NoWait, &amqp.BasicConsumeOk{ConsumerTag: tag}); err != nil {
		return err
	}
	q.Kick(nil)
	if isQuorum(q) && ch.c.vhost.lookupQueue(name) != q {
		// Replaced while the consumer attached: the move of the old
		// object's consumers may have listed them before this one.
		// Moving a consumer twice is harmless (moveConsumer).
		ch.c.vhost.moveConsumers(name, q, []queue.ConsumerRef{{Tag: tag, Consumer: k}})
	}
	return nil
}

// isQuorum reports whether q serves a quorum queue (a replica or a
// stand-in).
func isQuorum(q queue.Queue) bool { return q.Type().Info().Name == "quorum" }

func (ch *channel) basicCancel(m *amqp.BasicCancel) error {
	ch.mu.Lock()
	k := ch.consumers[m.ConsumerTag]
	delete(ch.consumers, m.ConsumerTag)
	ch.mu.Unlock()
	if k != nil {
		ch.c.unregisterConsumer(k)
		k.gone.Store(true)
		if q := k.queue(); q.RemoveConsumer(k.tag, k) {
			ch.c.vhost.deleteQueueIfUnused(q)
		}
	}
	return ch.reply(m.NoWait, &amqp.BasicCancelOk{ConsumerTag: m.ConsumerTag})
}

// cancelByBroker drops consumer k whose queue was deleted and, if the client
// understands it, tells it with basic.cancel. The caller holds the vhost
// lock, so this must not call back into the vhost.
func (ch *channel) cancelByBroker(k *consumer) {
	ch.mu.Lock()
	if ch.consumers[k.tag] != k {
		ch.mu.Unlock()
		return
	}
	delete(ch.consumers, k.tag)
	closed := ch.closed
	ch.mu.Unlock()
	k.gone.Store(true)
	ch.c.unregisterConsumer(k)
	if !closed && ch.c.caps.consumerCancelNotify {
		ch.c.out.sendMethod(ch.id, &amqp.BasicCancel{ConsumerTag: k.tag, NoWait: true})
	}
}

func (ch *channel) basicPublish(m *amqp.BasicPublish) error {
	ch.pub = &publishing{method: m}
	return nil
}

// publishAssembled runs a publish whose content is complete.
func (ch *channel) publishAssembled() error {
	p := ch.pub
	ch.pub = nil
	if ch.closing {
		return nil
	}
	// Errors of a publish name basic.publish.
	return ch.failed(ch.publish(p), amqp.ClassBasic, amqp.MethodBasicPublish)
}

func (ch *channel) publish(p *publishing) error {
	m := p.method
	if m.Immediate {
		return amqp.Errorf(amqp.NotImplemented, amqp.ClassBasic, amqp.MethodBasicPublish, "immediate=true")
	}
	if err := ch.checkPublish(m.Exchange); err != nil {
		return err
	}
	v := ch.c.vhost
	v.mu.RLock()
	e := v.exchanges[m.Exchange]
	v.mu.RUnlock()
	if e == nil {
		return notFoundExchange(m.Exchange, v.name)
	}
	if e.Internal {
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "cannot publish to internal exchange '%s' in vhost '%s'", m.Exchange, v.name)
	}
	if err := ch.checkTopic(e, auth.Write, m.RoutingKey); err != nil {
		return err
	}
	if err := checkContent(ch.c.user, p, ch.liveReply()); err != nil {
		return err
	}
	if !ch.published {
		ch.published = true
		ch.c.srv.publishers.Add(1)
	}
	if ch.tx != nil {
		if m.Exchange == "" && strings.HasPrefix(m.RoutingKey, replyto.Prefix) {
			// RabbitMQ hands a direct reply-to reply over at once, outside
			// the transaction.
			_, err := ch.route(p, nil)
			return err
		}
		if err := ch.checkRoute(p); err != nil {
			return err
		}
		ch.tx.Publish(p)
		return nil
	}
	if ch.confirms == nil {
		_, err := ch.route(p, nil)
		return err
	}
	v.stats.confirmed(ch.c.id)
	pc := &pendingConfirm{seq: ch.confirms.Next(), confirms: ch.confirms}
	pc.n.Store(2) // the store's write (or its absence) and the enqueue
	dropped, err := ch.route(p, pc.storeDone)
	if err != nil {
		return err // the channel closes: its confirms go with it
	}
	if dropped {
		pc.failed.Store(true)
	}
	pc.resolve()
	return nil
}

// newMessage builds the queue message of a complete publish.
func newMessage(p *publishing) *queue.Message {
	m := p.method
	return &queue.Message{
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
		Props:      p.props,
		Body:       p.body,
		Persistent: p.idx.DeliveryMode == 2,
		Priority:   p.idx.Priority,
		TTL:        p.ttl,
		HasTTL:     p.hasTTL,
		// The index is of p.props: a queue type reads headers from it.
		Headers: p.idx.HeadersRaw(p.props), HeadersIndexed: true,
	}
}

// route delivers a complete publish to its queues, returning it to the
// publisher when it is mandatory and unroutable. done is called once the
// message is durable in every durable queue it went to (at once when there
// is none). It reports whether a queue refused the message for its length
// limit. A queue that refuses the message outright (queue.PublishChecker)
// fails the publish before any queue has it.
func (ch *channel) route(p *publishing, done func(error)) (dropped bool, err error) {
	m := p.method
	v := ch.c.vhost
	msg := newMessage(p)
	if m.Exchange == "" {
		if rq, ok := ch.c.srv.replies.Lookup(m.RoutingKey); ok {
			// A reply taken at once is neither routed nor traced; one
			// its consumer cannot take is unroutable, as in RabbitMQ.
			if routed, _ := v.deliver(msg, []queue.Queue{rq}, nil, ch.c.flushCtx()); routed {
				if done != nil {
					done(nil)
				}
				return false, nil
			}
		}
	}
	s := v.routePublish(m.Exchange, m.RoutingKey, p.cc, p.headerTable)
	defer v.releaseScratch(s)
	if err := checkQueues(msg, s.queues); err != nil {
		return false, err
	}
	ch.tracePublish(p, s.queues)
	routed, dropped := v.deliver(msg, s.queues, done, ch.c.flushCtx())
	ch.routed(p, s.found, routed)
	return dropped, nil
}

// checkRoute routes a transaction's publish to see that its queues take
// it: refused there, it fails the publish at once rather than the commit.
func (ch *channel) checkRoute(p *publishing) error {
	v := ch.c.vhost
	s := v.routePublish(p.method.Exchange, p.method.RoutingKey, p.cc, p.headerTable)
	defer v.releaseScratch(s)
	return checkQueues(newMessage(p), s.queues)
}

// checkQueues asks the queues that can refuse a message outright
// (queue.PublishChecker: a partitioned stream and its partition headers)
// whether they take msg: 406 PRECONDITION_FAILED when one does not.
func checkQueues(msg *queue.Message, queues []queue.Queue) error {
	for _, q := range queues {
		if c, ok := q.(queue.PublishChecker); ok {
			if err := c.CheckPublish(msg); err != nil {
				return amqp.Errorf(amqp.PreconditionFailed, amqp.ClassBasic, amqp.MethodBasicPublish, "%s", err)
			}
		}
	}
	return nil
}

// routed counts a publish's routing and returns it to the publisher when
// it was mandatory and went to no queue (an exchange that exists routed
// it nowhere).
func (ch *channel) routed(p *publishing, found, routed bool) {
	m := p.method
	ch.c.vhost.stats.routed(ch.c.id, routed, m.Mandatory)
	if found && !routed && m.Mandatory {
		ch.c.out.sendContent(ch.id, &amqp.BasicReturn{
			ReplyCode: amqp.NoRoute, ReplyText: "NO_ROUTE", Exchange: m.Exchange, RoutingKey: m.RoutingKey,
		}, p.props, p.body, ch.c.frameMax)
	}
}

func (ch *channel) basicGet(m *amqp.BasicGet) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	q, g, err := ch.c.vhost.Getter(ch.actor(), name)
	if err != nil {
		return err
	}
	e, remaining, ok := g.Get(m.NoAck)
	if !ok {
		return ch.c.out.sendMethod(ch.id, &amqp.BasicGetEmpty{})
	}
	ch.traceDeliver(q, e)
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked.Add(ack.Delivery{Tag: tag, Queue: q, Entry: e, At: ch.c.srv.deliveredAt()})
		ch.c.unackedCount.Add(1)
	}
	err = ch.c.out.sendContent(ch.id, &amqp.BasicGetOk{
		DeliveryTag: tag, Redelivered: e.Redelivered, Exchange: e.Msg.Exchange,
		RoutingKey: e.Msg.RoutingKey, MessageCount: uint32(remaining),
	}, q.DeliveryProps(e), e.Msg.Body, ch.c.frameMax)
	ch.mu.Unlock()
	return err
}

// settle handles basic.ack, basic.nack and basic.reject.
func (ch *channel) settle(tag uint64, multiple, isAck, requeue bool) error {
	ch.mu.Lock()
	ds, ok := ch.unacked.Take(tag, multiple, nil)
	limited := false
	if ch.tx == nil {
		// In a transaction the credit comes back at tx.commit.
		limited = ch.credit.Release(ds)
	}
	ch.mu.Unlock()
	ch.c.unackedChanged(-len(ds))
	if !ok {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "unknown delivery tag %d", tag)
	}
	if err := nackRefused(ds, isAck); err != nil {
		return err
	}
	op := queue.Ack
	switch {
	case isAck:
	case requeue:
		op = queue.Nack
	default:
		op = queue.Reject
	}
	if ch.tx != nil {
		ch.tx.Settle(txn.Settle{Deliveries: ds, Op: op})
	} else {
		ch.applySettle(ds, op)
	}
	if limited {
		ch.kick()
	}
	return nil
}

// applySettle settles deliveries with op, one Settle per run of one
// queue's deliveries (the common case: one run), through a scratch slice
// the queues do not keep.
func (ch *channel) applySettle(ds []ack.Delivery, op queue.SettleOp) {
	for len(ds) > 0 {
		q, n := ds[0].Queue, 1
		for n < len(ds) && ds[n].Queue == q {
			n++
		}
		es := ch.entries[:0]
		for _, d := range ds[:n] {
			es = append(es, d.Entry)
		}
		q.Settle(es, op)
		clear(es)
		ch.entries = es[:0]
		ds = ds[n:]
	}
}

func (ch *channel) basicRecover(requeue, sync bool) error {
	if !requeue {
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "requeue=false")
	}
	ch.mu.Lock()
	ds := ch.unacked.TakeAll(nil)
	ch.credit.Release(ds)
	ch.mu.Unlock()
	ch.c.unackedChanged(-len(ds))
	if sync {
		// recover-ok goes out ahead of the redeliveries, as in RabbitMQ.
		ch.c.out.sendMethod(ch.id, &amqp.BasicRecoverOk{})
	}
	settleGrouped(ds, queue.Requeue)
	return nil
}

// consumerPriority reads the x-priority consume argument: any integer, as
// RabbitMQ takes it (beyond the int range it is clamped).
func consumerPriority(args amqp.Table, q, vhost string) (int, error) {
	v, ok := args["x-priority"]
	if !ok {
		return 0, nil
	}
	n, ok := queue.IntValue(v)
	if !ok {
		return 0, amqp.Errorf(amqp.PreconditionFailed, 0, 0,
			"invalid arg 'x-priority' for queue '%s' in vhost '%s': \"expected integer, got %s\"", q, vhost, amqp.FieldTypeName(v))
	}
	return int(max(min(n, math.MaxInt32), math.MinInt32)), nil
}
