package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/queue"
)

// conn is one client connection. The reader goroutine (serve) owns the
// channel table and runs every method handler; the writer goroutine
// (outbox.writeLoop, running while frames wait) owns the socket's write
// side.
type conn struct {
	srv *Server
	id  uint64
	nc  net.Conn
	log zerolog.Logger
	fr  *amqp.FrameReader
	out *outbox
	// fs holds the outboxes this reader delivered to and will write itself
	// (see flushSet); only the reader goroutine touches it.
	fs flushSet

	// Negotiated in the handshake; read-only afterwards.
	user       string
	vhost      *vhost
	frameMax   uint32
	channelMax uint16
	heartbeat  atomic.Int64 // time.Duration; 0 = off
	caps       clientCaps

	// channels is written only by the reader goroutine, under chanMu;
	// other goroutines (the admin API) read it under chanMu.
	channels map[uint16]*channel
	chanMu   sync.Mutex
	// info is what the handshake negotiated, published before open-ok for
	// other goroutines to read.
	info atomic.Pointer[connInfo]
	// unackedCount is the number of unacknowledged deliveries on all
	// channels, capped by Config.MaxUnackedPerConnection.
	unackedCount atomic.Int64
	// closeBegun is set, from whichever goroutine does it, once the
	// connection's close has begun on the broker's side: the broker sent
	// connection.close (sendClose, from the reader or from abort), or it
	// answered the client's. No connection.close goes out after it.
	closeBegun atomic.Bool
	// closing is the reader's own mark that the broker has sent
	// connection.close (see startClosing); every frame but close and
	// close-ok is then discarded. Reader goroutine only.
	closing bool
	// opened is set once open-ok has been sent; before it abort closes
	// the socket without a frame.
	opened atomic.Bool
	// stopped is set once the connection is closing (either side sent
	// connection.close, or it dropped): no channel takes another delivery
	// (one closing channel's requeued messages must not go to its
	// siblings).
	stopped atomic.Bool

	forceOnce sync.Once
	quit      chan struct{} // closed when the broker closes the connection
	// forcedReason is forceClose's reason, written before quit is closed.
	forcedReason string

	consMu    sync.Mutex
	consumers map[*consumer]struct{}
}

// connInfo is a connection's negotiated identity, immutable once stored.
type connInfo struct {
	User        string
	VHost       string
	Mechanism   string
	FrameMax    uint32
	ChannelMax  uint16
	Heartbeat   time.Duration
	Caps        clientCaps
	ClientProps amqp.Table
	ConnectedAt time.Time
}

// removeChannel drops a channel from the table; reader goroutine only.
func (c *conn) removeChannel(id uint16) {
	c.chanMu.Lock()
	delete(c.channels, id)
	c.chanMu.Unlock()
	c.srv.churn.chanClosed.Add(1)
}

type clientCaps struct {
	consumerCancelNotify bool
	connectionBlocked    bool
	authFailureClose     bool
}

func newConn(s *Server, nc net.Conn) *conn {
	id := s.nextID.Add(1)
	return &conn{
		srv:      s,
		id:       id,
		nc:       nc,
		log:      s.log.With().Uint64("conn", id).Str("peer", nc.RemoteAddr().String()).Logger(),
		fr:       amqp.NewFrameReader(nc, 64<<10), // counts every byte read (recv_oct)
		out:      newOutbox(),
		channels: map[uint16]*channel{},
		quit:     make(chan struct{}),
		frameMax: amqp.FrameMinSize,
	}
}

// errClosed ends the reader loop after an orderly close.
var errClosed = errors.New("connection closed")

// serve runs the connection to its end: handshake, frames, cleanup.
//
// The reader goroutine of an idle connection is parked in readLoop for the
// connection's life, and its stack counts in the broker's memory: serve
// keeps its own frame small and runs the handshakes, whose calls go deep
// (TLS, table decoding, authentication, logging), on a goroutine of their
// own (see open), so that the reader's stack need not grow for them.
func (c *conn) serve() {
	defer c.nc.Close()
	c.out.start(c.nc, c.kickConsumers)
	defer c.end()
	if c.open() {
		c.logEnd(c.readLoop())
	}
}

