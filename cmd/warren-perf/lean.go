package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
)

// --lean-consumer: consumers speak AMQP 0-9-1 themselves, with Warren's
// codec (package amqp), instead of through amqp091-go. amqp091-go hands
// every frame and every delivery between goroutines over channels and
// allocates a Delivery with a decoded headers table per message; at a
// stream replay's rate that client, not the broker, is the bottleneck.
// A lean consumer is one goroutine on one socket: it reads frames through
// a large buffer, decodes basic.deliver in place, reads only the stream
// headers of the content header (x-stream-offset, x-stream-partition)
// without decoding the table, takes a one-frame body where it lies, and
// acks with multiple=true as the other consumers do. It negotiates no
// heartbeats (heartbeat 0 in tune-ok, which both brokers accept) and
// declares consumer_cancel_notify, so a broker's basic.cancel reaches it.

// leanChannel is the one channel a lean consumer uses.
const leanChannel = 1

// leanReadBuf is the lean consumer's read buffer.
const leanReadBuf = 256 << 10

// leanConn is a lean consumer's connection.
type leanConn struct {
	nc       net.Conn
	fr       *amqp.FrameReader
	w        *bufio.Writer
	out      []byte // scratch for outgoing frames
	frameMax uint32
}

// leanDial opens a connection and channel 1 as amqp091-go would (PLAIN,
// the URL's vhost, locale en_US).
func leanDial(rawURL string) (*leanConn, error) {
	u, err := amqp091.ParseURI(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "amqp" {
		return nil, fmt.Errorf("--lean-consumer speaks plain amqp://, not %s://", u.Scheme)
	}
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), 10*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 20)
	}
	c := &leanConn{nc: nc, fr: amqp.NewFrameReader(nc, leanReadBuf), w: bufio.NewWriterSize(nc, 4096)}
	if err := c.handshake(u); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *leanConn) handshake(u amqp091.URI) error {
	if err := c.nc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if _, err := c.w.Write(amqp.ProtocolHeader); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	if _, err := expectMethod[*amqp.ConnectionStart](c, 0); err != nil {
		return err
	}
	props := amqp.Table{"product": "warren-perf (lean consumer)", "capabilities": amqp.Table{"consumer_cancel_notify": true}}
	if err := c.send(0, &amqp.ConnectionStartOk{ClientProperties: props, Mechanism: "PLAIN",
		Response: "\x00" + u.Username + "\x00" + u.Password, Locale: "en_US"}); err != nil {
		return err
	}
	tune, err := expectMethod[*amqp.ConnectionTune](c, 0)
	if err != nil {
		return err
	}
	c.frameMax = 128 << 10
	if tune.FrameMax != 0 && tune.FrameMax < c.frameMax {
		c.frameMax = tune.FrameMax
	}
	if err := c.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: c.frameMax}); err != nil {
		return err
	}
	c.fr.SetMaxFrameSize(c.frameMax)
	if err := c.send(0, &amqp.ConnectionOpen{VirtualHost: u.Vhost}); err != nil {
		return err
	}
	if _, err := expectMethod[*amqp.ConnectionOpenOk](c, 0); err != nil {
		return err
	}
	if err := c.send(leanChannel, &amqp.ChannelOpen{}); err != nil {
		return err
	}
	if _, err := expectMethod[*amqp.ChannelOpenOk](c, leanChannel); err != nil {
		return err
	}
	return c.nc.SetDeadline(time.Time{})
}

// send writes one method frame and flushes it.
func (c *leanConn) send(ch uint16, m amqp.Method) error {
	var err error
	if c.out, err = amqp.AppendMethodFrame(c.out[:0], ch, m); err != nil {
		return err
	}
	if _, err := c.w.Write(c.out); err != nil {
		return err
	}
	return c.w.Flush()
}

// expectMethod reads frames until a method on channel ch and returns it
// when it is an M; a connection.close or channel.close is an error.
func expectMethod[M amqp.Method](c *leanConn, ch uint16) (M, error) {
	var zero M
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return zero, err
		}
		if f.Type != amqp.FrameMethod {
			continue
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return zero, err
		}
		if err := closeError(m); err != nil {
			return zero, err
		}
		if want, ok := m.(M); ok && f.Channel == ch {
			return want, nil
		}
		return zero, fmt.Errorf("expected %T on channel %d, got %s on %d", zero, ch, m.Name(), f.Channel)
	}
}

