package server

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
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
//
// The writer runs only while frames wait: the first frame queued into an
// empty outbox starts it, and it exits once it finds the buffer empty, so
// an idle connection has no writer goroutine (nor its stack). At most one
// writer runs at a time (writing, under mu), so frames go out in the order
// they were queued. Heartbeats come from a timer that queues a heartbeat
// frame like any other sender.
type outbox struct {
	mu     sync.Mutex
	buf    []byte
	full   bool // buf passed outHighWater; the writer kicks consumers when it drains
	closed bool
	wrote  bool // something was queued since the last heartbeat tick
	// ackAt is where the last basic.ack that sendAck queued starts in buf
	// (-1: none since the writer took the buffer); ackCh is its channel.
	ackAt int
	ackCh uint16
	// writing is set while a writer goroutine runs; exited once flushed is
	// closed.
	writing bool
	exited  bool
	// nc and drained are set by start; until then frames only queue. raw
	// is nc's socket when it is a plain one (not TLS), for flushInline.
	nc      net.Conn
	raw     syscall.RawConn
	drained func()
	// deferredTo is the flushSet that was last handed this outbox's write
	// (see deferLocked).
	deferredTo *flushSet
	// deadline is the write deadline set last; the writer's own (writers
	// hand it over through mu).
	deadline time.Time
	// hb sends heartbeats every hbEvery when the connection is otherwise
	// quiet; nil while heartbeats are off.
	hb      *time.Timer
	hbEvery time.Duration
	room    chan struct{} // signalled after each write, for waitRoom
	flushed chan struct{} // closed when the outbox is closed and everything queued was written (or failed)
	// sent and writes count the bytes the socket took and the writes that
	// took any (RabbitMQ's send_oct and send_cnt), added once per write.
	sent, writes atomic.Uint64
}

// count adds a write of n bytes to the counters.
func (o *outbox) count(n int) {
	if n > 0 {
		o.sent.Add(uint64(n))
		o.writes.Add(1)
	}
}

// pendingBytes is how much waits in the buffer (RabbitMQ's send_pend).
func (o *outbox) pendingBytes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}

func newOutbox() *outbox {
	return &outbox{ackAt: -1, room: make(chan struct{}, 1), flushed: make(chan struct{})}
}

// start lets frames go out on nc, queued ones included. drained, if not
// nil, runs on the writer goroutine when a full buffer has been written
// out.
func (o *outbox) start(nc net.Conn, drained func()) {
	o.mu.Lock()
	o.nc, o.drained = nc, drained
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			o.raw = rc
		}
	}
	if len(o.buf) > 0 || o.closed {
		o.signal()
	}
	o.mu.Unlock()
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

// signal starts the writer unless it runs already or the outbox was not
// started; once the outbox is closed and no writer remains, it closes
// flushed instead. o.mu must be held.
func (o *outbox) signal() {
	if o.writing || o.exited || o.nc == nil {
		return
	}
	if len(o.buf) == 0 {
		if o.closed {
			o.exited = true
			close(o.flushed)
		}
		return
	}
	o.writing = true
	go o.writeLoop()
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
	if err := o.appendContentLocked(channel, m, props, body, frameMax); err != nil {
		return err
	}
	o.signal()
	return nil
}

// appendContentLocked is sendContentLocked without waking a writer: the
// caller calls signal or deferLocked.
func (o *outbox) appendContentLocked(channel uint16, m amqp.Method, props, body []byte, frameMax uint32) error {
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
	return nil
}

// isFull reports whether consumers should hold off. o.mu must be held.
func (o *outbox) isFullLocked() bool { return o.full || o.closed }

// close stops accepting frames; the writer flushes what is queued and
// exits, and flushed is closed.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	if o.hb != nil {
		o.hb.Stop()
	}
	o.signal()
	o.mu.Unlock()
}

// setHeartbeat starts heartbeats: a heartbeat frame goes out every d/2
// unless other frames did. Once set, the interval does not change.
func (o *outbox) setHeartbeat(d time.Duration) {
	if d <= 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.hb != nil {
		return
	}
	o.hbEvery = d / 2
	// The timer's function takes o.mu, so it sees o.hb set.
	o.hb = time.AfterFunc(o.hbEvery, o.heartbeatTick)
}

// heartbeatTick runs on the heartbeat timer's goroutine.
func (o *outbox) heartbeatTick() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	if !o.wrote {
		o.buf = amqp.AppendHeartbeat(outBuf(o.buf))
		o.signal()
	}
	o.wrote = false
	o.hb.Reset(o.hbEvery)
}