// end runs deferred by serve: a panic closes the connection with 541,
// then the connection is cleaned up and its outbox flushed (bounded).
func (c *conn) end() {
	if r := recover(); r != nil {
		c.panicked(r, debug.Stack())
	}
	c.cleanup()
	c.out.close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.out.flushed:
	case <-t.C:
	}
}

// panicked logs a recovered panic and sends 541 INTERNAL_ERROR.
func (c *conn) panicked(r any, stack []byte) {
	c.log.Error().Interface("panic", r).Bytes("stack", stack).Msg("connection handler panicked")
	c.sendClose(amqp.Errorf(amqp.InternalError, 0, 0, "internal error"))
}

// open runs the TLS and AMQP handshakes on a goroutine of its own and
// waits for it, so that their stack goes back when they are done instead of
// staying with the reader. It reports whether the connection is open.
func (c *conn) open() bool {
	var ok bool
	var rec any
	var stack []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				rec, stack = r, debug.Stack()
			}
		}()
		ok = c.openSync()
	}()
	<-done
	if rec != nil {
		c.panicked(rec, stack)
		return false
	}
	return ok
}

// openSync runs the TLS and AMQP handshakes.
func (c *conn) openSync() bool {
	c.nc.SetDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	if err := c.tlsHandshake(); err != nil {
		return false // logged by tlsHandshake
	}
	if err := c.handshake(); err != nil {
		var ae *amqp.Error
		switch {
		case errors.As(err, &ae):
			c.log.Warn().Uint16("code", ae.Code).Str("reason", ae.ReplyString()).Msg("handshake refused")
		case errors.Is(err, io.EOF):
		default:
			c.log.Debug().Err(err).Msg("handshake failed")
		}
		return false
	}
	c.nc.SetDeadline(time.Time{})
	// In place: the logger's context has room, a new one would be
	// allocated.
	c.log.UpdateContext(func(lc zerolog.Context) zerolog.Context { return lc.Str("user", c.user) })
	c.log.Info().Str("vhost", c.vhost.name).Msg("connection opened")
	c.srv.churn.connOpened.Add(1)
	return true
}

// logEnd logs how the reader loop ended.
func (c *conn) logEnd(err error) {
	switch {
	case c.forced() && (err == nil || errors.Is(err, errClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded)):
		// The broker closed it (shutdown, an operator) and the client
		// answered close-ok, or dropped the socket instead, or the broker
		// cut it when close-ok did not come.
		c.log.Info().Str("reason", c.forcedReason).Msg("connection closed by the broker")
	case err == nil, errors.Is(err, errClosed):
		c.log.Info().Msg("connection closed")
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Info().Msg("connection closed abruptly by client")
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Warn().Msg("missed heartbeats from client, closing connection")
	default:
		c.log.Warn().Err(err).Msg("connection error")
	}
}

// forced reports whether forceClose was called.
func (c *conn) forced() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// forceClose asks the connection to close with 320 CONNECTION_FORCED, from
// any goroutine.
func (c *conn) forceClose(reason string) {
	c.abort(amqp.Errorf(amqp.ConnectionForced, 0, 0, "%s", reason))
}

// abort closes the connection with e, from any goroutine: the broker sends
// connection.close (unless its close has begun already), and the reader,
// noticing it, discards every frame but close and close-ok; the socket is
// cut after closeOkWait if close-ok does not come. Before the handshake
// finished the socket is closed at once without a frame, as RabbitMQ's
// reader terminates a connection that is not running.
func (c *conn) abort(e *amqp.Error) {
	c.forceOnce.Do(func() {
		c.stopped.Store(true)
		c.forcedReason = e.Text // read after quit is closed
		close(c.quit)
		if !c.opened.Load() {
			c.nc.Close()
			return
		}
		c.sendClose(e)
		// Give the client a moment to answer close-ok, then cut the socket.
		time.AfterFunc(c.srv.closeOkWait, func() { c.nc.Close() })
	})
}

