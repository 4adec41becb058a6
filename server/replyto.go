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

// rewriteReplyTo gives a request's reply-to the channel's unique reply
// name. It refuses a request whose channel does not consume replies.
func (ch *channel) rewriteReplyTo(p *publishing) error {
	if rt, ok := p.idx.ReplyTo(p.props); !ok || string(rt) != replyto.Name {
		return nil
	}
	props, err := amqp.DecodeProperties(p.props)
	if err != nil {
		return nil
	}
	if ch.replyQ == nil || ch.replyQ.Deleted() {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "fast reply consumer does not exist")
	}
	props.ReplyTo = ch.replyQ.Decl().Name
	raw, err := props.Append(nil)
	if err != nil {
		return err
	}
	p.setProps(raw)
	return nil
}