// writeLoop is the connection's writer goroutine, started by signal. It
// writes out what is queued until the buffer is empty, and calls drained
// when a full buffer has been written out. On a write error it closes the
// outbox and the socket (which unblocks the reader).
func (o *outbox) writeLoop() {
	for {
		o.mu.Lock()
		buf, wasFull := o.buf, o.full
		o.buf, o.full, o.ackAt = nil, false, -1
		if len(buf) == 0 {
			o.writing = false
			o.signal() // closes flushed if the outbox is closed
			o.mu.Unlock()
			return
		}
		nc, drained := o.nc, o.drained
		o.mu.Unlock()
		o.moveDeadline(nc)
		n, err := nc.Write(buf)
		o.count(n)
		if err != nil {
			o.writeFailed(nc)
			return
		}
		o.written(buf, wasFull, drained)
	}
}

// moveDeadline keeps the write deadline 25 to 30 s ahead: it is moved only
// every 5 s, not at every write. Only the goroutine writing calls it.
func (o *outbox) moveDeadline(nc net.Conn) {
	if now := time.Now(); o.deadline.Sub(now) < 25*time.Second {
		o.deadline = now.Add(30 * time.Second)
		nc.SetWriteDeadline(o.deadline)
	}
}

// writeFailed ends the outbox after a failed write, and the socket, which
// unblocks the connection's reader.
func (o *outbox) writeFailed(nc net.Conn) {
	o.mu.Lock()
	o.closed = true
	o.buf = nil
	if o.hb != nil {
		o.hb.Stop()
	}
	o.writing = false
	o.signal()
	o.mu.Unlock()
	nc.Close()
}

// written recycles a buffer that went out whole, wakes waitRoom, and kicks
// the consumers when the buffer had been full.
func (o *outbox) written(buf []byte, wasFull bool, drained func()) {
	putOutBuf(buf)
	select {
	case o.room <- struct{}{}:
	default:
	}
	if wasFull && drained != nil {
		drained()
	}
}

// A flushSet lets a connection's reader write other connections' sockets
// itself. While it handles a burst of publishes, the deliveries it makes go
// into the consumers' outboxes without starting their writers
// (deferLocked); when the burst ends (no whole frame left in its read
// buffer, another kind of frame, a wait), it flushes them (flush): each
// outbox's frames go out in one non-blocking write on this goroutine,
// and only what the socket does not take is left to a writer goroutine.
// At low rates that saves a goroutine wake-up per message (and its
// latency); under load the writes stay batched, one per burst.
type flushSet struct {
	obs []*outbox
}

// deferLocked leaves o's write to fs instead of starting a writer, when it
// can: o's socket is plain and no writer is running (one would take the
// frames anyway). o.mu must be held.
func (o *outbox) deferLocked(fs *flushSet) {
	if fs == nil || o.raw == nil || o.writing || o.exited || o.closed {
		o.signal()
		return
	}
	if o.deferredTo != fs {
		o.deferredTo = fs
		fs.obs = append(fs.obs, o)
	}
}

// pending reports whether flush has work.
func (fs *flushSet) pending() bool { return len(fs.obs) > 0 }

// flush writes out every outbox deferred to fs.
func (fs *flushSet) flush() {
	for i, o := range fs.obs {
		o.flushInline(fs)
		fs.obs[i] = nil
	}
	fs.obs = fs.obs[:0]
}

// flushInline writes what o holds with one non-blocking write on the
// calling goroutine, unless a writer runs; what the socket does not take
// goes back in front of the buffer, for a writer goroutine.
func (o *outbox) flushInline(fs *flushSet) {
	o.mu.Lock()
	if o.deferredTo == fs {
		o.deferredTo = nil
	}
	if o.writing || o.exited || o.nc == nil || o.raw == nil || len(o.buf) == 0 || o.closed {
		o.signal()
		o.mu.Unlock()
		return
	}
	buf, wasFull := o.buf, o.full
	o.buf, o.full, o.ackAt = nil, false, -1
	o.writing = true // this goroutine is the writer until it is done
	raw, nc, drained := o.raw, o.nc, o.drained
	o.mu.Unlock()

	o.moveDeadline(nc)
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), buf)
		return true // one attempt: never wait for the socket here
	})
	if err == nil {
		err = werr
	}
	if n < 0 {
		n = 0
	}
	o.count(n)
	if err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR) {
		o.writeFailed(nc)
		return
	}
	o.mu.Lock()
	o.writing = false
	if n < len(buf) {
		// The rest goes first, then whatever was queued meanwhile.
		rest := append(outBuf(nil), buf[n:]...)
		o.buf = append(rest, o.buf...)
		o.ackAt = -1 // offsets into the old buffer are void
		o.full = o.full || wasFull || len(o.buf) >= outHighWater
		putOutBuf(buf)
		o.signal()
		o.mu.Unlock()
		return
	}
	o.signal() // frames queued meanwhile, or close
	o.mu.Unlock()
	o.written(buf, wasFull, drained)
}
