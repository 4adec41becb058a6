package server

import (
	"errors"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/queue"
)

// The queue class's handlers: decode, apply the channel's own rules (the
// empty name meaning the last declared queue), call the vhost's domain API
// (domain.go), reply. Errors go back to handleMethod, which maps them with
// replyError.

// nackRefused answers a nack or reject of a delivery from a queue that
// refuses them (streams), as RabbitMQ does: 540, closing the connection.
func nackRefused(ds []ack.Delivery, isAck bool) error {
	if isAck {
		return nil
	}
	for _, d := range ds {
		if r, ok := d.Queue.(queue.NackRefuser); ok && r.RefusesNack(d.Entry) {
			q := d.Queue.Decl()
			return amqp.Errorf(amqp.NotImplemented, 0, 0, "basic.nack and basic.reject not supported by %s queues queue '%s' in vhost '%s'",
				d.Queue.Type().Info().Name, q.Name, q.VHost)
		}
	}
	return nil
}

// consumeError answers a consumer a queue's type refused, as RabbitMQ
// does for stream queues.
func consumeError(err error, q queue.Queue, name, vhost string) error {
	var (
		oe *queue.OffsetError
		ae *queue.ArgError
	)
	switch {
	case errors.Is(err, queue.ErrNoAckRefused):
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "automatic acknowledgement not supported by %s queues queue '%s' in vhost '%s'",
			q.Type().Info().Name, name, vhost)
	case errors.Is(err, queue.ErrPrefetchRequired):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "consumer prefetch count is not set for 'queue '%s' in vhost '%s''", name, vhost)
	case errors.As(err, &oe):
		// RabbitMQ 3.10 crashes on it and closes the connection with a
		// bare INTERNAL_ERROR.
		return &amqp.Error{Code: amqp.InternalError, Cause: err}
	case errors.As(err, &ae):
		// Warren's stream consumer arguments (groups, partitions,
		// filters), worded as RabbitMQ words an invalid argument.
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid arg '%s' for queue '%s' in vhost '%s': %s", ae.Arg, name, vhost, ae.Reason)
	}
	return err
}

func notFoundQueue(name, vhost string) *amqp.Error {
	return replyError(&NotFoundError{Kind: "queue", Name: name, VHost: vhost})
}

// queueName applies the empty-name shortcut: "" means the queue most
// recently declared on this channel.
func (ch *channel) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", amqp.Errorf(amqp.NotFound, 0, 0, "no previously declared queue")
	}
	return ch.lastQueue, nil
}

// findQueue looks a queue up for an operation by this connection: 404 when
// missing, 405 when another connection holds it exclusively.
func (ch *channel) findQueue(name string) (queue.Queue, error) {
	return ch.c.vhost.queueFor(ch.actor(), name)
}

func (ch *channel) queueDeclare(m *amqp.QueueDeclare) error {
	d := QueueDeclare{
		Name: m.Queue, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete, Passive: m.Passive,
	}
	if !m.Passive {
		d.Args = cloneArgs(m.Arguments)
	}
	q, err := ch.c.vhost.DeclareQueue(ch.actor(), d)
	if err != nil {
		return err
	}
	ch.lastQueue = q.Name
	return ch.reply(m.NoWait, &amqp.QueueDeclareOk{Queue: q.Name, MessageCount: uint32(q.Messages), ConsumerCount: uint32(q.Consumers)})
}

func (ch *channel) queueBind(m *amqp.QueueBind) error {
	b, err := ch.queueBinding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.Bind(ch.actor(), b); err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.QueueBindOk{})
}

func (ch *channel) queueUnbind(m *amqp.QueueUnbind) error {
	b, err := ch.queueBinding(m.Queue, m.Exchange, m.RoutingKey, m.Arguments)
	if err != nil {
		return err
	}
	if err := ch.c.vhost.Unbind(ch.actor(), b); err != nil {
		return err
	}
	return ch.reply(false, &amqp.QueueUnbindOk{})
}

// queueBinding is the binding a queue.bind or queue.unbind names. An empty
// queue name means the channel's last declared queue, and then an empty
// key means its name.
func (ch *channel) queueBinding(queueName, exchange, key string, args amqp.Table) (Binding, error) {
	name, err := ch.queueName(queueName)
	if err != nil {
		return Binding{}, err
	}
	if queueName == "" && key == "" {
		key = name
	}
	return Binding{Source: exchange, Dest: binding.Destination{Kind: binding.Queue, Name: name}, Key: key, Args: cloneArgs(args)}, nil
}

func (ch *channel) queuePurge(m *amqp.QueuePurge) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.PurgeQueue(ch.actor(), QueuePurge{Name: name})
	if err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.QueuePurgeOk{MessageCount: uint32(n)})
}

func (ch *channel) queueDelete(m *amqp.QueueDelete) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	n, err := ch.c.vhost.DeleteQueue(ch.actor(), QueueDelete{Name: name, IfUnused: m.IfUnused, IfEmpty: m.IfEmpty})
	var nf *NotFoundError
	if errors.As(err, &nf) {
		// RabbitMQ answers delete-ok for a missing queue.
		return ch.reply(m.NoWait, &amqp.QueueDeleteOk{})
	}
	if err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.QueueDeleteOk{MessageCount: uint32(n)})
}
