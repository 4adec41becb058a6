package server

import (
	"errors"
	"maps"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
)

func notFoundExchange(name, vhost string) *amqp.Error {
	return amqp.Errorf(amqp.NotFound, 0, 0, "no exchange '%s' in vhost '%s'", name, vhost)
}

func defaultExchangeRefused() *amqp.Error {
	return amqp.Errorf(amqp.AccessRefused, 0, 0, "operation not permitted on the default exchange")
}

func (ch *channel) exchangeDeclare(m *amqp.ExchangeDeclare) error {
	v := ch.c.vhost
	if m.Exchange == "" {
		return defaultExchangeRefused()
	}
	if m.Passive {
		v.mu.RLock()
		e := v.exchanges[m.Exchange]
		v.mu.RUnlock()
		if e == nil {
			return notFoundExchange(m.Exchange, v.name)
		}
		return ch.reply(m.NoWait, &amqp.ExchangeDeclareOk{})
	}
	kind, ok := exchange.ParseKind(m.Type)
	if !ok {
		return amqp.Errorf(amqp.CommandInvalid, 0, 0, "%s", exchange.UnknownKindText(m.Type))
	}
	if err := ch.check(auth.Configure, "exchange", m.Exchange); err != nil {
		return err
	}
	d := exchange.Decl{
		Name: m.Exchange, Kind: kind, Durable: m.Durable, AutoDelete: m.AutoDelete,
		Internal: m.Internal, Args: cloneArgs(m.Arguments),
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.exchanges[m.Exchange]; e != nil {
		var ie *exchange.InequivalentError
		if err := e.CheckEquivalent(d); errors.As(err, &ie) {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%s", ie.ReplyText(v.name))
		}
	} else {
		// Only new exchanges are refused the reserved prefix: an equivalent
		// re-declaration of amq.direct succeeds, as in RabbitMQ.
		if strings.HasPrefix(m.Exchange, "amq.") {
			return amqp.Errorf(amqp.AccessRefused, 0, 0,
				"exchange name '%s' contains reserved prefix 'amq.*'", m.Exchange)
		}
		var ate *exchange.ArgTypeError
		if err := exchange.ValidateArgs(d.Args); errors.As(err, &ate) {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%s", ate.ReplyText(m.Exchange, v.name))
		}
		if ae, ok := d.Args["alternate-exchange"].(string); ok {
			// Naming an alternate exchange: read on this one, write on it.
			if err := ch.check(auth.Read, "exchange", m.Exchange); err != nil {
				return err
			}
			if err := ch.check(auth.Write, "exchange", ae); err != nil {
				return err
			}
		}
		e := v.addExchange(d)
		if err := v.storeExchange(e); err != nil {
			delete(v.exchanges, e.Name)
			return amqp.Errorf(amqp.InternalError, 0, 0, "cannot store exchange: %v", err)
		}
	}
	return ch.reply(m.NoWait, &amqp.ExchangeDeclareOk{})
}

func (ch *channel) exchangeDelete(m *amqp.ExchangeDelete) error {
	v := ch.c.vhost
	if m.Exchange == "" {
		return defaultExchangeRefused()
	}
	if strings.HasPrefix(m.Exchange, "amq.") {
		return amqp.Errorf(amqp.AccessRefused, 0, 0,
			"deletion of system exchange '%s' in vhost '%s' not allowed", m.Exchange, v.name)
	}
	if err := ch.check(auth.Configure, "exchange", m.Exchange); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[m.Exchange]
	if e == nil {
		// RabbitMQ answers delete-ok for a missing exchange.
		return ch.reply(m.NoWait, &amqp.ExchangeDeleteOk{})
	}
	if m.IfUnused && e.HasBindings() {
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "exchange '%s' in vhost '%s' in use", m.Exchange, v.name)
	}
	v.removeExchange(e)
	return ch.reply(m.NoWait, &amqp.ExchangeDeleteOk{})
}

func (ch *channel) exchangeBind(m *amqp.ExchangeBind) error {
	return ch.bindExchanges(m.Destination, m.Source, m.RoutingKey, m.Arguments, true, m.NoWait)
}

