package server

import (
	"fmt"
	"sync"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/queue"
)

// The firehose, as RabbitMQ's: while tracing is on in a vhost, every
// message published in it is copied to the amq.rabbitmq.trace topic
// exchange with routing key "publish.<exchange>", and every delivery (to a
// consumer or by basic.get) with "deliver.<queue>". The copy keeps the
// body; its headers describe the original (exchange_name, routing_keys,
// properties, node, vhost, connection, channel, user, and routed_queues
// or redelivered). Messages of the trace exchange itself are not traced.
//
// Deliveries are reported with a queue's and a channel's locks held, so
// the copies are routed later, in order, by the vhost's tracer goroutine;
// it runs only while tracing is on.

// traceExchange is the firehose exchange every vhost has.
const traceExchange = "amq.rabbitmq.trace"

// traceMaxPending bounds the copies waiting for the tracer; beyond it new
// ones are dropped (and counted in the log), so that a firehose left on
// under load cannot take the broker's memory.
const traceMaxPending = 1 << 16

// traceEvent is one publish or delivery to copy.
type traceEvent struct {
	deliver     bool
	exchange    string
	keys        []string
	props       []byte
	body        []byte
	connName    string
	user        string
	channel     uint16
	routed      []string // publish: the queues it went to
	queue       string   // deliver
	redelivered bool
}

// tracer is a vhost's firehose state. on is read on every publish and
// delivery; the rest is guarded by mu.
type tracer struct {
	mu      sync.Mutex
	pending []traceEvent
	dropped int
	wake    chan struct{} // capacity 1
	stop    chan struct{} // closed to end the goroutine; nil when off
	done    chan struct{} // closed when the goroutine ended
}

// tracing reports whether the firehose is on in v.
func (v *vhost) tracingOn() bool { return v.tracing.Load() }

// setTracing turns the firehose on or off. Turning it off waits for the
// copies already taken to be routed.
func (v *vhost) setTracing(on bool) {
	t := &v.tr
	t.mu.Lock()
	if on == (t.stop != nil) {
		t.mu.Unlock()
		return
	}
	if on {
		t.wake = make(chan struct{}, 1)
		t.stop = make(chan struct{})
		t.done = make(chan struct{})
		v.tracing.Store(true)
		go v.traceLoop(t.wake, t.stop, t.done)
		t.mu.Unlock()
		v.log.Info().Str("vhost", v.name).Msg("tracing enabled")
		return
	}
	v.tracing.Store(false)
	stop, done := t.stop, t.done
	t.stop = nil
	t.mu.Unlock()
	close(stop)
	<-done
	v.log.Info().Str("vhost", v.name).Msg("tracing disabled")
}

// traceAdd queues e for the tracer, if tracing is on. The properties and
// body are copied: the copy is routed after the original may be gone.
func (v *vhost) traceAdd(e traceEvent) {
	t := &v.tr
	t.mu.Lock()
	if t.stop == nil {
		t.mu.Unlock()
		return
	}
	if len(t.pending) >= traceMaxPending {
		t.dropped++
		t.mu.Unlock()
		return
	}
	e.props = append([]byte(nil), e.props...)
	e.body = append([]byte(nil), e.body...)
	t.pending = append(t.pending, e)
	wake := t.wake
	t.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// traceLoop routes queued copies until stop is closed, then routes what is
// left and closes done.
func (v *vhost) traceLoop(wake, stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-wake:
		case <-stop:
			v.traceFlush()
			return
		}
		v.traceFlush()
	}
}

func (v *vhost) traceFlush() {
	t := &v.tr
	for {
		t.mu.Lock()
		batch, dropped := t.pending, t.dropped
		t.pending, t.dropped = nil, 0
		t.mu.Unlock()
		if dropped > 0 {
			v.log.Warn().Str("vhost", v.name).Int("dropped", dropped).Msg("tracer behind: trace copies dropped")
		}
		if len(batch) == 0 {
			return
		}
		for i := range batch {
			v.traceRoute(&batch[i])
		}
	}
}

// traceRoute publishes the copy of e to the trace exchange.
func (v *vhost) traceRoute(e *traceEvent) {
	key := "publish." + e.exchange
	if e.deliver {
		key = "deliver." + e.queue
	}
	keys := make([]any, len(e.keys))
	for i, k := range e.keys {
		keys[i] = k
	}
	h := amqp.Table{
		"exchange_name": e.exchange,
		"routing_keys":  keys,
		"properties":    tracedProperties(e.props),
		"node":          v.srv.NodeName(),
		"vhost":         v.name,
		"connection":    e.connName,
		"channel":       int32(e.channel),
		"user":          e.user,
	}
	if e.deliver {
		var re int32
		if e.redelivered {
			re = 1
		}
		h["redelivered"] = re
	} else {
		routed := make([]any, len(e.routed))
		for i, q := range e.routed {
			routed[i] = q
		}
		h["routed_queues"] = routed
	}
	p := amqp.Properties{Headers: h}
	props, err := p.Append(nil)
	if err != nil {
		v.log.Warn().Err(err).Msg("cannot encode a trace copy")
		return
	}
	msg := &queue.Message{Exchange: traceExchange, RoutingKey: key, Props: props, Body: e.body}
	s := v.routeMessage(traceExchange, key, props)
	defer v.releaseScratch(s)
	if len(s.queues) > 0 {
		v.deliver(msg, s.queues, nil, nil)
	}
}

