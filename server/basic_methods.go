package server

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/txn"
)

func (ch *channel) basicQos(m *amqp.BasicQos) error {
	if m.PrefetchSize != 0 {
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	ch.mu.Lock()
	if m.Global {
		ch.globalPrefetch = m.PrefetchCount
	} else {
		ch.prefetch = m.PrefetchCount
	}
	ch.mu.Unlock()
	ch.c.out.sendMethod(ch.id, &amqp.BasicQosOk{})
	ch.kick()
	return nil
}

func (ch *channel) basicConsume(m *amqp.BasicConsume) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	q, err := ch.findQueue(name)
	if err != nil {
		return err
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
	k := &consumer{ch: ch, tag: tag, q: q, noAck: m.NoAck, exclusive: m.Exclusive, prefetch: ch.prefetch}
	ch.mu.Unlock()

	switch err := q.AddConsumer(tag, k, m.Exclusive); {
	case errors.Is(err, queue.ErrExclusiveConsumer):
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "queue '%s' in vhost '%s' in exclusive use", name, ch.c.vhost.name)
	case errors.Is(err, queue.ErrHasConsumers):
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "cannot obtain exclusive access to queue '%s' in vhost '%s'", name, ch.c.vhost.name)
	case errors.Is(err, queue.ErrDeleted):
		return notFoundQueue(name, ch.c.vhost.name)
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
	q.Kick()
	return nil
}

func (ch *channel) basicCancel(m *amqp.BasicCancel) error {
	ch.mu.Lock()
	k := ch.consumers[m.ConsumerTag]
	delete(ch.consumers, m.ConsumerTag)
	ch.mu.Unlock()
	if k != nil {
		ch.c.unregisterConsumer(k)
		if k.q.RemoveConsumer(k.tag, k) {
			ch.c.vhost.deleteQueueIfUnused(k.q)
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
	err := ch.publish(p)
	if err == nil {
		return nil
	}
	// Errors of a publish name basic.publish.
	if ae, ok := err.(*amqp.Error); ok {
		if ae.ClassID == 0 && ae.MethodID == 0 {
			ae.ClassID, ae.MethodID = 60, 40
		}
		if ae.Hard() {
			return ae
		}
		ch.softError(ae)
		return nil
	}
	return err
}

func (ch *channel) publish(p *publishing) error {
	m := p.method
	if m.Immediate {
		return amqp.Errorf(amqp.NotImplemented, 60, 40, "immediate=true")
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
	if err := ch.checkUserID(p.props); err != nil {
		return err
	}
	if exp, ok := amqp.PropExpiration(p.props); ok {
		ttl, err := strconv.ParseUint(exp, 10, 32)
		if err != nil {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid expiration '%s': no_integer", exp)
		}
		p.ttl, p.hasTTL = time.Duration(ttl)*time.Millisecond, true
	}
	if ch.tx != nil {
		ch.tx.Publish(p)
		return nil
	}
	dropped := ch.route(p)
	if ch.confirm {
		ch.confirmSeq++
		if dropped {
			ch.c.out.sendMethod(ch.id, &amqp.BasicNack{DeliveryTag: ch.confirmSeq})
		} else {
			ch.c.out.sendMethod(ch.id, &amqp.BasicAck{DeliveryTag: ch.confirmSeq})
		}
	}
	return nil
}

// route delivers a complete publish to its queues, returning it to the
// publisher when it is mandatory and unroutable. It reports whether a queue
// refused the message for its length limit.
func (ch *channel) route(p *publishing) (dropped bool) {
	m := p.method
	v := ch.c.vhost
	msg := &queue.Message{
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
		Props:      p.props,
		Body:       p.body,
		Persistent: amqp.PropDeliveryMode(p.props) == 2,
		Priority:   priority(p.props),
		TTL:        p.ttl,
		HasTTL:     p.hasTTL,
	}
	s, _, ok := v.route(m.Exchange, m.RoutingKey, func() map[string]any {
		h, _ := amqp.PropHeaders(p.props)
		return map[string]any(h)
	})
	defer v.releaseScratch(s)
	routed := false
	for _, q := range s.queues {
		switch q.Enqueue(msg) {
		case queue.Enqueued:
			routed = true
		case queue.Dropped:
			routed, dropped = true, true
		}
	}
	if ok && !routed && m.Mandatory {
		ch.c.out.sendContent(ch.id, &amqp.BasicReturn{
			ReplyCode: amqp.NoRoute, ReplyText: "NO_ROUTE", Exchange: m.Exchange, RoutingKey: m.RoutingKey,
		}, p.props, p.body, ch.c.frameMax)
	}
	return dropped
}

func (ch *channel) basicGet(m *amqp.BasicGet) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	q, err := ch.findQueue(name)
	if err != nil {
		return err
	}
	e, remaining, ok := q.Get()
	if !ok {
		return ch.c.out.sendMethod(ch.id, &amqp.BasicGetEmpty{})
	}
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked.Add(ack.Delivery{Tag: tag, Queue: q, Entry: e})
	}
	err = ch.c.out.sendContent(ch.id, &amqp.BasicGetOk{
		DeliveryTag: tag, Redelivered: e.Redelivered, Exchange: e.Msg.Exchange,
		RoutingKey: e.Msg.RoutingKey, MessageCount: uint32(remaining),
	}, e.Msg.Props, e.Msg.Body, ch.c.frameMax)
	ch.mu.Unlock()
	if m.NoAck {
		q.Settle(1)
	}
	return err
}

// settle handles basic.ack, basic.nack and basic.reject.
func (ch *channel) settle(tag uint64, multiple, isAck, requeue bool) error {
	ch.mu.Lock()
	ds, ok := ch.unacked.Take(tag, multiple, nil)
	limited := false
	for _, d := range ds {
		if k, isConsumer := d.Consumer.(*consumer); isConsumer {
			k.unacked--
			ch.acking--
			limited = limited || k.prefetch > 0 || ch.globalPrefetch > 0
		}
	}
	ch.mu.Unlock()
	if !ok {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "unknown delivery tag %d", tag)
	}
	s := txn.Settle{Deliveries: ds, Ack: isAck, Requeue: requeue}
	if ch.tx != nil {
		ch.tx.Settle(s)
	} else {
		applySettle(s)
	}
	if limited {
		ch.kick()
	}
	return nil
}

