package server

import (
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/replyto"
)

// The domain API's publish (see domain.go): basic.publish's checks, then
// the pipeline of publish.go (route, deliver to the queues' types, confirm
// when they let it go). The management API publishes through it; the
// channel's own publish (basic_methods.go) runs the same steps with its
// transaction, confirm and basic.return around them.

// Publish is one message to publish, as basic.publish and its content
// carry it.
type Publish struct {
	Exchange   string
	RoutingKey string
	Mandatory  bool
	Props      []byte // the raw content properties; kept by the message
	Body       []byte // kept by the message
}

// Published is what became of a publish.
type Published struct {
	// Routed: a queue took the message. An unroutable mandatory publish is
	// the caller's to return.
	Routed bool
	// Dropped: a queue refused it for its length limit, which makes the
	// confirm a nack.
	Dropped bool
}

// Publish checks p as basic.publish is checked, routes it (direct
// reply-to, CC and BCC included), traces it and hands it to its queues.
// done is called once every queue type lets the confirm go (the store
// write is durable; at once when nothing is stored), with the error that
// makes it a nack; it may run before Publish returns, and does not run
// when Publish returns an error. src names the publisher in the firehose.
//
// A reply-to naming direct reply-to is refused: only a channel consuming
// replies may send one, and it rewrites the property before.
func (v *vhost) Publish(a Actor, src traceSource, p Publish, done func(error)) (Published, error) {
	if limit := v.srv.maxMessageSize.Load(); uint64(len(p.Body)) > limit {
		return Published{}, &PreconditionError{Reason: TooLarge, Got: len(p.Body), Limit: int64(limit)}
	}
	if err := v.check(a, auth.Write, "exchange", p.Exchange); err != nil {
		return Published{}, err
	}
	e := v.lookupExchange(p.Exchange)
	if e == nil {
		return Published{}, &NotFoundError{Kind: "exchange", Name: p.Exchange, VHost: v.name}
	}
	if e.Internal {
		return Published{}, &AccessError{Reason: InternalExchange, Name: p.Exchange, VHost: v.name}
	}
	if err := v.checkTopic(a, e, auth.Write, p.RoutingKey); err != nil {
		return Published{}, err
	}
	pub := &publishing{
		method: &amqp.BasicPublish{Exchange: p.Exchange, RoutingKey: p.RoutingKey, Mandatory: p.Mandatory},
		body:   p.Body, bodySize: uint64(len(p.Body)), received: uint64(len(p.Body)), gotHdr: true,
	}
	pub.setProps(p.Props)
	// No reply consumer here: a reply-to naming direct reply-to is refused.
	if err := checkContent(a.User, pub, nil); err != nil {
		return Published{}, err
	}
	msg := newMessage(pub)
	if p.Exchange == "" {
		if rq, ok := v.srv.replies.Lookup(p.RoutingKey); ok {
			// As a channel's: a reply taken at once is neither routed
			// nor traced; one its consumer cannot take is unroutable.
			if routed, _ := v.deliver(msg, []queue.Queue{rq}, nil, nil); routed {
				done(nil)
				return Published{Routed: true}, nil
			}
		}
	}
	s := v.routePublish(p.Exchange, p.RoutingKey, pub.cc, pub.headerTable)
	defer v.releaseScratch(s)
	if err := checkQueues(msg, s.queues); err != nil {
		return Published{}, err
	}
	v.tracePublish(src, pub, s.queues)
	routed, dropped := v.deliver(msg, s.queues, done, nil)
	v.stats.routed(a.Conn, routed, p.Mandatory)
	return Published{Routed: routed, Dropped: dropped}, nil
}

// checkContent checks a publish's properties as basic.publish does, in
// RabbitMQ's order (user-id against the publisher's user, reply-to,
// expiration, delivery-mode, CC and BCC), and fills in its TTL and
// sender-selected keys. A reply-to naming direct reply-to is rewritten to
// reply's name; with no reply pseudo-queue it is refused.
func checkContent(user string, p *publishing, reply *replyto.Queue) error {
	if uid, ok := p.idx.UserID(p.props); ok && string(uid) != user {
		return &PreconditionError{Reason: UserIDMismatch, Got: string(uid), Have: user}
	}
	if err := rewriteReplyTo(p, reply); err != nil {
		return err
	}
	if b, ok := p.idx.Expiration(p.props); ok {
		exp := string(b)
		if p.ttl, p.hasTTL = queue.ParseExpiration(exp); !p.hasTTL {
			return &PreconditionError{Reason: BadExpiration, Arg: exp}
		}
	}
	if dm := p.idx.DeliveryMode; p.idx.Has(amqp.FlagDeliveryMode) && dm != 1 && dm != 2 {
		return &PreconditionError{Reason: BadDeliveryMode, Got: dm}
	}
	return p.senderSelected()
}
