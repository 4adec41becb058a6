package server

import (
	"net"
	"sync"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// outHighWater is how many bytes may wait in a connection's outbound buffer
// before consumers on it stop being offered messages.
const outHighWater = 1 << 20

// outbox is a connection's outbound buffer. Any goroutine appends frames;
// only the writer goroutine touches the socket, flushing everything queued
// in one write.
type outbox struct {
	mu      sync.Mutex
	buf     []byte
	full    bool // buf passed outHighWater; the writer kicks consumers when it drains
	closed  bool
	wrote   bool // something was queued since the last heartbeat tick
	wake    chan struct{}
	room    chan struct{} // signalled after each write, for waitRoom
	flushed chan struct{} // closed when the writer has exited
}

func newOutbox() *outbox {
	return &outbox{wake: make(chan struct{}, 1), room: make(chan struct{}, 1), flushed: make(chan struct{})}
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
	buf, err := amqp.AppendMethodFrame(o.buf, channel, m)
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
	buf, err := amqp.AppendMethodFrame(o.buf, channel, m)
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
	var spare []byte
	var tick *time.Ticker
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
				o.buf = amqp.AppendHeartbeat(o.buf)
			}
			o.wrote = false
			o.mu.Unlock()
		}
		o.mu.Lock()
		buf, wasFull, closed := o.buf, o.full, o.closed
		o.buf, o.full = spare[:0], false
		o.mu.Unlock()
		if len(buf) > 0 {
			nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := nc.Write(buf); err != nil {
				o.mu.Lock()
				o.closed = true
				o.buf = nil
				o.mu.Unlock()
				nc.Close() // unblocks the reader
				return
			}
		}
		if cap(buf) > 4*outHighWater {
			buf = nil
		}
		spare = buf
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