// closeError is the error a broker's connection.close or channel.close
// carries (nil for other methods).
func closeError(m amqp.Method) error {
	switch x := m.(type) {
	case *amqp.ConnectionClose:
		return fmt.Errorf("connection closed by the broker: %d %s", x.ReplyCode, x.ReplyText)
	case *amqp.ChannelClose:
		return fmt.Errorf("channel closed by the broker: %d %s", x.ReplyCode, x.ReplyText)
	}
	return nil
}

// close closes the connection gracefully (connection.close, then
// close-ok), or cuts the socket after d.
func (c *leanConn) close(d time.Duration) {
	defer c.nc.Close()
	if err := c.nc.SetDeadline(time.Now().Add(d)); err != nil {
		return
	}
	if err := c.send(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "kthxbai"}); err != nil {
		return
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		if f.Type == amqp.FrameMethod && f.Channel == 0 {
			if m, err := amqp.DecodeMethod(f.Payload); err != nil || isMethod[*amqp.ConnectionCloseOk](m) || isMethod[*amqp.ConnectionClose](m) {
				return
			}
		}
	}
}

func isMethod[M amqp.Method](m amqp.Method) bool {
	_, ok := m.(M)
	return ok
}

// errStopped: the consumer was told to stop.
var errStopped = errors.New("stopped")

// consumeLean is consume (pubsub.go) with a lean consumer.
func (r *runner) consumeLean(cs *consumerState, id int, qs []int, ready chan<- struct{}, stop <-chan struct{}) {
	cfg := r.cfg
	u := cfg.URL
	if cfg.ConsumerURL != "" {
		u = cfg.ConsumerURL
	}
	c, err := leanDial(u)
	if err != nil {
		r.fail("consumer %d: dial: %v", id, err)
		ready <- struct{}{}
		return
	}
	setup := func() error {
		if err := c.nc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if !cfg.AutoAck && cfg.Prefetch > 0 {
			if err := c.send(leanChannel, &amqp.BasicQos{PrefetchCount: uint16(cfg.Prefetch)}); err != nil {
				return err
			}
			if _, err := expectMethod[*amqp.BasicQosOk](c, leanChannel); err != nil {
				return fmt.Errorf("qos: %w", err)
			}
		}
		// The consumes go out together: deliveries of the first may
		// arrive before the last one's consume-ok, so the loop counts
		// the consume-oks and tells ready once it has them all.
		for i, q := range qs {
			tag := fmt.Sprintf("warren-perf-%d-%d", id, i)
			if err := c.send(leanChannel, &amqp.BasicConsume{Queue: r.queues[q], ConsumerTag: tag, NoAck: cfg.AutoAck,
				Arguments: wireTable(r.consumeArgs(id))}); err != nil {
				return err
			}
		}
		return c.nc.SetDeadline(time.Time{})
	}
	if err := setup(); err != nil {
		r.fail("consumer %d: %v", id, err)
		c.nc.Close()
		ready <- struct{}{}
		return
	}
	readyOnce := func() {
		if ready != nil {
			ready <- struct{}{}
			ready = nil
		}
	}
	defer readyOnce()

	var ackFrame []byte
	rec := r.newReceiver(cs, id, func(tag uint64, multiple bool) error {
		var err error
		if ackFrame, err = amqp.AppendMethodFrame(ackFrame[:0], leanChannel, &amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}); err != nil {
			return err
		}
		if _, err := c.w.Write(ackFrame); err != nil {
			return err
		}
		return c.w.Flush()
	})
	// The reader blocks in the socket: stop interrupts it with a deadline.
	var stopped atomic.Bool
	loopDone := make(chan struct{})
	go func() {
		select {
		case <-stop:
			stopped.Store(true)
			_ = c.nc.SetReadDeadline(time.Now())
		case <-loopDone:
		}
	}()
	err = r.leanLoop(c, rec, qs, &stopped, readyOnce)
	close(loopDone)
	if !stopped.Load() {
		// The broker ended it: wait for the run to stop, as consume does.
		if err != nil {
			r.fail("consumer %d: %v", id, err)
		}
		readyOnce()
		select {
		case <-stop:
		case <-time.After(r.cfg.DrainTimeout + 30*time.Second):
		}
		c.nc.Close()
		return
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	rec.finalAck()
	c.close(2 * time.Second)
}