func (ch *channel) exchangeUnbind(m *amqp.ExchangeUnbind) error {
	return ch.bindExchanges(m.Destination, m.Source, m.RoutingKey, m.Arguments, false, m.NoWait)
}

func (ch *channel) bindExchanges(dst, src, key string, args amqp.Table, bind, noWait bool) error {
	if err := ch.check(auth.Write, "exchange", dst); err != nil {
		return err
	}
	if dst == "" || src == "" {
		return defaultExchangeRefused()
	}
	if err := ch.checkBindSource(src, key); err != nil {
		return err
	}
	b := binding.Binding{Dest: binding.Destination{Kind: binding.Exchange, Name: dst}, Key: key, Args: cloneArgs(args)}
	if !bind {
		if err := ch.c.vhost.unbind(src, b, ch.c.id); err != nil {
			return err
		}
		return ch.reply(noWait, &amqp.ExchangeUnbindOk{})
	}
	if err := ch.c.vhost.changeBinding(src, b, bind); err != nil {
		return err
	}
	return ch.reply(noWait, &amqp.ExchangeBindOk{})
}

func cloneArgs(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	return maps.Clone(map[string]any(t))
}

// changeBinding adds or removes b on exchange src after checking that both
// ends exist.
func (v *vhost) changeBinding(src string, b binding.Binding, bind bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[src]
	if e == nil {
		return notFoundExchange(src, v.name)
	}
	switch b.Dest.Kind {
	case binding.Exchange:
		if v.exchanges[b.Dest.Name] == nil {
			return notFoundExchange(b.Dest.Name, v.name)
		}
	case binding.Queue:
		if v.queues[b.Dest.Name] == nil {
			return notFoundQueue(b.Dest.Name, v.name)
		}
	}
	durable := v.bindingDurable(src, b.Dest)
	if bind {
		added, err := e.Bind(b)
		if err != nil {
			return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%v", err)
		}
		if added && durable {
			if err := v.store.SaveBinding(bindingRecord(v.name, src, b)); err != nil {
				e.Unbind(b)
				return amqp.Errorf(amqp.InternalError, 0, 0, "cannot store binding: %v", err)
			}
		}
		return nil
	}
	if e.Unbind(b) {
		if durable {
			v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, src, b)))
		}
		v.maybeAutoDeleteExchange(e)
	}
	return nil
}

// unbind removes b from exchange src for connection owner. As in RabbitMQ,
// it is idempotent: a binding that does not exist, or whose source or
// destination does not, is already removed. Only removing an existing
// binding of another connection's exclusive queue is refused (405).
func (v *vhost) unbind(src string, b binding.Binding, owner uint64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[src]
	if e == nil {
		return nil
	}
	if b.Dest.Kind == binding.Queue {
		q := v.queues[b.Dest.Name]
		if q == nil {
			return nil
		}
		if d := q.Decl(); d.Exclusive && d.Owner != owner {
			for _, have := range e.Bindings() {
				if have.Dest == b.Dest && have.Key == b.Key && binding.ArgsEqual(have.Args, b.Args) {
					return lockedQueue(b.Dest.Name, v.name)
				}
			}
			return nil
		}
	} else if v.exchanges[b.Dest.Name] == nil {
		return nil
	}
	if e.Unbind(b) {
		if v.bindingDurable(src, b.Dest) {
			v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, src, b)))
		}
		v.maybeAutoDeleteExchange(e)
	}
	return nil
}

// checkBindSource is the source side of a binding's permission checks:
// read on the exchange, and the topic permission for the key.
func (ch *channel) checkBindSource(src, key string) error {
	if err := ch.check(auth.Read, "exchange", src); err != nil {
		return err
	}
	v := ch.c.vhost
	v.mu.RLock()
	e := v.exchanges[src]
	v.mu.RUnlock()
	return ch.checkTopic(e, auth.Read, key)
}

// reply sends m unless the client asked for no-wait.
func (ch *channel) reply(noWait bool, m amqp.Method) error {
	if noWait {
		return nil
	}
	return ch.c.out.sendMethod(ch.id, m)
}
