package server

import (
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Direct reply-to, as RabbitMQ implements it: a client consumes (with
// no-ack) from the pseudo-queue amq.rabbitmq.reply-to, and publishes
// requests with reply-to set to that name; the broker rewrites reply-to to
// a name unique to the channel, and a reply published to the default
// exchange under that name goes straight to the consumer, without a queue.

const (
	replyQueue  = "amq.rabbitmq.reply-to"
	replyPrefix = replyQueue + "."
)

// replyConsume subscribes the channel to its reply pseudo-queue.
func (ch *channel) replyConsume(m *amqp.BasicConsume) error {
	if !m.NoAck {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "reply consumer cannot acknowledge")
	}
	if ch.replyKey != "" {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "reply consumer already set")
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
	k := &consumer{ch: ch, tag: tag, noAck: true}
	ch.consumers[tag] = k
	ch.mu.Unlock()
	ch.replyKey = genName("")
	s := ch.c.srv
	s.replyMu.Lock()
	s.replyTo[ch.replyKey] = k
	s.replyMu.Unlock()
	return ch.reply(m.NoWait, &amqp.BasicConsumeOk{ConsumerTag: tag})
}

// dropReplyConsumer ends the channel's reply subscription.
func (ch *channel) dropReplyConsumer() {
	if ch.replyKey == "" {
		return
	}
	s := ch.c.srv
	s.replyMu.Lock()
	delete(s.replyTo, ch.replyKey)
	s.replyMu.Unlock()
	ch.replyKey = ""
}

// rewriteReplyTo gives a request's reply-to the channel's unique reply
// name. It refuses a request whose channel does not consume replies.
func (ch *channel) rewriteReplyTo(p *publishing) error {
	if len(p.props) < 2 || p.props[0]&byte(amqp.FlagReplyTo>>8) == 0 {
		return nil
	}
	props, err := amqp.DecodeProperties(p.props)
	if err != nil || props.ReplyTo != replyQueue {
		return nil
	}
	if ch.replyKey == "" {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "fast reply consumer does not exist")
	}
	props.ReplyTo = replyPrefix + ch.replyKey
	raw, err := props.Append(nil)
	if err != nil {
		return err
	}
	p.props = raw
	return nil
}

// deliverReply hands a reply published to the default exchange under a
// reply name to its consumer. It reports false when the name is not a
// live reply name (the message is then unroutable).
func (s *Server) deliverReply(key string, msg *queue.Message) bool {
	if !strings.HasPrefix(key, replyPrefix) {
		return false
	}
	s.replyMu.Lock()
	k := s.replyTo[key[len(replyPrefix):]]
	s.replyMu.Unlock()
	if k == nil {
		return false
	}
	return k.Deliver(nil, queue.Entry{Msg: msg}) != queue.Refused
}