// sendClose sends connection.close for e, from any goroutine, unless the
// connection's close has begun already (closeBegun); it reports whether it
// sent it.
func (c *conn) sendClose(e *amqp.Error) bool {
	if !c.closeBegun.CompareAndSwap(false, true) {
		return false
	}
	c.out.sendMethod(0, &amqp.ConnectionClose{ReplyCode: e.Code, ReplyText: e.ReplyString(), ReplyClassID: e.ClassID, ReplyMethodID: e.MethodID})
	return true
}

// hardError closes the connection for a connection-level exception: the
// broker sends connection.close and then waits, discarding frames, for
// close-ok. An error met after abort sent its connection.close (a frame
// the reader was handling meanwhile) is not answered: RabbitMQ would have
// discarded that frame.
func (c *conn) hardError(e *amqp.Error) {
	if c.sendClose(e) {
		c.log.Warn().Uint16("code", e.Code).Str("reason", e.ReplyString()).
			Str("method", amqp.MethodName(e.ClassID, e.MethodID)).Msg("closing connection on error")
	}
	// RabbitMQ waits a bounded time for close-ok.
	c.startClosing(3 * time.Second)
}

// startClosing moves the reader to closing after the broker's
// connection.close: the channels are shut (RabbitMQ terminates them as it
// sends its close), every frame but close and close-ok is discarded from
// now on, and the reader waits for close-ok at most wait. Reader goroutine
// only.
func (c *conn) startClosing(wait time.Duration) {
	c.closing = true
	c.cleanupChannels()
	c.nc.SetReadDeadline(time.Now().Add(wait))
}

func (c *conn) readLoop() error {
	timeout := 2 * time.Duration(c.heartbeat.Load())
	if lr := newLazyReader(c.nc); lr != nil {
		// An idle connection holds no read buffer.
		c.fr.SetReader(lr)
	}
	defer c.fs.flush()
	// Every frame received is proof of life, whether or not more input is
	// buffered behind it: a client that keeps the read buffer full
	// (pipelined publishes or nowait binds) is as alive as an idle one
	// sending heartbeats. The read deadline moves at most every
	// timeout/8, not at every frame (each move is a timer update): a
	// silent peer is noticed after 7/8 of the timeout at the earliest.
	//
	// Bytes count too, as RabbitMQ's heartbeat monitor counts them: when
	// the deadline passes in the middle of a frame that is still arriving
	// (a large body frame over a slow link), it is moved on.
	//
	// The same deadline wakes the reader for the consumer acknowledgement
	// timeout's check (checkAckTimeouts) while the connection has a
	// channel: the socket's deadline is the earlier of the two.
	var deadline time.Time
	var readAt uint64 // BytesRead when deadline was set
	every := c.srv.ackCheckEvery()
	var tickAt, set time.Time // the next check; the socket's read deadline
	for {
		if c.fs.pending() && !c.fr.HasFrame() {
			c.fs.flush() // the next read may wait
		}
		if (timeout > 0 || every > 0) && !c.closing {
			now := time.Now()
			var want time.Time
			if timeout > 0 {
				// Moved by bytes received, not by the check's wake-ups.
				if deadline.IsZero() || deadline.Sub(now) < timeout-timeout/8 && c.fr.BytesRead() != readAt {
					deadline = now.Add(timeout)
					readAt = c.fr.BytesRead()
				}
				want = deadline
			}
			if every > 0 {
				switch {
				case len(c.channels) == 0:
					tickAt = time.Time{}
				case tickAt.IsZero():
					tickAt = now.Add(every)
				case !now.Before(tickAt):
					c.checkAckTimeouts(now)
					tickAt = now.Add(every)
				}
				if !tickAt.IsZero() && (want.IsZero() || tickAt.Before(want)) {
					want = tickAt
				}
			}
			if !want.Equal(set) {
				set = want
				c.nc.SetReadDeadline(want)
			}
		}
		f, err := c.fr.ReadFrame()
		if !c.closing && c.closeBegun.Load() {
			// abort sent connection.close from another goroutine: this
			// frame and the ones after it are the client's answer or
			// crossed the close (the client's close-ok cannot come before
			// the close, which went out after closeBegun was set).
			c.startClosing(c.srv.closeOkWait)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue // a heartbeat or check deadline: wait for close-ok
			}
		}
		if err != nil && !c.closing && errors.Is(err, os.ErrDeadlineExceeded) && (timeout > 0 || every > 0) {
			switch {
			case timeout == 0 || time.Now().Before(deadline):
				continue // the check's deadline: made at the top of the loop
			case c.fr.BytesRead() != readAt:
				deadline = time.Time{} // moved at the top of the loop
				continue
			}
		}
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && !c.closing {
				c.hardError(ae)
				continue
			}
			if c.closing {
				return errClosed
			}
			return err
		}
		if c.fs.pending() && !burstFrame(f) {
			// Deliveries go out before anything else is handled: no
			// handler waits with them held back.
			c.fs.flush()
		}
		if err := c.out.waitRoom(c.srv.outMaxBuffered, c.quit, &c.fs); err != nil {
			return err
		}
		if err := c.handleFrame(f); err != nil {
			if errors.Is(err, errDrop) {
				return err
			}
			var ae *amqp.Error
			if errors.As(err, &ae) {
				if c.closing {
					continue
				}
				c.hardError(ae)
				continue
			}
			return err
		}
	}
}

