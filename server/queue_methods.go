package server

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/queue"
)

// purgeRefused and getRefused answer an operation a queue's type lacks,
// in RabbitMQ's words for stream queues.
func purgeRefused(q queue.Queue) *amqp.Error {
	d := q.Decl()
	return amqp.Errorf(amqp.NotImplemented, 0, 0, "queue.purge not supported by %s queues queue '%s' in vhost '%s'",
		q.Type().Info().Name, d.Name, d.VHost)
}

func getRefused(q queue.Queue) *amqp.Error {
	d := q.Decl()
	return amqp.Errorf(amqp.NotImplemented, 0, 0, "basic.get not supported by %s queues queue '%s' in vhost '%s'",
		q.Type().Info().Name, d.Name, d.VHost)
}

// nackRefused answers a nack or reject of a delivery from a queue that
// refuses them (streams), as RabbitMQ does: 540, closing the connection.
func nackRefused(ds []ack.Delivery, isAck bool) error {
	if isAck {
		return nil
	}
	for _, d := range ds {
		if _, ok := d.Queue.(queue.NackRefuser); ok {
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
	var oe *queue.OffsetError
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
	}
	return err
}

func notFoundQueue(name, vhost string) *amqp.Error {
	return amqp.Errorf(amqp.NotFound, 0, 0, "no queue '%s' in vhost '%s'", name, vhost)
}

func lockedQueue(name, vhost string) *amqp.Error {
	return amqp.Errorf(amqp.ResourceLocked, 0, 0,
		"cannot obtain exclusive access to locked queue '%s' in vhost '%s'. "+
			"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
		name, vhost)
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
	v := ch.c.vhost
	v.mu.RLock()
	q := v.queues[name]
	v.mu.RUnlock()
	if q == nil {
		return nil, notFoundQueue(name, v.name)
	}
	if d := q.Decl(); d.Exclusive && d.Owner != ch.c.id {
		return nil, lockedQueue(name, v.name)
	}
	return q, nil
}

// queueArgsCompared are the arguments whose values must match on
// re-declaration, as RabbitMQ checks them.
var queueArgsCompared = []string{
	"x-expires", "x-message-ttl", "x-max-length", "x-max-length-bytes", "x-max-priority",
	"x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-queue-mode",
	"x-queue-type", "x-single-active-consumer", "x-queue-master-locator", "x-delivery-limit",
}

func (ch *channel) queueDeclare(m *amqp.QueueDeclare) error {
	v := ch.c.vhost
	name := m.Queue
	if m.Passive {
		// No empty-name shortcut here: RabbitMQ looks the queue '' up.
		q, err := ch.findQueue(name)
		if err != nil {
			return err
		}
		st := q.Stats()
		ch.lastQueue = name
		return ch.reply(m.NoWait, &amqp.QueueDeclareOk{Queue: name, MessageCount: uint32(st.Ready), ConsumerCount: uint32(st.Consumers)})
	}
	if name == "" {
		name = genName("amq.gen-")
	} else if strings.HasPrefix(name, "amq.") {
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	if err := ch.check(auth.Configure, "queue", name); err != nil {
		return err
	}
	d := queue.Decl{
		VHost: v.name, Name: name, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete,
		Args: cloneArgs(m.Arguments),
	}
	if m.Exclusive {
		d.Owner = ch.c.id
	}
	typ, _, err := ch.c.srv.types.Check(&d)
	if err != nil {
		return declareError(err, name, v.name)
	}
	v.mu.Lock()
	q := v.queues[name]
	if q != nil {
		if have := q.Decl(); (have.Exclusive && have.Owner != ch.c.id) || have.Exclusive != d.Exclusive {
			v.mu.Unlock()
			return lockedQueue(name, v.name)
		}
		if arg, got, have := queueDifference(*q.Decl(), d); arg != "" {
			v.mu.Unlock()
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0,
				"inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'",
				arg, name, v.name, got, have)
		}
		q.Touch()
	} else {
		if err := ch.checkNewQueue(name, d.Args); err != nil {
			v.mu.Unlock()
			return err
		}
		limits, err := v.effectiveLimits(name, d.Args)
		if err != nil {
			v.mu.Unlock()
			return err
		}
		if q, err = typ.New(d, limits, v.hooks); err != nil {
			v.mu.Unlock()
			return declareError(err, name, v.name)
		}
		v.queues[name] = q
		v.srv.churn.queueCreated.Add(1)
	}
	v.mu.Unlock()
	v.srv.churn.queueDeclared.Add(1)
	ch.lastQueue = name
	st := q.Stats()
	return ch.reply(m.NoWait, &amqp.QueueDeclareOk{Queue: name, MessageCount: uint32(st.Ready), ConsumerCount: uint32(st.Consumers)})
}

func queueDifference(have, got queue.Decl) (arg string, g, h any) {
	switch {
	case have.Durable != got.Durable:
		return "durable", got.Durable, have.Durable
	case have.AutoDelete != got.AutoDelete:
		return "auto_delete", got.AutoDelete, have.AutoDelete
	}
	for _, k := range queueArgsCompared {
		if !reflect.DeepEqual(normalizeArg(have.Args[k]), normalizeArg(got.Args[k])) {
			return k, fmtArg(got.Args[k]), fmtArg(have.Args[k])
		}
	}
	return "", nil, nil
}

// normalizeArg makes integer arguments of different widths compare equal,
// as RabbitMQ compares numbers by value.
func normalizeArg(v any) any {
	if n, ok := queue.IntValue(v); ok {
		return n
	}
	return v
}

func (ch *channel) queueBind(m *amqp.QueueBind) error {
	if err := ch.bindQueue(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, true); err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.QueueBindOk{})
}

