package server

import (
	"errors"
	"maps"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
)

// The exchange class's handlers: decode, call the vhost's domain API
// (domain.go), reply. Errors go back to handleMethod, which maps them with
// replyError.

func notFoundExchange(name, vhost string) *amqp.Error {
	return replyError(&NotFoundError{Kind: "exchange", Name: name, VHost: vhost})
}

func (ch *channel) exchangeDeclare(m *amqp.ExchangeDeclare) error {
	d := ExchangeDeclare{
		Name: m.Exchange, Type: m.Type, Durable: m.Durable, AutoDelete: m.AutoDelete, Internal: m.Internal,
		Passive: m.Passive,
	}
	if !m.Passive {
		d.Args = cloneArgs(m.Arguments)
	}
	if err := ch.c.vhost.DeclareExchange(ch.actor(), d); err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.ExchangeDeclareOk{})
}

func (ch *channel) exchangeDelete(m *amqp.ExchangeDelete) error {
	err := ch.c.vhost.DeleteExchange(ch.actor(), ExchangeDelete{Name: m.Exchange, IfUnused: m.IfUnused})
	var nf *NotFoundError
	if err != nil && !errors.As(err, &nf) {
		return err
	}
	// RabbitMQ answers delete-ok for a missing exchange too.
	return ch.reply(m.NoWait, &amqp.ExchangeDeleteOk{})
}

func (ch *channel) exchangeBind(m *amqp.ExchangeBind) error {
	if err := ch.c.vhost.Bind(ch.actor(), exchangeBinding(m.Destination, m.Source, m.RoutingKey, m.Arguments)); err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.ExchangeBindOk{})
}

func (ch *channel) exchangeUnbind(m *amqp.ExchangeUnbind) error {
	if err := ch.c.vhost.Unbind(ch.actor(), exchangeBinding(m.Destination, m.Source, m.RoutingKey, m.Arguments)); err != nil {
		return err
	}
	return ch.reply(m.NoWait, &amqp.ExchangeUnbindOk{})
}

func exchangeBinding(dst, src, key string, args amqp.Table) Binding {
	return Binding{Source: src, Dest: binding.Destination{Kind: binding.Exchange, Name: dst}, Key: key, Args: cloneArgs(args)}
}

func cloneArgs(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	return maps.Clone(map[string]any(t))
}

// reply sends m unless the client asked for no-wait.
func (ch *channel) reply(noWait bool, m amqp.Method) error {
	if noWait {
		return nil
	}
	return ch.c.out.sendMethod(ch.id, m)
}