// burstFrame reports whether f may go on a reader's burst without its
// deferred writes going out first: part of a basic.publish (the method
// frame or a content frame), or a basic.ack, nack or reject. None of them
// waits for anything a consumer would have to receive first (a publish
// that meets a resource alarm flushes before it waits).
func burstFrame(f amqp.Frame) bool {
	switch f.Type {
	case amqp.FrameHeader, amqp.FrameBody:
		return true
	case amqp.FrameMethod:
		p := f.Payload
		if len(p) < 4 || p[0] != 0 || p[1] != amqp.ClassBasic || p[2] != 0 {
			return false
		}
		switch p[3] {
		case amqp.MethodBasicPublish, amqp.MethodBasicAck, amqp.MethodBasicReject, amqp.MethodBasicNack:
			return true
		}
	}
	return false
}

// flushCtx is the dispatch context of this reader's publishes (see
// queue.EnqueueFor): its flushSet.
func (c *conn) flushCtx() any { return &c.fs }

// drainAfterClose waits briefly, discarding input, for the client to close
// the socket after close-ok, so that frames it sent meanwhile do not meet a
// reset connection.
func (c *conn) drainAfterClose() {
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			return
		}
	}
}

// errDrop ends the connection by closing the socket without a
// connection.close, which is what RabbitMQ does for input its reader cannot
// parse at all (unknown class or method ids, unknown field types).
var errDrop = errors.New("unparseable input, connection dropped")

// handleFrame routes one frame. A returned *amqp.Error is a hard error.
func (c *conn) handleFrame(f amqp.Frame) error {
	if c.closing {
		// After the broker's connection.close only close and close-ok
		// count.
		if f.Type != amqp.FrameMethod || f.Channel != 0 {
			return nil
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return nil
		}
		switch m.(type) {
		case *amqp.ConnectionCloseOk:
			return errClosed
		case *amqp.ConnectionClose:
			// A close crossing the broker's is answered; as RabbitMQ,
			// the broker still waits for the close-ok to its own (or for
			// the client to drop the socket).
			c.out.sendMethod(0, &amqp.ConnectionCloseOk{})
		}
		return nil
	}
	switch f.Type {
	case amqp.FrameHeartbeat:
		if len(f.Payload) != 0 {
			return amqp.Errorf(amqp.FrameError, 0, 0, "type 8, all octets = %v: unknown_frame", f.Payload)
		}
		if f.Channel != 0 {
			return amqp.Errorf(amqp.UnexpectedFrame, 0, 0, "type 8, all octets = <<>>")
		}
		return nil
	case amqp.FrameMethod:
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && (ae.Code == amqp.CommandInvalid || errors.Is(err, amqp.ErrBadFieldType)) {
				c.log.Warn().Err(err).Msg("unparseable method frame")
				return errDrop
			}
			return err
		}
		_, publish := m.(*amqp.BasicPublish)
		if !publish && !amqp.ShortstrsValid(m) {
			// RabbitMQ checks every short string a client sends but
			// basic.publish's: names that are not UTF-8 never exist.
			return amqp.Errorf(amqp.FrameError, 0, 0, "Malformed UTF-8 in shortstr")
		}
		if f.Channel == 0 {
			return c.handleConnectionMethod(m)
		}
		if publish {
			if err := c.waitUnblocked(); err != nil {
				return err
			}
		}
		return c.handleChannelMethod(f.Channel, m)
	case amqp.FrameHeader, amqp.FrameBody:
		ch := c.channels[f.Channel]
		if f.Channel == 0 || ch == nil {
			return amqp.Errorf(amqp.UnexpectedFrame, 0, 0, "expected method frame, got non method frame instead")
		}
		// Content in flight waits for an alarm as a new publish does: a
		// body being streamed when the alarm rises must not keep growing.
		// The frame waits in the read buffer; nothing more is read.
		if err := c.waitUnblocked(); err != nil {
			return err
		}
		return ch.handleContent(f)
	}
	return amqp.Errorf(amqp.FrameError, 0, 0, "unknown frame type %d", f.Type)
}

