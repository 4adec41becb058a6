package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue/replyto"
)

// Direct reply-to (package replyto has the pseudo-queues): consuming from
// amq.rabbitmq.reply-to opens the channel's pseudo-queue; a request whose
// reply-to names amq.rabbitmq.reply-to gets the pseudo-queue's name
// instead.

// checkReplyConsume refuses a consume of amq.rabbitmq.reply-to that
// RabbitMQ refuses.
func (ch *channel) checkReplyConsume(m *amqp.BasicConsume) error {
	if !m.NoAck {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "reply consumer cannot acknowledge")
	}
	if ch.replyQ != nil && !ch.replyQ.Deleted() {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "reply consumer already set")
	}
	return nil
}

// openReply opens the channel's reply pseudo-queue; it goes when its
// consumer does.
func (ch *channel) openReply() *replyto.Queue {
	ch.replyQ = ch.c.srv.replies.Open(ch.c.vhost.name)
	return ch.replyQ
}

// liveReply is the channel's reply pseudo-queue while it consumes replies,
// else nil.
func (ch *channel) liveReply() *replyto.Queue {
	if ch.replyQ == nil || ch.replyQ.Deleted() {
		return nil
	}
	return ch.replyQ
}

// rewriteReplyTo gives a request's reply-to the name of reply, the
// publisher's reply pseudo-queue. It refuses a request whose publisher
// does not consume replies (reply nil).
func rewriteReplyTo(p *publishing, reply *replyto.Queue) error {
	if rt, ok := p.idx.ReplyTo(p.props); !ok || string(rt) != replyto.Name {
		return nil
	}
	if reply == nil {
		return &PreconditionError{Reason: NoReplyConsumer}
	}
	props, err := amqp.DecodeProperties(p.props)
	if err != nil {
		return nil
	}
	props.ReplyTo = reply.Decl().Name
	raw, err := props.Append(nil)
	if err != nil {
		return err
	}
	p.setProps(raw)
	return nil
}
