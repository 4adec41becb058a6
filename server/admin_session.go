package server

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/queue"
)

// AdminSession: the admin API's actions on one vhost as one user, for the
// management API. Each is one call of the vhost's domain API (domain.go),
// with that user's permission checks, so validation, reply texts and
// store writes are exactly those of the AMQP methods; errors come back as
// *amqp.Error, mapped by replyError. The names, keys and arguments an
// action takes go through the AMQP codec first (asSent), so that they are
// refused, and arguments typed, exactly as from an AMQP client.

// AdminSession acts on one vhost as one user. It holds no connection:
// Close is a no-op kept for the callers' symmetry. It is not safe for
// concurrent use.
type AdminSession struct {
	v     *vhost
	actor Actor
	src   traceSource // how the firehose names its publishes and gets
	// published counts the session's publishes, as delivery tags do.
	published uint64
}

// OpenAdmin opens an admin session as user (who must be configured and
// may access vhost) on vhost. The caller authenticated the user.
func (s *Server) OpenAdmin(user, vhost string) (*AdminSession, error) {
	if _, ok := s.auth.User(user); !ok {
		return nil, replyError(&AccessError{Reason: NoUser, User: user})
	}
	a, err := s.openAdmin(Actor{User: user}, vhost)
	if err != nil {
		return nil, err
	}
	if !s.auth.CanAccessVHost(user, vhost) {
		return nil, amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"access to vhost '%s' refused for user '%s'", vhost, user)
	}
	return a, nil
}

func (s *Server) openAdmin(a Actor, vhost string) (*AdminSession, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return nil, err
	}
	return &AdminSession{v: v, actor: a, src: traceSource{"management/" + a.User + " -> warren", a.User, 1}}, nil
}

// Close ends the session.
func (a *AdminSession) Close() error { return nil }

// adminError is replyError for the admin API: nil stays nil.
func adminError(err error) error {
	if err == nil {
		return nil
	}
	return replyError(err)
}

// asSent returns m as the broker receives it from an AMQP client: encoded
// (a name or key over 255 bytes fails with amqp.ErrStringTooLong),
// decoded (so arguments have the wire's types: nested tables are
// amqp.Table) and its short strings checked for UTF-8 as the connection
// checks them.
func asSent[M amqp.Method](m M) (M, error) {
	var zero M
	buf, err := amqp.AppendMethodFrame(nil, 1, m)
	if err != nil {
		return zero, err
	}
	got, err := amqp.DecodeMethod(buf[amqp.FrameHeaderSize : len(buf)-1])
	if err != nil {
		return zero, adminError(err)
	}
	if !amqp.ShortstrsValid(got) {
		return zero, amqp.Errorf(amqp.FrameError, 0, 0, "Malformed UTF-8 in shortstr")
	}
	return got.(M), nil
}

// QueueDecl is a queue declaration from the admin API (never exclusive).
type QueueDecl struct {
	Name       string
	Durable    bool
	AutoDelete bool
	Args       map[string]any
}

// DeclareQueue declares a queue as queue.declare does: RabbitMQ's argument
// checks and equivalence rules apply, and a durable queue is stored.
func (a *AdminSession) DeclareQueue(d QueueDecl) error {
	m, err := asSent(&amqp.QueueDeclare{Queue: d.Name, Durable: d.Durable, AutoDelete: d.AutoDelete, Arguments: amqp.Table(d.Args)})
	if err != nil {
		return err
	}
	_, err = a.v.DeclareQueue(a.actor, QueueDeclare{
		Name: m.Queue, Durable: m.Durable, AutoDelete: m.AutoDelete, Args: cloneArgs(m.Arguments),
	})
	return adminError(err)
}

// ExchangeDecl is an exchange declaration from the admin API.
type ExchangeDecl struct {
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
}

// DeclareExchange declares an exchange as exchange.declare does.
func (a *AdminSession) DeclareExchange(d ExchangeDecl) error {
	m, err := asSent(&amqp.ExchangeDeclare{
		Exchange: d.Name, Type: d.Type, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal,
		Arguments: amqp.Table(d.Args),
	})
	if err != nil {
		return err
	}
	return adminError(a.v.DeclareExchange(a.actor, ExchangeDeclare{
		Name: m.Exchange, Type: m.Type, Durable: m.Durable, AutoDelete: m.AutoDelete, Internal: m.Internal,
		Args: cloneArgs(m.Arguments),
	}))
}

// DeleteExchange deletes an exchange as exchange.delete does; unlike AMQP,
// a missing exchange is a 404 error, before any other check.
func (a *AdminSession) DeleteExchange(name string, ifUnused bool) error {
	if a.v.lookupExchange(name) == nil {
		return notFoundExchange(name, a.v.name)
	}
	m, err := asSent(&amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused})
	if err != nil {
		return err
	}
	return adminError(a.v.DeleteExchange(a.actor, ExchangeDelete{Name: m.Exchange, IfUnused: m.IfUnused}))
}

// Bind adds a binding as queue.bind or exchange.bind does.
func (a *AdminSession) Bind(b BindingInfo) error {
	d, err := a.binding(b)
	if err != nil {
		return err
	}
	return adminError(a.v.Bind(a.actor, d))
}