func (c *conn) handleConnectionMethod(m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.ConnectionClose:
		// No connection.close from abort after this close-ok.
		c.closeBegun.Store(true)
		c.cleanupChannels()
		// Exclusive queues go before close-ok, so a client that closed
		// finds them gone at once (cleanup would otherwise wait for the
		// client to drop the socket).
		c.vhost.deleteExclusive(c.id)
		c.out.sendMethod(0, &amqp.ConnectionCloseOk{})
		c.drainAfterClose()
		return errClosed
	case *amqp.ConnectionUpdateSecret:
		// RabbitMQ asks each auth backend whose state can expire (OAuth 2)
		// to take the new secret; the internal backend's cannot, so the
		// secret is not checked and the answer is always update-secret-ok.
		c.log.Info().Str("reason", m.Reason).Msg("connection secret updated")
		c.out.sendMethod(0, &amqp.ConnectionUpdateSecretOk{})
		return nil
	}
	// Everything else, handshake methods again included, is out of place
	// once the connection is open.
	return amqp.Errorf(amqp.ChannelError, m.ClassID(), m.MethodID(), "unexpected method in connection state running")
}

func (c *conn) handleChannelMethod(id uint16, m amqp.Method) error {
	ch := c.channels[id]
	if _, ok := m.(*amqp.ChannelOpen); ok && ch != nil {
		return amqp.Errorf(amqp.ChannelError, amqp.ClassChannel, amqp.MethodChannelOpen, "second 'channel.open' seen")
	}
	if _, ok := m.(*amqp.ChannelOpen); ok {
		// RabbitMQ limits how many channels are open, not their numbers.
		if len(c.channels) >= int(c.channelMax) {
			return amqp.Errorf(amqp.NotAllowed, 0, 0,
				"number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax)
		}
		if err := c.admitChannel(); err != nil {
			return err
		}
		c.chanMu.Lock()
		c.channels[id] = newChannel(c, id)
		c.chanMu.Unlock()
		c.srv.churn.chanOpened.Add(1)
		c.out.sendMethod(id, &amqp.ChannelOpenOk{})
		return nil
	}
	if ch == nil {
		if m.ClassID() == 10 {
			return amqp.Errorf(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "unimplemented method")
		}
		return amqp.Errorf(amqp.ChannelError, m.ClassID(), m.MethodID(), "expected 'channel.open'")
	}
	// Whatever follows a tx.commit on its channel follows its commit-ok;
	// other channels do not wait for it.
	ch.awaitCommit()
	return ch.handleMethod(m)
}

// cleanupChannels closes every channel: consumers cancelled, unacked
// messages requeued.
func (c *conn) cleanupChannels() {
	// No channel takes a delivery from here on: messages one closing
	// channel requeues must not go to a sibling.
	c.stopped.Store(true)
	for id, ch := range c.channels {
		// A commit in flight is answered (or fails) before its channel
		// goes.
		ch.awaitCommit()
		ch.shutdown()
		c.removeChannel(id)
	}
}

// cleanup runs when the connection ends.
func (c *conn) cleanup() {
	c.cleanupChannels()
	if c.vhost != nil {
		c.vhost.deleteExclusive(c.id)
		c.vhost.conns.Add(-1)
		c.srv.churn.connClosed.Add(1)
	}
}

// kickConsumers re-offers messages to this connection's consumers after its
// outbound buffer drained. It runs on the writer goroutine.
func (c *conn) kickConsumers() {
	// The channel table belongs to the reader; consumers are reached
	// through a snapshot kept under the consumer registry lock.
	for _, q := range c.consumedQueues() {
		q.Kick(nil)
	}
}

// handshake runs protocol header, start, tune and open.
func (c *conn) handshake() error {
	hdr, err := c.fr.ReadProtocolHeader()
	if err != nil {
		return err
	}
	// RabbitMQ also takes the 0-9 header ("AMQP" 1 1 0 9) as 0-9-1.
	if !bytes.Equal(hdr[:], amqp.ProtocolHeader) && !bytes.Equal(hdr[:], []byte("AMQP\x01\x01\x00\x09")) {
		c.nc.Write(amqp.ProtocolHeader)
		return fmt.Errorf("bad protocol header %q", hdr[:])
	}
	c.fr.SetMaxFrameSize(amqp.FrameMinSize + amqp.FrameOverhead)

	c.out.sendMethod(0, &amqp.ConnectionStart{
		VersionMajor:     0,
		VersionMinor:     9,
		ServerProperties: startProperties,
		Mechanisms:       c.mechanisms(),
		Locales:          "en_US",
	})
	var startOk *amqp.ConnectionStartOk
	if err := expectMethod(c, &startOk); err != nil {
		return err
	}
	c.caps = readClientCaps(startOk.ClientProperties)
	user, pass, err := credentials(startOk.Mechanism, startOk.Response)
	if startOk.Mechanism == mechExternal {
		user, err = c.externalCredentials() // the TLS client certificate's CN
	}
	if err != nil {
		return err // RabbitMQ drops the socket without a close here
	}
	refused := false
	var try *auth.Attempt // a password login, throttled
	if startOk.Mechanism == mechExternal {
		refused = !c.srv.externalUser(user) // the certificate stands for the password
	} else {
		try = c.srv.LoginThrottle().Begin(auth.SourceOf(c.nc.RemoteAddr().String()))
		if try.Refused {
			refused = true
		} else if _, ok := c.srv.auth.Authenticate(user, pass); !ok {
			refused = true
		} else {
			try.End()
		}
	}
	if refused {
		ev := c.log.Warn().Str("user", user).Str("mechanism", startOk.Mechanism)
		switch {
		case try != nil && try.Refused:
			if ok, n := c.srv.LoginThrottle().LogRefusal(); ok {
				ev.Int("not_logged_since", n).Msg("login refused unchecked: too many failed logins in flight from this address")
			}
		case try != nil:
			// The refusal is held back, longer with each failure of the
			// address or the user (auth.Throttle).
			f := try.Failed(user)
			ev.Int("address_failures", f.SourceFailures).Int("user_failures", f.UserFailures).Dur("delay", f.Delay).
				Msg("login refused: unknown user or wrong credentials")
			c.srv.LoginThrottle().Sleep(f.Delay, c.quit)
			try.End()
		default:
			ev.Msg("login refused: unknown user or wrong credentials")
		}
		e := amqp.Errorf(amqp.AccessRefused, 0, 0,
			"Login was refused using authentication mechanism %s. For details see the broker logfile.", startOk.Mechanism)
		if !c.caps.authFailureClose {
			return e
		}
		return c.refuse(e)
	}
	if c.srv.loopbackOnly(user) && !isLoopback(c.nc.RemoteAddr()) {
		c.log.Warn().Str("user", user).Msg("login refused: user may connect via localhost only")
		e := amqp.Errorf(amqp.AccessRefused, 0, 0, "user '%s' can only connect via localhost", user)
		if !c.caps.authFailureClose {
			return e
		}
		return c.refuse(e)
	}
	c.user = user

	c.out.sendMethod(0, &amqp.ConnectionTune{
		ChannelMax: c.srv.cfg.ChannelMax,
		FrameMax:   c.srv.cfg.FrameMax,
		Heartbeat:  uint16(c.srv.cfg.Heartbeat / time.Second),
	})
	var tuneOk *amqp.ConnectionTuneOk
	if err := expectMethod(c, &tuneOk); err != nil {
		return err
	}
	if err := c.applyTune(tuneOk); err != nil {
		return err // RabbitMQ drops the socket without a close here
	}

	if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
		// The heartbeat monitor starts with tune-ok.
		c.nc.SetReadDeadline(time.Now().Add(2 * hb))
	}
	var open *amqp.ConnectionOpen
	if err := expectMethod(c, &open); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.UnexpectedFrame {
			// After tune-ok RabbitMQ answers a frame on another channel
			// with connection.close.
			return c.refuse(ae)
		}
		if errors.As(err, &ae) && ae.Code == amqp.CommandInvalid && ae.ClassID == amqp.ClassConnection {
			// And another connection method (close included) with 504.
			return c.refuse(amqp.Errorf(amqp.ChannelError, ae.ClassID, ae.MethodID, "unexpected method in connection state opening"))
		}
		return err
	}
	vh := c.srv.vhost(open.VirtualHost)
	if vh == nil {
		return c.refuse(amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", open.VirtualHost))
	}
	if !c.srv.auth.CanAccessVHost(c.user, vh.name) {
		return c.refuse(amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost '%s' refused for user '%s'", vh.name, c.user))
	}
	if err := vh.admitConnection(c.user); err != nil {
		return c.refuse(err)
	}
	if err := c.admitUser(); err != nil {
		vh.conns.Add(-1)
		return c.refuse(err)
	}
	c.vhost = vh
	c.info.Store(&connInfo{
		User: c.user, VHost: vh.name, Mechanism: startOk.Mechanism, FrameMax: c.frameMax,
		ChannelMax: c.channelMax, Heartbeat: time.Duration(c.heartbeat.Load()), Caps: c.caps,
		ClientProps: startOk.ClientProperties, ConnectedAt: time.Now(),
	})
	c.out.sendMethod(0, &amqp.ConnectionOpenOk{})
	c.opened.Store(true)
	return nil
}

// refuse sends connection.close for e during the handshake and waits
// briefly for close-ok.
func (c *conn) refuse(e *amqp.Error) error {
	c.sendClose(e)
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return e
		}
		if f.Type == amqp.FrameMethod && f.Channel == 0 {
			if m, err := amqp.DecodeMethod(f.Payload); err == nil {
				if _, ok := m.(*amqp.ConnectionCloseOk); ok {
					return e
				}
			}
		}
	}
}