// tracedProperties is the properties table of a trace copy: each property
// present in raw under RabbitMQ's name.
func tracedProperties(raw []byte) amqp.Table {
	t := amqp.Table{}
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return t
	}
	set := func(flag uint16, name string, v any) {
		if p.Flags&flag != 0 {
			t[name] = v
		}
	}
	set(amqp.FlagContentType, "content_type", p.ContentType)
	set(amqp.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	set(amqp.FlagHeaders, "headers", p.Headers)
	set(amqp.FlagDeliveryMode, "delivery_mode", int32(p.DeliveryMode))
	set(amqp.FlagPriority, "priority", int32(p.Priority))
	set(amqp.FlagCorrelationID, "correlation_id", p.CorrelationID)
	set(amqp.FlagReplyTo, "reply_to", p.ReplyTo)
	set(amqp.FlagExpiration, "expiration", p.Expiration)
	set(amqp.FlagMessageID, "message_id", p.MessageID)
	set(amqp.FlagTimestamp, "timestamp", p.Timestamp)
	set(amqp.FlagType, "type", p.Type)
	set(amqp.FlagUserID, "user_id", p.UserID)
	set(amqp.FlagAppID, "app_id", p.AppID)
	set(amqp.FlagClusterID, "cluster_id", p.ClusterID)
	return t
}

// connName is the connection's name as RabbitMQ shows it: "peer -> local".
func (c *conn) connName() string {
	return fmt.Sprintf("%s -> %s", c.nc.RemoteAddr(), c.nc.LocalAddr())
}

// tracePublish copies a publish on ch that went to queues.
func (ch *channel) tracePublish(p *publishing, queues []queue.Queue) {
	if ch.c.vhost.tracingOn() {
		ch.c.vhost.tracePublish(traceSource{ch.c.connName(), ch.c.user, ch.id}, p, queues)
	}
}

// traceDeliver copies a delivery of e from q on ch (not a direct reply-to
// one, as RabbitMQ). It may run with q's and ch's locks held.
func (ch *channel) traceDeliver(q queue.Queue, e queue.Entry) {
	if ch.c.vhost.tracingOn() {
		ch.c.vhost.traceDeliver(traceSource{ch.c.connName(), ch.c.user, ch.id}, q, e)
	}
}

// traceSource names where a traced publish or delivery happened.
type traceSource struct {
	connName string
	user     string
	channel  uint16
}

// tracePublish copies a publish from src that went to queues.
func (v *vhost) tracePublish(src traceSource, p *publishing, queues []queue.Queue) {
	if !v.tracingOn() || p.method.Exchange == traceExchange {
		return
	}
	routed := make([]string, len(queues))
	for i, q := range queues {
		routed[i] = q.Decl().Name
	}
	v.traceAdd(traceEvent{
		exchange: p.method.Exchange, keys: append([]string{p.method.RoutingKey}, p.cc...),
		props: p.props, body: p.body, connName: src.connName, user: src.user, channel: src.channel, routed: routed,
	})
}

// traceDeliver copies a delivery of e from q to src (not a direct reply-to
// one, as RabbitMQ). It may run with q's lock held.
func (v *vhost) traceDeliver(src traceSource, q queue.Queue, e queue.Entry) {
	if !v.tracingOn() || e.Msg.Exchange == traceExchange || q.Type() == v.srv.replies {
		return
	}
	v.traceAdd(traceEvent{
		deliver: true, exchange: e.Msg.Exchange, keys: []string{e.Msg.RoutingKey},
		props: e.Msg.Props, body: e.Msg.Body, connName: src.connName, user: src.user, channel: src.channel,
		queue: q.Decl().Name, redelivered: e.Redelivered,
	})
}

// SetTracing turns the firehose on or off in vhost, as rabbitmqctl
// trace_on and trace_off do.
func (s *Server) SetTracing(vhost string, on bool) error {
	v := s.vhost(vhost)
	if v == nil {
		return auth.ErrNoVHost
	}
	v.setTracing(on)
	return nil
}

// Tracing reports whether the firehose is on in vhost.
func (s *Server) Tracing(vhost string) bool {
	v := s.vhost(vhost)
	return v != nil && v.tracingOn()
}
