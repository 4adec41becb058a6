package server

import (
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// outHighWater is how many bytes may wait in a connection's outbound buffer
// before consumers on it stop being offered messages.
const outHighWater = 1 << 20

// Outbound buffers are pooled: an outbox holds one only while frames wait
// in it, so an idle connection holds none, and a burst's buffer goes back
// for every connection to use. Buffers above outPoolMax go to the garbage
// collector instead.
const (
	outBufSize = 4 << 10
	outPoolMax = 2 * outHighWater
)

var outBufs = sync.Pool{New: func() any { return make([]byte, 0, outBufSize) }}

// outBuf returns b, or an empty pooled buffer when b is nil.
func outBuf(b []byte) []byte {
	if b != nil {
		return b
	}
	return outBufs.Get().([]byte)[:0]
}

func putOutBuf(b []byte) {
	if cap(b) >= outBufSize && cap(b) <= outPoolMax {
		outBufs.Put(b[:0]) // boxing the slice header costs one small allocation per write
	}
}

// outbox is a connection's outbound buffer. Any goroutine appends frames;
// only the writer goroutine touches the socket, flushing everything queued
// in one write.
type outbox struct {
	mu     sync.Mutex
	buf    []byte
	full   bool // buf passed outHighWater; the writer kicks consumers when it drains
	closed bool
	wrote  bool // something was queued since the last heartbeat tick
	// ackAt is where the last basic.ack that sendAck queued starts in buf
	// (-1: none since the writer took the buffer); ackCh is its channel.
	ackAt   int
	ackCh   uint16
	wake    chan struct{}
	room    chan struct{} // signalled after each write, for waitRoom
	flushed chan struct{} // closed when the writer has exited
}

func newOutbox() *outbox {
	return &outbox{ackAt: -1, wake: make(chan struct{}, 1), room: make(chan struct{}, 1), flushed: make(chan struct{})}
}

// ackFrameLen is the size of a basic.ack frame: header, class and method
// ids, delivery tag, flags, frame end.
const ackFrameLen = amqp.FrameHeaderSize + 4 + 8 + 1 + 1

// sendAck queues a publisher confirm (basic.ack). When the last frame
// queued and not yet written is a basic.ack of the same channel, it becomes
// one ack of both with multiple set instead: confirms go out in publish
// order (ack.Confirms), so every tag up to the new one is then settled, and
// a nack or any other frame in between would not be the last frame. A
// group commit that confirms a whole batch thus costs the client one frame.
func (o *outbox) sendAck(channel uint16, tag uint64, multiple bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return net.ErrClosed
	}
	if at := o.ackAt; at >= 0 && o.ackCh == channel && at+ackFrameLen == len(o.buf) {
		f := o.buf[at:]
		if prev := binary.BigEndian.Uint64(f[amqp.FrameHeaderSize+4:]); tag > prev {
			binary.BigEndian.PutUint64(f[amqp.FrameHeaderSize+4:], tag)
			f[amqp.FrameHeaderSize+12] = 1 // multiple
			return nil
		}
	}
	at := len(o.buf)
	buf, err := amqp.AppendMethodFrame(outBuf(o.buf), channel, &amqp.BasicAck{DeliveryTag: tag, Multiple: multiple})
	if err != nil {
		return err
	}
	o.buf = buf
	o.ackAt, o.ackCh = at, channel
	o.wrote = true
	o.signal()
	return nil
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// sendMethod queues one method frame.
func (o *outbox) sendMethod(channel uint16, m amqp.Method) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return net.ErrClosed
	}
	buf, err := amqp.AppendMethodFrame(outBuf(o.buf), channel, m)
	if err != nil {
		return err
	}
	o.buf = buf
	o.wrote = true
	o.signal()
	return nil
}

// sendContent queues a method frame followed by its content header and
// body frames, atomically with respect to other senders.
func (o *outbox) sendContent(channel uint16, m amqp.Method, props, body []byte, frameMax uint32) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sendContentLocked(channel, m, props, body, frameMax)
}

func (o *outbox) sendContentLocked(channel uint16, m amqp.Method, props, body []byte, frameMax uint32) error {
	if o.closed {
		return net.ErrClosed
	}
	buf, err := amqp.AppendMethodFrame(outBuf(o.buf), channel, m)
	if err != nil {
		return err
	}
	buf = amqp.AppendHeaderFrame(buf, channel, 60, uint64(len(body)), props)
	buf = amqp.AppendBodyFrames(buf, channel, body, frameMax)
	o.buf = buf
	o.wrote = true
	if len(o.buf) >= outHighWater {
		o.full = true
	}
	o.signal()
	return nil
}

// isFull reports whether consumers should hold off. o.mu must be held.
func (o *outbox) isFullLocked() bool { return o.full || o.closed }

// close stops accepting frames; the writer flushes what is queued and exits.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

// writeLoop is the connection's writer goroutine. It flushes queued frames,
// sends heartbeats when the connection is otherwise idle, and calls drained
// when a full buffer has been written out.
func (o *outbox) writeLoop(nc net.Conn, heartbeat func() time.Duration, drained func()) {
	defer close(o.flushed)
	var tick *time.Ticker
	var deadline time.Time // the write deadline set last
	var tickC <-chan time.Time
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		if tick == nil {
			if hb := heartbeat(); hb > 0 {
				tick = time.NewTicker(hb / 2)
				tickC = tick.C
			}
		}
		select {
		case <-o.wake:
		case <-tickC:
			o.mu.Lock()
			if !o.wrote && !o.closed {
				o.buf = amqp.AppendHeartbeat(outBuf(o.buf))
			}
			o.wrote = false
			o.mu.Unlock()
		}
		o.mu.Lock()
		buf, wasFull, closed := o.buf, o.full, o.closed
		o.buf, o.full, o.ackAt = nil, false, -1
		o.mu.Unlock()
		if len(buf) > 0 {
			// A write may take 25 to 30 s; the deadline is moved only
			// every 5 s, not at every write.
			if now := time.Now(); deadline.Sub(now) < 25*time.Second {
				deadline = now.Add(30 * time.Second)
				nc.SetWriteDeadline(deadline)
			}
			if _, err := nc.Write(buf); err != nil {
				o.mu.Lock()
				o.closed = true
				o.buf = nil
				o.mu.Unlock()
				nc.Close() // unblocks the reader
				return
			}
		}
		putOutBuf(buf)
		select {
		case o.room <- struct{}{}:
		default:
		}
		if wasFull && drained != nil {
			drained()
		}
		if closed {
			o.mu.Lock()
			rest := len(o.buf) > 0
			o.mu.Unlock()
			if !rest {
				return
			}
		}
	}
}