// expectMethod reads the next frame of the handshake, which must be a
// method on channel 0 of the type *dst points to. RabbitMQ answers anything
// else during the handshake by closing the socket without a frame, and so
// does Warren (the error is logged).
func expectMethod[M amqp.Method](c *conn, dst *M) error {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type == amqp.FrameHeartbeat {
			continue
		}
		if f.Type != amqp.FrameMethod || f.Channel != 0 {
			return amqp.Errorf(amqp.UnexpectedFrame, 0, 0, "frame type %d on channel %d during handshake", f.Type, f.Channel)
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return err
		}
		want, ok := m.(M)
		if !ok {
			// connection.close included: before tune-ok RabbitMQ drops
			// the socket without close-ok.
			return amqp.Errorf(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "unexpected method %s during handshake", m.Name())
		}
		*dst = want
		return nil
	}
}

func (c *conn) applyTune(t *amqp.ConnectionTuneOk) error {
	// 0 means "no limit", which is above what the server offered.
	fm := t.FrameMax
	switch {
	case fm == 0 || fm > c.srv.cfg.FrameMax:
		return amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionTuneOk, "negotiated frame_max = %d is higher than the maximum allowed value (%d)", fm, c.srv.cfg.FrameMax)
	case fm < amqp.FrameMinSize:
		return amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionTuneOk, "frame_max=%d < %d min size", fm, amqp.FrameMinSize)
	}
	cm := t.ChannelMax
	if cm == 0 || cm > c.srv.cfg.ChannelMax {
		return amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionTuneOk, "negotiated channel_max = %d is higher than the maximum allowed value (%d)", cm, c.srv.cfg.ChannelMax)
	}
	c.frameMax = fm
	// RabbitMQ accepts a frame whose payload is frame_max bytes.
	c.fr.SetMaxFrameSize(fm + amqp.FrameOverhead)
	c.channelMax = cm
	hb := time.Duration(t.Heartbeat) * c.srv.heartbeatUnit
	c.heartbeat.Store(int64(hb))
	c.out.setHeartbeat(hb)
	return nil
}

