package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// AdminSession: the admin API's actions that run as AMQP methods, over an
// internal connection to this broker (net.Pipe), so that they get exactly
// the validation, reply texts and store writes of any client.

// adminAddr names the ends of an admin session's pipe.
type adminAddr string

func (a adminAddr) Network() string { return "pipe" }
func (a adminAddr) String() string  { return string(a) }

// adminPipe is the broker's end of an admin session; its type marks the
// connection as internal.
type adminPipe struct {
	net.Conn
	peer   adminAddr
	user   string // who the caller authenticated
	system bool   // the broker itself: no permission checks
}

func (p *adminPipe) RemoteAddr() net.Addr { return p.peer }
func (p *adminPipe) LocalAddr() net.Addr  { return adminAddr("warren") }

// AdminSession is an internal AMQP connection to this broker, logged in as
// a configured user on one vhost, through which the admin API runs actions
// whose logic lives in channel methods. It is not safe for concurrent use;
// Close it when done.
type AdminSession struct {
	srv      *Server
	nc       net.Conn
	fr       *amqp.FrameReader
	frameMax uint32
	vhost    string
	ch       uint16 // open channel, 0 when none
	lastCh   uint16
	confirm  bool // the open channel is in confirm mode
	dead     error
	buf      []byte
}

// OpenAdmin opens an admin session as user (who must be configured) on
// vhost.
func (s *Server) OpenAdmin(user, vhost string) (*AdminSession, error) {
	// The caller authenticated the user; the pipe vouches for it, so the
	// handshake carries no password.
	if _, ok := s.auth.User(user); !ok {
		return nil, amqp.Errorf(amqp.AccessRefused, 0, 0, "no user '%s'", user)
	}
	return s.openAdmin(user, vhost, false)
}

// openAdmin starts the internal connection of an admin session. A system
// session is not subject to permissions.
func (s *Server) openAdmin(user, vhost string, system bool) (*AdminSession, error) {
	pass := ""
	if _, err := s.adminVHost(vhost); err != nil {
		return nil, err
	}
	client, srv := net.Pipe()
	s.startConn(&adminPipe{Conn: srv, peer: adminAddr("management/" + user), user: user, system: system})
	a := &AdminSession{srv: s, nc: client, fr: amqp.NewFrameReader(client, 64<<10), vhost: vhost}
	if err := a.handshake(user, pass, vhost); err != nil {
		client.Close()
		return nil, err
	}
	return a, nil
}

// Close closes the session's connection; unsettled messages it got return
// to their queues.
func (a *AdminSession) Close() error {
	if a.dead == nil {
		a.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if a.send(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "OK"}) == nil {
			for {
				m, ch, err := a.readMethod()
				if err != nil {
					break
				}
				if _, ok := m.(*amqp.ConnectionCloseOk); ok && ch == 0 {
					break
				}
			}
		}
		a.dead = net.ErrClosed
	}
	return a.nc.Close()
}

func (a *AdminSession) handshake(user, pass, vhost string) error {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	if _, err := a.nc.Write(amqp.ProtocolHeader); err != nil {
		return fmt.Errorf("admin session: %w", err)
	}
	if _, err := expectAdmin[*amqp.ConnectionStart](a); err != nil {
		return err
	}
	err := a.send(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{
			"product":         "Warren management",
			"connection_name": "management",
			"capabilities":    amqp.Table{"consumer_cancel_notify": true, "authentication_failure_close": true},
		},
		Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + pass, Locale: "en_US",
	})
	if err != nil {
		return err
	}
	tune, err := expectAdmin[*amqp.ConnectionTune](a)
	if err != nil {
		return err
	}
	a.frameMax = tune.FrameMax
	a.fr.SetMaxFrameSize(tune.FrameMax + amqp.FrameOverhead)
	if err := a.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax}); err != nil {
		return err
	}
	if err := a.send(0, &amqp.ConnectionOpen{VirtualHost: vhost}); err != nil {
		return err
	}
	_, err = expectAdmin[*amqp.ConnectionOpenOk](a)
	return err
}

// expectAdmin reads the next method on channel 0, which must be an M; a
// connection.close becomes its *amqp.Error.
func expectAdmin[M amqp.Method](a *AdminSession) (M, error) {
	var zero M
	m, _, err := a.readMethod()
	if err != nil {
		return zero, err
	}
	if want, ok := m.(M); ok {
		return want, nil
	}
	if cl, ok := m.(*amqp.ConnectionClose); ok {
		return zero, a.closedBy(0, cl.ReplyCode, cl.ReplyText, cl.ReplyClassID, cl.ReplyMethodID)
	}
	return zero, fmt.Errorf("admin session: unexpected %s", m.Name())
}

// send writes one method frame.
func (a *AdminSession) send(ch uint16, m amqp.Method) error {
	if a.dead != nil {
		return a.dead
	}
	buf, err := amqp.AppendMethodFrame(a.buf[:0], ch, m)
	if err != nil {
		return err
	}
	a.buf = buf
	if _, err := a.nc.Write(buf); err != nil {
		a.dead = err
		return fmt.Errorf("admin session: %w", err)
	}
	return nil
}

