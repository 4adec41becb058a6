package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/persist"
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
		// As in RabbitMQ, a per-consumer limit lifts the channel's.
		ch.prefetch = m.PrefetchCount
		ch.globalPrefetch = 0
	}
	ch.mu.Unlock()
	ch.c.out.sendMethod(ch.id, &amqp.BasicQosOk{})
	ch.kick()
	return nil
}

func (ch *channel) basicConsume(m *amqp.BasicConsume) error {
	if m.Queue == replyQueue {
		return ch.replyConsume(m)
	}
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.check(auth.Read, "queue", name); err != nil {
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

	prio, err := consumerPriority(m.Arguments)
	if err != nil {
		return err
	}
	switch err := q.AddConsumer(tag, k, m.Exclusive, prio); {
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
	if k != nil && k.q == nil {
		ch.dropReplyConsumer()
	} else if k != nil {
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
	if err := ch.checkUserID(p.props); err != nil {
		return err
	}
	if err := ch.rewriteReplyTo(p); err != nil {
		return err
	}
	if exp, ok := amqp.PropExpiration(p.props); ok {
		if p.ttl, p.hasTTL = parseExpiration(exp); !p.hasTTL {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid expiration '%s': %s", exp, expirationError(exp))
		}
	}
	if dm, ok := amqp.PropDeliveryModeOK(p.props); ok && dm != 1 && dm != 2 {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid message: {delivery_mode_unknown,%d}", dm)
	}
	if err := p.senderSelected(); err != nil {
		return err
	}
	if ch.tx != nil {
		if m.Exchange == "" && strings.HasPrefix(m.RoutingKey, replyPrefix) {
			// RabbitMQ hands a direct reply-to reply over at once, outside
			// the transaction.
			ch.route(p, nil)
			return nil
		}
		ch.tx.Publish(p)
		return nil
	}
	if ch.confirms == nil {
		ch.route(p, nil)
		return nil
	}
	v.stats.confirmed(ch.c.id)
	pc := &pendingConfirm{seq: ch.confirms.Next(), confirms: ch.confirms}
	pc.n.Store(2) // the store's write (or its absence) and the enqueue
	if dropped := ch.route(p, pc.storeDone); dropped {
		pc.failed.Store(true)
	}
	pc.resolve()
	return nil
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

// newMessage builds the queue message of a complete publish.
func newMessage(p *publishing) *queue.Message {
	m := p.method
	return &queue.Message{
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
		Props:      p.props,
		Body:       p.body,
		Persistent: amqp.PropDeliveryMode(p.props) == 2,
		Priority:   priority(p.props),
		TTL:        p.ttl,
		HasTTL:     p.hasTTL,
	}
}

// route delivers a complete publish to its queues, returning it to the
// publisher when it is mandatory and unroutable. done is called once the
// message is durable in every durable queue it went to (at once when there
// is none). It reports whether a queue refused the message for its length
// limit.
func (ch *channel) route(p *publishing, done func(error)) (dropped bool) {
	m := p.method
	v := ch.c.vhost
	msg := newMessage(p)
	if m.Exchange == "" && ch.c.srv.deliverReply(m.RoutingKey, msg) {
		if done != nil {
			done(nil)
		}
		return false
	}
	s := v.routePublish(m.Exchange, m.RoutingKey, p.cc, p.props)
	defer v.releaseScratch(s)
	ch.tracePublish(p, s.queues)
	routed, dropped := v.deliver(msg, s.queues, done, ch.c.flushCtx())
	v.stats.routed(ch.c.id, routed, m.Mandatory)
	if s.found && !routed && m.Mandatory {
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
	if err := ch.check(auth.Read, "queue", name); err != nil {
		return err
	}
	q, err := ch.findQueue(name)
	if err != nil {
		return err
	}
	e, remaining, ok := q.Get()
	q.CountGet(ok, m.NoAck, e.Redelivered)
	if !ok {
		return ch.c.out.sendMethod(ch.id, &amqp.BasicGetEmpty{})
	}
	ch.traceDeliver(q, e)
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked.Add(ack.Delivery{Tag: tag, Queue: q, Entry: e})
		ch.c.unackedCount.Add(1)
	}
	err = ch.c.out.sendContent(ch.id, &amqp.BasicGetOk{
		DeliveryTag: tag, Redelivered: e.Redelivered, Exchange: e.Msg.Exchange,
		RoutingKey: e.Msg.RoutingKey, MessageCount: uint32(remaining),
	}, deliveryProps(q, e), e.Msg.Body, ch.c.frameMax)
	ch.mu.Unlock()
	if m.NoAck {
		q.Settle(1)
		ch.c.vhost.settleStored([]ack.Delivery{{Tag: tag, Queue: q, Entry: e}})
	} else {
		ch.c.vhost.markDelivered(q, e)
	}
	return err
}

// settle handles basic.ack, basic.nack and basic.reject.
func (ch *channel) settle(tag uint64, multiple, isAck, requeue bool) error {
	ch.mu.Lock()
	ds, ok := ch.unacked.Take(tag, multiple, nil)
	limited := false
	if ch.tx == nil {
		// In a transaction the credit comes back at tx.commit.
		limited = ch.releaseCreditLocked(ds)
	}
	ch.mu.Unlock()
	ch.c.unackedChanged(-len(ds))
	if !ok {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "unknown delivery tag %d", tag)
	}
	s := txn.Settle{Deliveries: ds, Ack: isAck, Requeue: requeue}
	if ch.tx != nil {
		ch.tx.Settle(s)
	} else {
		ch.applySettle(s, true)
	}
	if limited {
		ch.kick()
	}
	return nil
}

// releaseCreditLocked gives back the prefetch credit that settled consumer
// deliveries held, and reports whether a limit applied to any of them (so
// that consumers may get more now). ch.mu is held.
func (ch *channel) releaseCreditLocked(ds []ack.Delivery) (limited bool) {
	for _, d := range ds {
		if k, isConsumer := d.Consumer.(*consumer); isConsumer {
			k.unacked--
			ch.acking--
			limited = limited || k.prefetch > 0 || ch.globalPrefetch > 0
		}
	}
	return limited
}

// applySettle acknowledges, requeues or drops settled deliveries. With
// toStore, acknowledged and dropped stored entries are removed from the
// store too (a transaction does that in its own store write).
func (ch *channel) applySettle(s txn.Settle, toStore bool) {
	if !s.Ack && s.Requeue {
		requeueGrouped(s.Deliveries)
		return
	}
	if toStore {
		ch.c.vhost.settleStored(s.Deliveries)
	}
	ds := s.Deliveries
	for len(ds) > 0 {
		q, n := ds[0].Queue, 1
		for n < len(ds) && ds[n].Queue == q {
			n++
		}
		if s.Ack {
			q.Settle(n)
			q.CountAck(n)
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
	ch.c.unackedChanged(-len(ds))
	if sync {
		// recover-ok goes out ahead of the redeliveries, as in RabbitMQ.
		ch.c.out.sendMethod(ch.id, &amqp.BasicRecoverOk{})
	}
	requeueGrouped(ds)
	return nil
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
	v := ch.c.vhost
	pubs, settles := ch.tx.Take()
	type routedPub struct {
		p       *publishing
		msg     *queue.Message
		queues  []*queue.Queue
		entries []persist.QueueSeq
		found   bool
	}
	routedPubs := make([]routedPub, 0, len(pubs))
	var ops []persist.PublishOp
	for _, p := range pubs {
		msg := newMessage(p)
		s := v.routePublish(p.method.Exchange, p.method.RoutingKey, p.cc, p.props)
		qs := append([]*queue.Queue(nil), s.queues...)
		found := s.found
		v.releaseScratch(s)
		ch.tracePublish(p, qs)
		entries := v.reserve(msg, qs)
		if len(entries) > 0 {
			ops = append(ops, persist.PublishOp{MsgID: msg.StoreID, Msg: messageRecord(msg), Entries: entries})
		}
		routedPubs = append(routedPubs, routedPub{p, msg, qs, entries, found})
	}
	var stored []persist.QueueSeq
	for _, s := range settles {
		if s.Ack || !s.Requeue {
			stored = append(stored, storedEntries(s.Deliveries)...)
		}
	}
	var durable chan error
	if len(ops) > 0 || len(stored) > 0 {
		durable = make(chan error, 1)
		v.store.Atomic(ops, stored, func(err error) { durable <- err })
	}
	for _, r := range routedPubs {
		routed, _ := v.enqueue(r.msg, r.queues, r.entries, ch.c.flushCtx())
		v.stats.routed(ch.c.id, routed, r.p.method.Mandatory)
		if r.found && !routed && r.p.method.Mandatory {
			ch.c.out.sendContent(ch.id, &amqp.BasicReturn{
				ReplyCode: amqp.NoRoute, ReplyText: "NO_ROUTE", Exchange: r.p.method.Exchange, RoutingKey: r.p.method.RoutingKey,
			}, r.p.props, r.p.body, ch.c.frameMax)
		}
	}
	for _, s := range settles {
		ch.applySettle(s, false)
	}
	if durable != nil {
		// The connection's reader waits for this one fsync; other
		// connections are not held up.
		if err := <-durable; err != nil {
			return amqp.Errorf(amqp.InternalError, 0, 0, "transaction could not be made durable: %v", err)
		}
	}
	err := ch.c.out.sendMethod(ch.id, &amqp.TxCommitOk{})
	// The committed settlements give their prefetch credit back now:
	// deliveries it makes room for follow commit-ok.
	limited := false
	ch.mu.Lock()
	for _, s := range settles {
		limited = ch.releaseCreditLocked(s.Deliveries) || limited
	}
	ch.mu.Unlock()
	if limited {
		ch.kick()
	}
	return err
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

// maxExpiration caps a message TTL (RabbitMQ takes any non-negative
// integer; beyond a century it makes no difference).
const maxExpiration = 100 * 365 * 24 * time.Hour

// parseExpiration reads the expiration property: a whole number of
// milliseconds, optionally signed, as Erlang's string:to_integer reads it
// for RabbitMQ; negative numbers and trailing characters are refused
// (expirationError says why).
func parseExpiration(exp string) (time.Duration, bool) {
	n, rest, ok := leadingInteger(exp)
	if !ok || rest != "" || n.Sign() < 0 {
		return 0, false
	}
	if !n.IsInt64() || n.Int64() > int64(maxExpiration/time.Millisecond) {
		return maxExpiration, true
	}
	return time.Duration(n.Int64()) * time.Millisecond, true
}

// expirationError is RabbitMQ's reason for refusing exp.
func expirationError(exp string) string {
	n, rest, ok := leadingInteger(exp)
	switch {
	case !ok:
		return "no_integer"
	case rest != "":
		return fmt.Sprintf("{leftover_string,%q}", rest)
	case n.Sign() < 0:
		return fmt.Sprintf("{value_negative,%s}", n)
	}
	return "no_integer"
}

// leadingInteger reads an optionally signed decimal integer at the start
// of s and returns it with what follows it.
func leadingInteger(s string) (*big.Int, string, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return nil, s, false
	}
	n, ok := new(big.Int).SetString(s[:j], 10)
	return n, s[j:], ok
}

func priority(props []byte) uint8 {
	p, _ := amqp.PropPriority(props)
	return p
}

// consumerPriority reads the x-priority consume argument.
func consumerPriority(args amqp.Table) (int, error) {
	v, ok := args["x-priority"]
	if !ok {
		return 0, nil
	}
	switch n := v.(type) {
	case int8:
		return int(n), nil
	case uint8:
		return int(n), nil
	case int16:
		return int(n), nil
	case uint16:
		return int(n), nil
	case int32:
		return int(n), nil
	case uint32:
		return int(n), nil
	case int64:
		return int(n), nil
	}
	return 0, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-priority' of type '%T'", v)
}