// startProperties is what connection.start carries, built once instead of
// for every connection; it is only ever encoded, never changed.
var startProperties = serverProperties()

func serverProperties() amqp.Table {
	return amqp.Table{
		"product":      "Warren",
		"version":      "0.1.0",
		"platform":     "Go",
		"copyright":    "The Warren authors",
		"information":  "Licensed under the MPL 2.0",
		"cluster_name": "warren",
		"capabilities": amqp.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"per_consumer_qos":             true,
			"consumer_priorities":          true,
			"direct_reply_to":              true,
			"authentication_failure_close": true,
		},
	}
}

func readClientCaps(props amqp.Table) clientCaps {
	caps, _ := props["capabilities"].(amqp.Table)
	flag := func(name string) bool { v, _ := caps[name].(bool); return v }
	return clientCaps{
		consumerCancelNotify: flag("consumer_cancel_notify"),
		connectionBlocked:    flag("connection.blocked"),
		authFailureClose:     flag("authentication_failure_close"),
	}
}

// credentials decodes a PLAIN or AMQPLAIN response.
func credentials(mechanism, response string) (user, pass string, err error) {
	switch mechanism {
	case "PLAIN":
		parts := bytes.SplitN([]byte(response), []byte{0}, 3)
		if len(parts) != 3 {
			return "", "", amqp.Errorf(amqp.AccessRefused, amqp.ClassConnection, amqp.MethodConnectionStartOk, "Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")
		}
		return string(parts[1]), string(parts[2]), nil
	case "AMQPLAIN":
		// A field table without its length prefix.
		b := make([]byte, 4+len(response))
		binary.BigEndian.PutUint32(b, uint32(len(response)))
		copy(b[4:], response)
		t, _, err := amqp.DecodeTable(b)
		if err != nil {
			return "", "", amqp.Errorf(amqp.AccessRefused, amqp.ClassConnection, amqp.MethodConnectionStartOk, "Login was refused using authentication mechanism AMQPLAIN. For details see the broker logfile.")
		}
		user, _ = t["LOGIN"].(string)
		pass, _ = t["PASSWORD"].(string)
		return user, pass, nil
	}
	return "", "", amqp.Errorf(amqp.CommandInvalid, amqp.ClassConnection, amqp.MethodConnectionStartOk, "unknown authentication mechanism '%s'", mechanism)
}

// registerConsumer and unregisterConsumer keep the set of consumers the
// writer goroutine kicks when the outbound buffer drains.
func (c *conn) registerConsumer(k *consumer) {
	c.consMu.Lock()
	if c.consumers == nil {
		c.consumers = map[*consumer]struct{}{}
	}
	c.consumers[k] = struct{}{}
	c.consMu.Unlock()
}

func (c *conn) unregisterConsumer(k *consumer) {
	c.consMu.Lock()
	delete(c.consumers, k)
	c.consMu.Unlock()
}

func (c *conn) consumedQueues() []queue.Queue {
	c.consMu.Lock()
	defer c.consMu.Unlock()
	qs := make([]queue.Queue, 0, len(c.consumers))
	for k := range c.consumers {
		qs = append(qs, k.queue())
	}
	return qs
}