// readMethod reads frames up to the next method, skipping heartbeats.
func (a *AdminSession) readMethod() (amqp.Method, uint16, error) {
	if a.dead != nil {
		return nil, 0, a.dead
	}
	for {
		f, err := a.fr.ReadFrame()
		if err != nil {
			a.dead = err
			if errors.Is(err, io.EOF) {
				return nil, 0, fmt.Errorf("admin session: connection closed by the broker")
			}
			return nil, 0, fmt.Errorf("admin session: %w", err)
		}
		switch f.Type {
		case amqp.FrameHeartbeat:
			continue
		case amqp.FrameMethod:
			m, err := amqp.DecodeMethod(f.Payload)
			if err != nil {
				a.dead = err
				return nil, 0, err
			}
			return m, f.Channel, nil
		}
		a.dead = fmt.Errorf("admin session: unexpected frame type %d", f.Type)
		return nil, 0, a.dead
	}
}

// readContent reads the header and body frames that follow a content
// method.
func (a *AdminSession) readContent() (props, body []byte, err error) {
	f, err := a.fr.ReadFrame()
	if err != nil {
		a.dead = err
		return nil, nil, err
	}
	if f.Type != amqp.FrameHeader {
		a.dead = fmt.Errorf("admin session: expected a content header, got frame type %d", f.Type)
		return nil, nil, a.dead
	}
	h, err := amqp.DecodeContentHeader(f.Payload)
	if err != nil {
		a.dead = err
		return nil, nil, err
	}
	props = append([]byte(nil), h.RawProps...)
	body = make([]byte, 0, min(h.BodySize, 64<<20))
	for uint64(len(body)) < h.BodySize {
		f, err := a.fr.ReadFrame()
		if err != nil {
			a.dead = err
			return nil, nil, err
		}
		if f.Type != amqp.FrameBody {
			a.dead = fmt.Errorf("admin session: expected a content body, got frame type %d", f.Type)
			return nil, nil, a.dead
		}
		body = append(body, f.Payload...)
	}
	return props, body, nil
}

// closedBy turns a channel.close or connection.close from the broker into
// an *amqp.Error, answering it with close-ok.
func (a *AdminSession) closedBy(ch, code uint16, text string, classID, methodID uint16) *amqp.Error {
	if ch == 0 {
		a.send(0, &amqp.ConnectionCloseOk{})
		a.dead = net.ErrClosed
	} else {
		a.send(ch, &amqp.ChannelCloseOk{})
		a.ch, a.confirm = 0, false
	}
	text = strings.TrimPrefix(text, amqp.ReplyText(code)+" - ")
	return &amqp.Error{Code: code, Text: text, ClassID: classID, MethodID: methodID}
}

// channel opens a channel if none is open.
func (a *AdminSession) channel() (uint16, error) {
	if a.ch != 0 {
		return a.ch, nil
	}
	a.lastCh++
	if a.lastCh == 0 {
		a.lastCh = 1
	}
	if err := a.send(a.lastCh, &amqp.ChannelOpen{}); err != nil {
		return 0, err
	}
	a.ch = a.lastCh
	if _, err := a.await(); err != nil {
		return 0, err
	}
	return a.ch, nil
}

// await reads up to the next method on the open channel. A channel.close
// or connection.close becomes an *amqp.Error.
func (a *AdminSession) await() (amqp.Method, error) {
	for {
		m, ch, err := a.readMethod()
		if err != nil {
			return nil, err
		}
		switch m := m.(type) {
		case *amqp.ConnectionClose:
			return nil, a.closedBy(0, m.ReplyCode, m.ReplyText, m.ReplyClassID, m.ReplyMethodID)
		case *amqp.ChannelClose:
			if ch == a.ch {
				return nil, a.closedBy(ch, m.ReplyCode, m.ReplyText, m.ReplyClassID, m.ReplyMethodID)
			}
			continue
		}
		if ch == a.ch {
			return m, nil
		}
	}
}

// call sends a synchronous method on the session's channel and returns the
// reply.
func (a *AdminSession) call(m amqp.Method) (amqp.Method, error) {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	ch, err := a.channel()
	if err != nil {
		return nil, err
	}
	if err := a.send(ch, m); err != nil {
		return nil, err
	}
	return a.await()
}

// QueueDecl is a queue declaration from the admin API.
type QueueDecl struct {
	Name       string
	Durable    bool
	AutoDelete bool
	Args       map[string]any
}

