package server

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/replyto"
	"github.com/warrenmq/warren/txn"
)

// channel is one AMQP channel. Fields above mu belong to the connection's
// reader goroutine; fields below it are shared with queues delivering to
// this channel's consumers and are guarded by mu. Lock order: queue, then
// channel, then outbox.
type channel struct {
	c  *conn
	id uint16

	// closing is set once the broker sent channel.close; frames other than
	// close and close-ok are discarded until the client answers.
	closing bool
	pub     *publishing // content being assembled, nil when expecting a method
	// lastQueue is the most recently declared queue, for the empty queue
	// name shortcut.
	lastQueue string
	confirms  *ack.Confirms // nil until confirm.select
	// replyQ is the channel's direct reply-to pseudo-queue, nil until it
	// consumes replies (and deleted once it stops).
	replyQ *replyto.Queue
	tx     *txn.Tx[*publishing]
	// published: the channel has published, so it counts as a publisher
	// (Server.publishers) until it closes.
	published bool
	// committing is closed once the tx.commit in flight is answered; nil
	// when none is.
	committing chan struct{}
	pubPerm    publishPermCache
	entries    []queue.Entry // applySettle's scratch

	mu         sync.Mutex
	closed     bool
	nextTag    uint64
	unacked    ack.Unacked
	credit     ack.Credit // basic.qos
	consumers  map[string]*consumer
	flowActive bool

	// confirmMode and txMode are set once, with confirms and tx, for the
	// admin API, which reads them from other goroutines (confirms and tx are
	// the reader's).
	confirmMode, txMode atomic.Bool
}

// publishing is a basic.publish with its content, as it is assembled from
// frames.
type publishing struct {
	method *amqp.BasicPublish
	props  []byte
	// idx is props indexed, in the one pass that checked them (setProps
	// indexes rewritten ones); headers is their headers property, decoded
	// at most once (headersRead), by whichever of sender-selected
	// distribution and a headers exchange needs it first.
	idx         amqp.PropIndex
	headers     amqp.Table
	headersRead bool
	bodySize    uint64
	body        []byte
	received    uint64 // body bytes seen, kept or not
	gotHdr      bool
	ttl         time.Duration // the expiration property, when hasTTL
	hasTTL      bool
	cc          []string // routing keys of the CC and BCC headers (senderSelected)
}

// consumer is one basic.consume subscription.
type consumer struct {
	ch  *channel
	tag string
	// src is the queue it consumes from: a quorum queue's can change (a
	// move, consumer_move.go). Read it with queue().
	src atomic.Pointer[queueRef]
	// opts are its basic.consume's, to attach it again after a move.
	opts queue.ConsumeOptions
	// gone: its channel dropped it (basic.cancel, a close, a broker
	// cancel); a move attaches it nowhere after that.
	gone atomic.Bool
	// moving serializes its moves.
	moving    sync.Mutex
	noAck     bool
	exclusive bool
	credit    ack.ConsumerCredit // guarded by ch.mu
	// busy: its last Deliver was refused for a full outbound buffer or
	// a stopped flow (queue.Busy); guarded by ch.mu.
	busy bool
}

type queueRef struct{ q queue.Queue }

// queue is the queue k consumes from now.
func (k *consumer) queue() queue.Queue { return k.src.Load().q }

func (k *consumer) setQueue(q queue.Queue) { k.src.Store(&queueRef{q}) }

// ChannelClosed implements queue.ChannelCloser.
func (k *consumer) ChannelClosed() bool {
	k.ch.mu.Lock()
	defer k.ch.mu.Unlock()
	return k.ch.closed
}

// RefusedBusy implements queue.Busy.
func (k *consumer) RefusedBusy() bool {
	k.ch.mu.Lock()
	defer k.ch.mu.Unlock()
	return k.busy
}

func newChannel(c *conn, id uint16) *channel {
	return &channel{c: c, id: id, consumers: map[string]*consumer{}, flowActive: true}
}