// leanLoop reads deliveries until the connection fails, the broker closes
// it, or stopped is closed (the read then fails on its deadline); it calls
// subscribed once every queue's consume-ok arrived.
func (r *runner) leanLoop(c *leanConn, rec *receiver, qs []int, stopped *atomic.Bool, subscribed func()) error {
	oks := 0
	stream := r.cfg.QueueType == "stream"
	keys := []string{"x-stream-offset", "x-stream-partition"}
	var vals [2]any
	var body []byte
	var m received
	var size uint64 // the body size the content header announced
	state := 0      // 0: a method next; 1: the content header; 2: body frames
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if stopped.Load() {
				return errStopped
			}
			return err
		}
		switch f.Type {
		case amqp.FrameHeartbeat:
			continue
		case amqp.FrameMethod:
			if state != 0 {
				return errors.New("method frame inside a delivery's content")
			}
			p := f.Payload
			if len(p) >= 4 && binary.BigEndian.Uint16(p) == amqp.ClassBasic && binary.BigEndian.Uint16(p[2:]) == amqp.MethodBasicDeliver {
				tag, q, err := parseDeliver(p[4:], qs)
				if err != nil {
					return err
				}
				m = received{tag: tag, q: q}
				state = 1
				continue
			}
			meth, err := amqp.DecodeMethod(p)
			if err != nil {
				return err
			}
			switch x := meth.(type) {
			case *amqp.BasicConsumeOk:
				if oks++; oks == len(qs) {
					subscribed()
				}
			case *amqp.BasicCancel:
				r.cancelled.Add(1)
				r.fail("consumer %d: cancelled by broker (%s)", rec.id, x.ConsumerTag)
			case *amqp.ChannelClose:
				_ = c.send(leanChannel, &amqp.ChannelCloseOk{})
				return closeError(x)
			case *amqp.ConnectionClose:
				_ = c.send(0, &amqp.ConnectionCloseOk{})
				return closeError(x)
			}
		case amqp.FrameHeader:
			if state != 1 {
				return errors.New("unexpected content header")
			}
			h, err := amqp.DecodeContentHeader(f.Payload)
			if err != nil {
				return err
			}
			if stream {
				if raw := h.Props.HeadersRaw(h.RawProps); raw != nil && amqp.TableLookup(raw, keys, vals[:]) == nil {
					m.offset, m.hasOffset = vals[0].(int64)
					m.partition, m.hasPartition = intHeader(vals[1])
				}
			}
			size, body = h.BodySize, body[:0]
			if size == 0 {
				rec.handle(&m)
				state = 0
				continue
			}
			state = 2
		case amqp.FrameBody:
			if state != 2 {
				return errors.New("unexpected body frame")
			}
			if len(body) == 0 && uint64(len(f.Payload)) == size {
				m.body = f.Payload // the whole body in one frame: read it where it lies
			} else {
				body = append(body, f.Payload...)
				if uint64(len(body)) < size {
					continue
				}
				m.body = body
			}
			if uint64(len(m.body)) != size {
				return fmt.Errorf("body of %d bytes, the header said %d", len(m.body), size)
			}
			rec.handle(&m)
			state = 0
		}
	}
}

// wireTable converts amqp091-go's table (the consume arguments) to the
// codec's.
func wireTable(t amqp091.Table) amqp.Table {
	if t == nil {
		return nil
	}
	out := amqp.Table{}
	for k, v := range t {
		out[k] = wireValue(v)
	}
	return out
}

func wireValue(v any) any {
	switch x := v.(type) {
	case amqp091.Table:
		return wireTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = wireValue(e)
		}
		return out
	}
	return v
}

// parseDeliver reads basic.deliver's arguments in place: the consumer
// tag (warren-perf-<id>-<i>: the i-th queue of qs) and the delivery tag.
func parseDeliver(b []byte, qs []int) (tag uint64, q int, err error) {
	if len(b) < 1 || len(b) < 1+int(b[0])+8 {
		return 0, 0, errors.New("basic.deliver cut short")
	}
	ctag := b[1 : 1+int(b[0])]
	tag = binary.BigEndian.Uint64(b[1+len(ctag):])
	i := len(ctag)
	for i > 0 && ctag[i-1] >= '0' && ctag[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(string(ctag[i:]))
	if err != nil || n >= len(qs) {
		return 0, 0, fmt.Errorf("basic.deliver for unknown consumer tag %q", ctag)
	}
	return tag, qs[n], nil
}