// DeclareQueue runs queue.declare: RabbitMQ's argument checks and
// equivalence rules apply, and a durable queue is stored.
func (a *AdminSession) DeclareQueue(d QueueDecl) error {
	_, err := a.call(&amqp.QueueDeclare{Queue: d.Name, Durable: d.Durable, AutoDelete: d.AutoDelete, Arguments: amqp.Table(d.Args)})
	return err
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

// DeclareExchange runs exchange.declare.
func (a *AdminSession) DeclareExchange(d ExchangeDecl) error {
	_, err := a.call(&amqp.ExchangeDeclare{
		Exchange: d.Name, Type: d.Type, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal,
		Arguments: amqp.Table(d.Args),
	})
	return err
}

// DeleteExchange runs exchange.delete; unlike AMQP, a missing exchange is a
// 404 error.
func (a *AdminSession) DeleteExchange(name string, ifUnused bool) error {
	if _, err := a.srv.Exchange(a.vhost, name); err != nil {
		return err
	}
	_, err := a.call(&amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused})
	return err
}

// Bind adds a binding with queue.bind or exchange.bind.
func (a *AdminSession) Bind(b BindingInfo) error {
	var err error
	if b.DestinationType == "exchange" {
		_, err = a.call(&amqp.ExchangeBind{Destination: b.Destination, Source: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	} else {
		_, err = a.call(&amqp.QueueBind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	}
	return err
}

// Unbind removes a binding with queue.unbind or exchange.unbind (a missing
// binding is not an error, as in AMQP).
func (a *AdminSession) Unbind(b BindingInfo) error {
	var err error
	if b.DestinationType == "exchange" {
		_, err = a.call(&amqp.ExchangeUnbind{Destination: b.Destination, Source: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	} else {
		_, err = a.call(&amqp.QueueUnbind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	}
	return err
}

// Publish publishes one message, mandatory and confirmed, and reports
// whether any queue took it. It returns once the broker confirmed it
// (after the fsync for a persistent message in a durable queue).
func (a *AdminSession) Publish(exchange, key string, props amqp.Properties, body []byte) (routed bool, err error) {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	raw, err := props.Append(nil)
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "bad properties: %v", err)
	}
	if !a.confirm {
		if _, err := a.call(&amqp.ConfirmSelect{}); err != nil {
			return false, err
		}
		a.confirm = true
	}
	ch := a.ch
	buf, err := amqp.AppendMethodFrame(a.buf[:0], ch, &amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: true})
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%v", err)
	}
	buf = amqp.AppendHeaderFrame(buf, ch, 60, uint64(len(body)), raw)
	buf = amqp.AppendBodyFrames(buf, ch, body, a.frameMax)
	a.buf = buf[:0]
	if _, err := a.nc.Write(buf); err != nil {
		a.dead = err
		return false, fmt.Errorf("admin session: %w", err)
	}
	routed = true
	for {
		m, err := a.await()
		if err != nil {
			return false, err
		}
		switch m := m.(type) {
		case *amqp.BasicReturn:
			if _, _, err := a.readContent(); err != nil {
				return false, err
			}
			routed = false
		case *amqp.BasicAck:
			return routed, nil
		case *amqp.BasicNack:
			return false, amqp.Errorf(amqp.InternalError, 0, 0, "message %d nacked by the broker", m.DeliveryTag)
		}
	}
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

// GotMessage is one message taken by Get.
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

// Get takes up to count messages from queue with basic.get, then settles
// them all by mode, as RabbitMQ's management "get messages" does. It stops
// early once it holds adminGetMaxBytes of messages.
func (a *AdminSession) Get(queueName string, count int, mode AckMode) ([]GotMessage, error) {
	var out []GotMessage
	var last uint64
	var held int64
	for range count {
		if held >= adminGetMaxBytes {
			// Bounded work per request: the rest stay in the queue, as
			// when it runs empty.
			break
		}
		m, err := a.call(&amqp.BasicGet{Queue: queueName})
		if err != nil {
			return nil, err
		}
		ok, isOk := m.(*amqp.BasicGetOk)
		if !isOk {
			break // basic.get-empty
		}
		props, body, err := a.readContent()
		if err != nil {
			return nil, err
		}
		last = ok.DeliveryTag
		held += int64(len(body) + len(props))
		out = append(out, GotMessage{
			Exchange: ok.Exchange, RoutingKey: ok.RoutingKey, Redelivered: ok.Redelivered,
			MessageCount: int(ok.MessageCount), Props: props, Body: body,
		})
	}
	if last == 0 {
		return out, nil
	}
	var settle amqp.Method
	switch mode {
	case AckRequeueFalse:
		settle = &amqp.BasicAck{DeliveryTag: last, Multiple: true}
	case RejectRequeueFalse:
		settle = &amqp.BasicNack{DeliveryTag: last, Multiple: true}
	default:
		settle = &amqp.BasicNack{DeliveryTag: last, Multiple: true, Requeue: true}
	}
	if err := a.send(a.ch, settle); err != nil {
		return nil, err
	}
	// Settlements have no reply; a round trip makes sure this one was
	// handled before the caller goes on.
	if _, err := a.call(&amqp.BasicQos{}); err != nil {
		return nil, err
	}
	return out, nil
}