// Deliver implements queue.Consumer.
func (k *consumer) Deliver(q queue.Queue, e queue.Entry, ctx any) queue.Outcome {
	ch := k.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	k.busy = false
	if ch.closed || ch.c.stopped.Load() {
		return queue.Refused
	}
	if !ch.flowActive {
		k.busy = true
		return queue.Refused
	}
	if !k.noAck && (!ch.credit.Room(&k.credit) || ch.c.unackedFull()) {
		return queue.Refused
	}
	out := ch.c.out
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.isFullLocked() {
		k.busy = !out.closed
		return queue.Refused
	}
	ch.nextTag++
	tag := ch.nextTag
	m := e.Msg
	err := out.appendContentLocked(ch.id, &amqp.BasicDeliver{
		ConsumerTag: k.tag,
		DeliveryTag: tag,
		Redelivered: e.Redelivered,
		Exchange:    m.Exchange,
		RoutingKey:  m.RoutingKey,
	}, q.DeliveryProps(e), m.Body, ch.c.frameMax)
	if err != nil {
		ch.nextTag--
		return queue.Refused
	}
	// A publisher's reader delivering writes this socket itself at the end
	// of its burst (flushSet); anyone else wakes the writer.
	fs, _ := ctx.(*flushSet)
	out.deferLocked(fs)
	ch.traceDeliver(q, e)
	if k.noAck {
		return queue.Settled
	}
	ch.unacked.Add(ack.Delivery{Tag: tag, Queue: q, Entry: e, Credit: &k.credit, At: ch.c.srv.deliveredAt()})
	ch.c.unackedCount.Add(1)
	ch.credit.Take(&k.credit)
	return queue.Pending
}

// handleMethod runs one method frame on this channel. Soft errors close the
// channel here; a returned *amqp.Error is a hard error.
func (ch *channel) handleMethod(m amqp.Method) error {
	if p := ch.pub; p != nil {
		// Framing is checked even on a closing channel.
		if p.gotHdr {
			return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content body, got non content body frame instead")
		}
		return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content header for class 60, got non content header frame instead")
	}
	if ch.closing {
		switch m := m.(type) {
		case *amqp.ChannelCloseOk:
			ch.c.removeChannel(ch.id)
		case *amqp.ChannelClose:
			// Crossing closes: answer, but stay closing until our own
			// close is acknowledged, as RabbitMQ does.
			ch.c.out.sendMethod(ch.id, &amqp.ChannelCloseOk{})
		case *amqp.BasicPublish:
			// Its content still arrives and is framed; then dropped.
			ch.pub = &publishing{method: m}
		}
		return nil
	}
	return ch.failed(ch.dispatch(m), m.ClassID(), m.MethodID())
}

// failed answers a method's error: a soft one closes the channel here, a
// hard one is returned for the connection to close. Soft or hard, the close
// names the method (classID, methodID) unless the error names one.
func (ch *channel) failed(err error, classID, methodID uint16) error {
	if err == nil {
		return nil
	}
	ae := replyError(err)
	if ae.ClassID == 0 && ae.MethodID == 0 {
		ae.ClassID, ae.MethodID = classID, methodID
	}
	if ae.Hard() {
		return ae
	}
	ch.softError(ae)
	return nil
}

// softError closes the channel with e: the broker sends channel.close,
// releases the channel's resources at once and discards frames until the
// client's close-ok.
func (ch *channel) softError(e *amqp.Error) {
	ch.c.log.Warn().Uint16("channel", ch.id).Uint16("code", e.Code).Str("reason", e.ReplyString()).
		Str("method", amqp.MethodName(e.ClassID, e.MethodID)).Msg("closing channel on error")
	ch.shutdown()
	ch.closing = true
	ch.c.out.sendMethod(ch.id, &amqp.ChannelClose{ReplyCode: e.Code, ReplyText: e.ReplyString(), ReplyClassID: e.ClassID, ReplyMethodID: e.MethodID})
}

