package main

import (
	"bufio"
	"context"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
)

// --lean-publisher: producers speak AMQP 0-9-1 themselves, with Warren's
// codec, as lean consumers do (lean.go). amqp091-go takes a lock and
// writes three frames per publish and hands every confirmation, a
// multiple ack expanded into one per tag, to a Go channel; at a stream's
// confirmed rate that client's CPU, not the broker, sets the figure. A
// lean producer encodes its publishes into one buffer, written when the
// confirm window is full (or at once under --rate), and one goroutine
// reads the acks, settling a multiple ack's tags in one step. Both
// brokers are measured with the same client.

// leanPubBuf is a lean producer's write buffer.
const leanPubBuf = 256 << 10

// produceLean is produce (pubsub.go) with a lean producer.
func (r *runner) produceLean(ctx, pubCtx context.Context, ps *producerState, end *time.Time) {
	cfg := r.cfg
	c, err := leanDial(cfg.URL)
	if err != nil {
		r.fail("producer %d: dial: %v", ps.id, err)
		*end = time.Now()
		return
	}
	defer c.nc.Close()
	var sem chan struct{}
	readerDone := make(chan error, 1)
	if cfg.Confirm > 0 {
		if err := c.send(leanChannel, &amqp.ConfirmSelect{}); err != nil {
			r.fail("producer %d: confirm.select: %v", ps.id, err)
			*end = time.Now()
			return
		}
		if _, err := expectMethod[*amqp.ConfirmSelectOk](c, leanChannel); err != nil {
			r.fail("producer %d: confirm.select: %v", ps.id, err)
			*end = time.Now()
			return
		}
		sem = make(chan struct{}, cfg.Confirm)
		ps.sentAt = make([]atomic.Int64, 2*cfg.Confirm+16)
	}
	go func() { readerDone <- r.readConfirms(c, ps, sem) }()
	c.w = bufio.NewWriterSize(c.nc, leanPubBuf)

	props := amqp.Properties{DeliveryMode: 1}
	if cfg.Persistent {
		props.DeliveryMode = 2
	}
	body, interval := r.publishBody(), r.publishInterval()
	start := time.Now()
	done := pubCtx.Done()
	keys := r.keyHeaders(ps)
	// The content header's properties, encoded once per headers table.
	raws := map[*amqp091.Table][]byte{}
	propsOf := func(t *amqp091.Table) ([]byte, error) {
		raw, ok := raws[t]
		if !ok {
			p := props
			p.Headers = wireTable(*t)
			var err error
			if raw, err = p.Append(nil); err != nil {
				return nil, err
			}
			raws[t] = raw
		}
		return raw, nil
	}
	var buf []byte
	var seq int64
	var werr error
publish:
	for ; cfg.Count == 0 || seq < cfg.Count; seq++ {
		select {
		case <-done:
			break publish
		case werr = <-readerDone:
			break publish
		default:
		}
		if !pace(start, seq, interval, done) || !r.holdInflight(done, c.w.Flush) {
			break publish
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			default:
				// The window is full: what waits in the buffer goes out
				// before this waits for acks.
				if werr = c.w.Flush(); werr != nil {
					break publish
				}
				select {
				case sem <- struct{}{}:
				case <-done:
					break publish
				case werr = <-readerDone:
					break publish
				}
			}
		}
		rt := &ps.routes[seq%int64(len(ps.routes))]
		headers := &rt.headers
		if keys != nil {
			headers = &keys[seq%int64(len(keys))]
		}
		now := time.Now().UnixNano()
		encodeBody(body, now, ps.id, uint32(seq))
		if ps.sentAt != nil {
			ps.sentAt[seq%int64(len(ps.sentAt))].Store(now)
		}
		if buf, werr = amqp.AppendMethodFrame(buf[:0], leanChannel, &amqp.BasicPublish{Exchange: cfg.Exchange, RoutingKey: rt.key}); werr != nil {
			break
		}
		raw, err := propsOf(headers)
		if err != nil {
			werr = err
			break
		}
		buf = amqp.AppendHeaderFrame(buf, leanChannel, amqp.ClassBasic, uint64(len(body)), raw)
		buf = amqp.AppendBodyFrames(buf, leanChannel, body, c.frameMax)
		if _, werr = c.w.Write(buf); werr != nil {
			break
		}
		if interval > 0 {
			if werr = c.w.Flush(); werr != nil {
				break
			}
		}
		ps.sent.Add(1)
		r.sent.Add(1)
	}
	if werr == nil {
		werr = c.w.Flush()
	}
	*end = time.Now()
	if werr != nil {
		r.fail("producer %d: publish: %v", ps.id, werr)
	} else if sem != nil {
		drainConfirms(r, ctx, ps, sem, readerDone, func(err error) error { return err })
	}
	// The reader sees the close-ok (or the socket's end) and stops.
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	_ = c.send(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "kthxbai"})
	select {
	case <-readerDone:
	case <-time.After(5 * time.Second):
	}
}

// readConfirms reads a lean producer's connection until it closes:
// basic.ack and basic.nack settle their tags (a multiple one all those up
// to it) and free the window; a broker's close ends it with its error.
func (r *runner) readConfirms(c *leanConn, ps *producerState, sem chan struct{}) error {
	var tags tagSettler
	settle := func(tag uint64, ack bool) {
		if n := uint64(len(ps.sentAt)); n > 0 {
			if at := ps.sentAt[(tag-1)%n].Load(); at > 0 {
				ps.confirmedAt(at, time.Now().UnixNano(), r.cfg.ConfirmTrace != "")
			}
		}
		if ack {
			ps.confirmed.set(uint32(tag - 1))
			r.confirmed.Add(1)
		} else {
			r.nacked.Add(1)
		}
		select {
		case <-sem:
		default:
		}
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil // closed: by us after the drain, or reported by the broker's close below
		}
		if f.Type != amqp.FrameMethod {
			continue
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			return err
		}
		var tag uint64
		var multiple, ack bool
		switch x := m.(type) {
		case *amqp.BasicAck:
			tag, multiple, ack = x.DeliveryTag, x.Multiple, true
		case *amqp.BasicNack:
			tag, multiple = x.DeliveryTag, x.Multiple
		case *amqp.ConnectionCloseOk:
			return nil
		default:
			if err := closeError(m); err != nil {
				return err
			}
			continue
		}
		if sem == nil {
			continue
		}
		tags.settle(tag, multiple, func(t uint64) { settle(t, ack) })
		r.lastConfirm.Store(time.Now().UnixNano())
	}
}

// tagSettler turns a publisher's acks into the tags they settle, each
// once. Tags are issued in order from 1; low is the lowest not settled,
// early the ones above it that single acks settled out of order (a
// stream slower than another: the window bounds the tags outstanding,
// not their span).
type tagSettler struct {
	low   uint64
	early map[uint64]bool
}

// settle calls f for each tag an ack of tag (multiple: and all below it)
// settles that was not settled before.
func (s *tagSettler) settle(tag uint64, multiple bool, f func(tag uint64)) {
	if s.low == 0 {
		s.low, s.early = 1, map[uint64]bool{}
	}
	if tag < s.low {
		return
	}
	switch {
	case multiple:
		for ; s.low <= tag; s.low++ {
			if s.early[s.low] {
				delete(s.early, s.low)
			} else {
				f(s.low)
			}
		}
	case s.early[tag]:
		return
	case tag == s.low:
		f(tag)
		s.low++
	default:
		s.early[tag] = true
		f(tag)
		return
	}
	for s.early[s.low] {
		delete(s.early, s.low)
		s.low++
	}
}