func (ch *channel) queueUnbind(m *amqp.QueueUnbind) error {
	if err := ch.bindQueue(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, false); err != nil {
		return err
	}
	return ch.reply(false, &amqp.QueueUnbindOk{})
}

// bindQueue adds or removes a queue binding. An empty queue name means the
// channel's last declared queue, and then an empty key means its name.
func (ch *channel) bindQueue(queueName, exchange, key string, args amqp.Table, bind bool) error {
	name, err := ch.queueName(queueName)
	if err != nil {
		return err
	}
	if queueName == "" && key == "" {
		key = name
	}
	if err := ch.check(auth.Write, "queue", name); err != nil {
		return err
	}
	if exchange == "" {
		return defaultExchangeRefused()
	}
	if err := ch.checkBindSource(exchange, key); err != nil {
		return err
	}
	b := binding.Binding{Dest: binding.Destination{Kind: binding.Queue, Name: name}, Key: key, Args: cloneArgs(args)}
	if !bind {
		return ch.c.vhost.unbind(exchange, b, ch.c.id)
	}
	if _, err := ch.findQueue(name); err != nil {
		return err
	}
	return ch.c.vhost.changeBinding(exchange, b, bind)
}

func (ch *channel) queuePurge(m *amqp.QueuePurge) error {
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
	p, ok := q.(queue.Purger)
	if !ok {
		return purgeRefused(q)
	}
	return ch.reply(m.NoWait, &amqp.QueuePurgeOk{MessageCount: uint32(p.Purge())})
}

func (ch *channel) queueDelete(m *amqp.QueueDelete) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.check(auth.Configure, "queue", name); err != nil {
		return err
	}
	q, err := ch.findQueue(name)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			// RabbitMQ answers delete-ok for a missing queue.
			return ch.reply(m.NoWait, &amqp.QueueDeleteOk{})
		}
		return err
	}
	n, err := ch.c.vhost.deleteQueue(q, m.IfUnused, m.IfEmpty)
	switch {
	case errors.Is(err, queue.ErrInUse):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "queue '%s' in vhost '%s' in use", name, ch.c.vhost.name)
	case errors.Is(err, queue.ErrNotEmpty):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "queue '%s' in vhost '%s' not empty", name, ch.c.vhost.name)
	case err != nil:
		return fmt.Errorf("delete queue: %w", err)
	}
	return ch.reply(m.NoWait, &amqp.QueueDeleteOk{MessageCount: uint32(n)})
}

// checkNewQueue runs the checks a queue passes only when it is created:
// naming a dead-letter exchange needs read on the queue and write on that
// exchange, and the vhost's max-queues limit. v.mu is held.
func (ch *channel) checkNewQueue(name string, args map[string]any) error {
	if dlx, ok := args["x-dead-letter-exchange"].(string); ok {
		if err := ch.check(auth.Read, "queue", name); err != nil {
			return err
		}
		if err := ch.check(auth.Write, "exchange", dlx); err != nil {
			return err
		}
	}
	if err := ch.c.vhost.admitQueue(name); err != nil {
		return err
	}
	return nil
}

func fmtArg(v any) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprint(v)
}

// declareError words a refused declaration as RabbitMQ does.
func declareError(err error, name, vhost string) error {
	var ae *queue.ArgError
	var te *queue.TypeArgError
	var pe *queue.PropertyError
	var ate *queue.ArgTypeError
	switch {
	case errors.As(err, &ate):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid type '%s' for arg '%s' in queue '%s' in vhost '%s'",
			ate.Type, ate.Arg, name, vhost)
	case errors.As(err, &ae):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid arg '%s' for queue '%s' in vhost '%s': %s",
			ae.Arg, name, vhost, ae.Reason)
	case errors.As(err, &te):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid arg '%s' for queue '%s' in vhost '%s' of queue type %s",
			te.Arg, name, vhost, te.Module)
	case errors.As(err, &pe):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "invalid property '%s' for queue '%s' in vhost '%s'",
			pe.Property, name, vhost)
	}
	return err
}