func (ch *channel) dispatch(m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.ChannelClose:
		ch.shutdown()
		ch.c.out.sendMethod(ch.id, &amqp.ChannelCloseOk{})
		ch.c.removeChannel(ch.id)
		return nil
	case *amqp.ChannelFlow:
		return ch.flow(m)
	case *amqp.AccessRequest:
		// Deprecated, but RabbitMQ still answers it with ticket 1.
		return ch.c.out.sendMethod(ch.id, &amqp.AccessRequestOk{Reserved1: 1})
	case *amqp.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *amqp.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *amqp.ExchangeBind:
		return ch.exchangeBind(m)
	case *amqp.ExchangeUnbind:
		return ch.exchangeUnbind(m)
	case *amqp.QueueDeclare:
		return ch.queueDeclare(m)
	case *amqp.QueueBind:
		return ch.queueBind(m)
	case *amqp.QueueUnbind:
		return ch.queueUnbind(m)
	case *amqp.QueuePurge:
		return ch.queuePurge(m)
	case *amqp.QueueDelete:
		return ch.queueDelete(m)
	case *amqp.BasicQos:
		return ch.basicQos(m)
	case *amqp.BasicConsume:
		return ch.basicConsume(m)
	case *amqp.BasicCancel:
		return ch.basicCancel(m)
	case *amqp.BasicPublish:
		return ch.basicPublish(m)
	case *amqp.BasicGet:
		return ch.basicGet(m)
	case *amqp.BasicAck:
		return ch.settle(m.DeliveryTag, m.Multiple, true, false)
	case *amqp.BasicNack:
		return ch.settle(m.DeliveryTag, m.Multiple, false, m.Requeue)
	case *amqp.BasicReject:
		return ch.settle(m.DeliveryTag, false, false, m.Requeue)
	case *amqp.BasicRecover:
		return ch.basicRecover(m.Requeue, true)
	case *amqp.BasicRecoverAsync:
		return ch.basicRecover(m.Requeue, false)
	case *amqp.TxSelect:
		return ch.txSelect()
	case *amqp.TxCommit:
		return ch.txCommit()
	case *amqp.TxRollback:
		return ch.txRollback()
	case *amqp.ConfirmSelect:
		return ch.confirmSelect(m)
	case *amqp.ChannelOpen:
		return amqp.Errorf(amqp.ChannelError, amqp.ClassChannel, amqp.MethodChannelOpen, "second 'channel.open' seen")
	}
	// Server-to-client methods, unsolicited replies and connection methods.
	return amqp.Errorf(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "unimplemented method")
}

func (ch *channel) flow(m *amqp.ChannelFlow) error {
	if !m.Active {
		// RabbitMQ does not implement consumer flow control by channel.flow.
		return amqp.Errorf(amqp.NotImplemented, amqp.ClassChannel, amqp.MethodChannelFlow, "active=false")
	}
	ch.mu.Lock()
	ch.flowActive = m.Active
	ch.mu.Unlock()
	ch.c.out.sendMethod(ch.id, &amqp.ChannelFlowOk{Active: m.Active})
	if m.Active {
		ch.kick()
	}
	return nil
}

// shutdown releases everything the channel holds: consumers are cancelled
// (auto-delete queues may go) and unacked messages requeued.
func (ch *channel) shutdown() {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return
	}
	ch.closed = true
	if ch.published {
		ch.published = false
		ch.c.srv.publishers.Add(-1)
	}
	consumers := ch.consumers
	ch.consumers = map[string]*consumer{}
	pending := ch.unacked.TakeAll(nil)
	ch.credit.Reset()
	ch.mu.Unlock()
	ch.c.unackedChanged(-len(pending))
	if ch.tx != nil {
		// Acks of an uncommitted transaction never happened.
		pending = append(pending, ch.tx.Rollback()...)
		slices.SortFunc(pending, func(a, b ack.Delivery) int { return cmp.Compare(a.Tag, b.Tag) })
	}

	// Requeued before the consumers go: a single active consumer's
	// successor then gets these first, in their order, ahead of newer
	// messages (the closed channel refuses them meanwhile).
	settleGrouped(pending, queue.Requeue)
	for _, k := range consumers {
		ch.c.unregisterConsumer(k)
		k.gone.Store(true)
		if q := k.queue(); q.RemoveConsumer(k.tag, k) {
			ch.c.vhost.deleteQueueIfUnused(q)
		}
	}
}

// settleGrouped settles deliveries with op, one Settle per queue, in the
// order the queues first appear.
func settleGrouped(ds []ack.Delivery, op queue.SettleOp) {
	switch {
	case len(ds) == 0:
		return
	case ack.SameQueue(ds):
		ds[0].Queue.Settle(ack.Entries(ds), op)
		return
	}
	for _, g := range ack.ByQueue(ds) {
		g.Queue.Settle(g.Entries, op)
	}
}

// kick re-offers messages to every consumer of this channel, after credit
// came back. Only the channel's reader calls it.
func (ch *channel) kick() { ch.kickWith(ch.c.flushCtx()) }