// Unbind removes a binding as queue.unbind or exchange.unbind does (a
// missing binding is not an error, as in AMQP).
func (a *AdminSession) Unbind(b BindingInfo) error {
	d, err := a.binding(b)
	if err != nil {
		return err
	}
	return adminError(a.v.Unbind(a.actor, d))
}

// binding is the domain's form of b, after the codec's checks.
func (a *AdminSession) binding(b BindingInfo) (Binding, error) {
	if b.DestinationType == "exchange" {
		m, err := asSent(&amqp.ExchangeBind{Destination: b.Destination, Source: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
		if err != nil {
			return Binding{}, err
		}
		return exchangeBinding(m.Destination, m.Source, m.RoutingKey, m.Arguments), nil
	}
	m, err := asSent(&amqp.QueueBind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	if err != nil {
		return Binding{}, err
	}
	return Binding{
		Source: m.Exchange, Dest: binding.Destination{Kind: binding.Queue, Name: m.Queue}, Key: m.RoutingKey,
		Args: cloneArgs(m.Arguments),
	}, nil
}

// Publish publishes one message, mandatory and confirmed, through the
// publish pipeline of basic.publish, and reports whether any queue took
// it. It returns once the broker would confirm it (after the fsync for a
// persistent message in a durable queue); a nack is an error.
func (a *AdminSession) Publish(exchange, key string, props amqp.Properties, body []byte) (routed bool, err error) {
	raw, err := props.Append(nil)
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "bad properties: %v", err)
	}
	m, err := asSent(&amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: true})
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%v", err)
	}
	confirmed := make(chan error, 1)
	res, err := a.v.Publish(a.actor, a.src, Publish{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Mandatory: true, Props: raw, Body: body},
		func(err error) { confirmed <- err })
	if err != nil {
		return false, adminError(err)
	}
	a.v.stats.confirmed(a.actor.Conn)
	a.published++
	timer := time.NewTimer(adminTimeout)
	defer timer.Stop()
	select {
	case err = <-confirmed:
	case <-timer.C:
		return false, fmt.Errorf("admin publish: not confirmed within %v", adminTimeout)
	}
	if err != nil || res.Dropped {
		return false, amqp.Errorf(amqp.InternalError, 0, 0, "message %d nacked by the broker", a.published)
	}
	return res.Routed, nil
}

// AckMode says what Get does with the messages it took, by RabbitMQ's
// names.
type AckMode string

// Ack modes of Get.
const (
	AckRequeueTrue     AckMode = "ack_requeue_true"     // return them, marked redelivered
	AckRequeueFalse    AckMode = "ack_requeue_false"    // acknowledge them
	RejectRequeueTrue  AckMode = "reject_requeue_true"  // reject with requeue
	RejectRequeueFalse AckMode = "reject_requeue_false" // reject: dead-letter or drop
)

// ParseAckMode checks a RabbitMQ ackmode name.
func ParseAckMode(s string) (AckMode, bool) {
	switch m := AckMode(s); m {
	case AckRequeueTrue, AckRequeueFalse, RejectRequeueTrue, RejectRequeueFalse:
		return m, true
	}
	return "", false
}

// settleOp is how mode settles the messages Get took.
func (mode AckMode) settleOp() queue.SettleOp {
	switch mode {
	case AckRequeueFalse:
		return queue.Ack
	case RejectRequeueFalse:
		return queue.Reject
	}
	return queue.Requeue
}

// GotMessage is one message taken by Get. Props and Body are shared with
// the broker: read-only.
type GotMessage struct {
	Exchange     string
	RoutingKey   string
	Redelivered  bool
	MessageCount int // messages left ready after this one was taken
	Props        []byte
	Body         []byte
}

// adminGetMaxBytes bounds the message bytes one Get holds: it takes no
// more messages once they reach it (at least one is always taken).
const adminGetMaxBytes = 64 << 20

// Get takes up to count messages from queue as basic.get does, then
// settles them all by mode, as RabbitMQ's management "get messages" does.
// It stops early once it holds adminGetMaxBytes of messages.
func (a *AdminSession) Get(queueName string, count int, mode AckMode) ([]GotMessage, error) {
	m, err := asSent(&amqp.BasicGet{Queue: queueName})
	if err != nil {
		return nil, err
	}
	q, g, err := a.v.Getter(a.actor, m.Queue)
	if err != nil {
		return nil, adminError(err)
	}
	var out []GotMessage
	var taken []queue.Entry
	var held int64
	for range count {
		if held >= adminGetMaxBytes {
			// Bounded work per request: the rest stay in the queue, as
			// when it runs empty.
			break
		}
		e, remaining, ok := g.Get(false)
		if !ok {
			break
		}
		a.v.traceDeliver(a.src, q, e)
		taken = append(taken, e)
		props := q.DeliveryProps(e)
		held += int64(len(e.Msg.Body) + len(props))
		out = append(out, GotMessage{
			Exchange: e.Msg.Exchange, RoutingKey: e.Msg.RoutingKey, Redelivered: e.Redelivered,
			MessageCount: remaining, Props: props, Body: e.Msg.Body,
		})
	}
	if len(taken) > 0 {
		q.Settle(taken, mode.settleOp())
	}
	return out, nil
}