// applySettle acknowledges, requeues or drops settled deliveries.
func applySettle(s txn.Settle) {
	if !s.Ack && s.Requeue {
		requeueGrouped(s.Deliveries)
		return
	}
	ds := s.Deliveries
	for len(ds) > 0 {
		q, n := ds[0].Queue, 1
		for n < len(ds) && ds[n].Queue == q {
			n++
		}
		if s.Ack {
			q.Settle(n)
		} else {
			entries := make([]queue.Entry, n)
			for i := range entries {
				entries[i] = ds[i].Entry
			}
			q.Reject(entries)
		}
		ds = ds[n:]
	}
}

func (ch *channel) basicRecover(requeue, sync bool) error {
	if !requeue {
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "requeue=false")
	}
	ch.mu.Lock()
	ds := ch.unacked.TakeAll(nil)
	for _, d := range ds {
		if k, isConsumer := d.Consumer.(*consumer); isConsumer {
			k.unacked--
			ch.acking--
		}
	}
	ch.mu.Unlock()
	requeueGrouped(ds)
	if sync {
		ch.c.out.sendMethod(ch.id, &amqp.BasicRecoverOk{})
	}
	return nil
}

func (ch *channel) txSelect() error {
	if ch.confirm {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "cannot switch from confirm to tx mode")
	}
	if ch.tx == nil {
		ch.tx = &txn.Tx[*publishing]{}
	}
	return ch.c.out.sendMethod(ch.id, &amqp.TxSelectOk{})
}

func (ch *channel) txCommit() error {
	if ch.tx == nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "channel is not transactional")
	}
	pubs, settles := ch.tx.Take()
	for _, p := range pubs {
		ch.route(p)
	}
	for _, s := range settles {
		applySettle(s)
	}
	return ch.c.out.sendMethod(ch.id, &amqp.TxCommitOk{})
}

func (ch *channel) txRollback() error {
	if ch.tx == nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "channel is not transactional")
	}
	ds := ch.tx.Rollback()
	ch.mu.Lock()
	for _, d := range ds {
		if k, isConsumer := d.Consumer.(*consumer); isConsumer {
			k.unacked++
			ch.acking++
		}
	}
	ch.unacked.Restore(ds)
	ch.mu.Unlock()
	return ch.c.out.sendMethod(ch.id, &amqp.TxRollbackOk{})
}

func (ch *channel) confirmSelect(m *amqp.ConfirmSelect) error {
	if ch.tx != nil {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "cannot switch from tx to confirm mode")
	}
	ch.confirm = true
	return ch.reply(m.NoWait, &amqp.ConfirmSelectOk{})
}

// checkUserID refuses a user-id property that names someone other than the
// authenticated user, as RabbitMQ does.
func (ch *channel) checkUserID(props []byte) error {
	if len(props) < 2 || binary.BigEndian.Uint16(props)&amqp.FlagUserID == 0 {
		return nil
	}
	p, err := amqp.DecodeProperties(props)
	if err != nil || p.UserID == ch.c.user {
		return nil
	}
	return amqp.Errorf(amqp.PreconditionFailed, 0, 0,
		"user_id property set to '%s' but authenticated user was '%s'", p.UserID, ch.c.user)
}

func priority(props []byte) uint8 {
	p, _ := amqp.PropPriority(props)
	return p
}