// kickWith is kick with the dispatch context ctx.
func (ch *channel) kickWith(ctx any) {
	ch.mu.Lock()
	qs := make([]queue.Queue, 0, len(ch.consumers))
	for _, k := range ch.consumers {
		qs = append(qs, k.queue())
	}
	ch.mu.Unlock()
	// The channel's reader kicks with its flushSet, which takes the
	// writes; another goroutine passes nil.
	for _, q := range qs {
		q.Kick(ctx)
	}
}

// handleContent takes a content header or body frame. Framing is checked
// even on a closing channel, whose publishes are then dropped.
func (ch *channel) handleContent(f amqp.Frame) error {
	p := ch.pub
	if f.Type == amqp.FrameHeader {
		if p == nil {
			return amqp.Errorf(amqp.UnexpectedFrame, 0, 0, "expected method frame, got non method frame instead")
		}
		if p.gotHdr {
			return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content body, got non content body frame instead")
		}
		h, err := amqp.DecodeContentHeader(f.Payload)
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && len(f.Payload) >= 14 {
				// The frame is whole but its properties do not decode;
				// RabbitMQ's channel fails on them with 541.
				return amqp.Errorf(amqp.InternalError, 0, 0, "cannot decode content properties: %v", err)
			}
			return err
		}
		if h.Weight != 0 {
			// RabbitMQ takes only weight 0 for a content header.
			return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content header for class 60, got non content header frame instead")
		}
		if h.ClassID != amqp.ClassBasic {
			return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content header for class 60, got one for class %d instead", h.ClassID)
		}
		if limit := ch.c.srv.maxMessageSize.Load(); h.BodySize > limit && !ch.closing {
			// The body frames still to come are framed and dropped: nothing
			// beyond the limit is buffered.
			p.gotHdr, p.bodySize = true, h.BodySize
			ch.softError(amqp.Errorf(amqp.PreconditionFailed, amqp.ClassBasic, amqp.MethodBasicPublish,
				"message size %d is larger than configured max size %d", h.BodySize, limit))
			return nil
		}
		p.gotHdr = true
		p.props = append([]byte(nil), h.RawProps...)
		p.idx = h.Props
		p.bodySize = h.BodySize
		if p.bodySize == 0 {
			return ch.publishAssembled()
		}
		// No room is taken for the body yet: the size is the peer's
		// claim, and the body grows with the frames that do arrive.
		return nil
	}
	if p == nil {
		return amqp.Errorf(amqp.UnexpectedFrame, 0, 0, "expected method frame, got non method frame instead")
	}
	if !p.gotHdr {
		return amqp.Errorf(amqp.UnexpectedFrame, amqp.ClassBasic, amqp.MethodBasicPublish, "expected content header for class 60, got non content header frame instead")
	}
	p.received += uint64(len(f.Payload))
	if p.received > p.bodySize {
		// RabbitMQ does not notice an overlong body: it keeps waiting for
		// body frames, and the next method frame is then unexpected.
		p.body = nil
		return nil
	}
	if !ch.closing {
		p.body = appendBody(p.body, f.Payload, p.bodySize)
	}
	if p.received == p.bodySize {
		return ch.publishAssembled()
	}
	return nil
}

// appendBody appends a body frame's payload to the body being assembled,
// whose announced size is size. The first frame of a body that it completes
// costs one allocation of exactly its size, as a small message's body does;
// a body of many frames grows by doubling, never beyond size, so that it
// holds no more than twice what has arrived and ends at exactly its size.
func appendBody(body, payload []byte, size uint64) []byte {
	need := uint64(len(body) + len(payload))
	if need > uint64(cap(body)) {
		c := max(need, 2*uint64(cap(body)))
		if c > size {
			c = size // need <= size: the caller checked what was received
		}
		nb := make([]byte, len(body), c)
		copy(nb, body)
		body = nb
	}
	return append(body, payload...)
}

// setProps replaces the publish's properties (a rewritten reply-to, BCC
// removed) and indexes them anew.
func (p *publishing) setProps(raw []byte) {
	p.props = raw
	p.idx, _ = amqp.IndexProperties(raw)
	p.headers, p.headersRead = nil, false
}

// headerTable returns the headers property, decoded on first use.
func (p *publishing) headerTable() map[string]any {
	if !p.headersRead {
		p.headers, _ = p.idx.Headers(p.props)
		p.headersRead = true
	}
	return p.headers
}
