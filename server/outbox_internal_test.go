package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// TestSendAckCoalesces: a publisher confirm merges into the unsent ack
// just before it on the same channel (multiple set), and only then.
func TestSendAckCoalesces(t *testing.T) {
	o := newOutbox()
	o.sendAck(1, 5, false)
	o.sendAck(1, 6, false)  // merged: ack 6 multiple
	o.sendAck(1, 9, true)   // merged: ack 9 multiple
	o.sendAck(2, 10, false) // other channel
	o.sendAck(1, 11, false) // not last frame: new
	o.sendMethod(1, &amqp.BasicNack{DeliveryTag: 12})
	o.sendAck(1, 13, false) // after a nack: new
	o.sendAck(1, 13, false) // not above: new frame, as sent
	o.buf = amqp.AppendHeartbeat(o.buf)
	o.sendAck(1, 14, false) // after a heartbeat: new

	got := framesOf(t, o.buf)
	// The writer takes the buffer: an ack after that starts a new frame.
	o.buf, o.ackAt = o.buf[:0], -1
	o.sendAck(1, 15, false)
	got = append(got, framesOf(t, o.buf)...)
	want := "1:ack:9:true 2:ack:10:false 1:ack:11:false 1:nack:12:false 1:ack:13:false 1:ack:13:false 0:heartbeat 1:ack:14:false 1:ack:15:false"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("frames\n%s\nwant\n%s", s, want)
	}
}

func framesOf(t *testing.T, b []byte) []string {
	t.Helper()
	fr := amqp.NewFrameReader(bytes.NewReader(b), 0)
	var out []string
	for fr.Buffered() > 0 || len(out) == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, frameName(t, f))
	}
	return out
}

// readFrames reads n frames and names them as framesOf does.
func readFrames(t *testing.T, fr *amqp.FrameReader, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, frameName(t, f))
	}
	return out
}

// frameName is "channel:ack|nack:tag:multiple" or "0:heartbeat".
func frameName(t *testing.T, f amqp.Frame) string {
	t.Helper()
	if f.Type == amqp.FrameHeartbeat {
		return "0:heartbeat"
	}
	m, err := amqp.DecodeMethod(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	switch m := m.(type) {
	case *amqp.BasicAck:
		return fmt.Sprintf("%d:ack:%d:%v", f.Channel, m.DeliveryTag, m.Multiple)
	case *amqp.BasicNack:
		return fmt.Sprintf("%d:nack:%d:%v", f.Channel, m.DeliveryTag, m.Multiple)
	}
	t.Fatalf("unexpected %s", m.Name())
	return ""
}

// waitUntil fails the test unless cond holds within five seconds; for
// state another goroutine reaches after the event a test can observe.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (o *outbox) writerRunning() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writing
}

// TestOutboxWriterRunsWhileFramesWait: the writer starts when a frame is
// queued and exits once the buffer is empty; frames queued before start
// and from concurrent senders go out whole and in each sender's order;
// close flushes what is queued before flushed is closed.
func TestOutboxWriterRunsWhileFramesWait(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	o := newOutbox()
	o.sendAck(9, 1, false)
	if o.writerRunning() {
		t.Fatal("writer running before start")
	}
	o.start(a, nil)
	fr := amqp.NewFrameReader(b, 0)
	if got := readFrames(t, fr, 1); got[0] != "9:ack:1:false" {
		t.Fatalf("got %v, want the ack queued before start", got)
	}
	waitUntil(t, "the writer exits on an empty buffer", func() bool { return !o.writerRunning() })

	// Four senders, 200 acks each on their own channel; nack frames
	// between them keep acks from merging.
	const senders, each = 4, 200
	var wg sync.WaitGroup
	for s := 1; s <= senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				o.sendMethod(uint16(s), &amqp.BasicNack{DeliveryTag: uint64(i)})
			}
		}()
	}
	last := map[uint16]uint64{}
	for _, f := range readFrames(t, fr, senders*each) {
		var ch uint16
		var tag uint64
		var multiple bool
		if _, err := fmt.Sscanf(f, "%d:nack:%d:%t", &ch, &tag, &multiple); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if tag != last[ch]+1 {
			t.Fatalf("channel %d: nack %d after %d", ch, tag, last[ch])
		}
		last[ch] = tag
	}
	wg.Wait()
	waitUntil(t, "the writer exits on an empty buffer", func() bool { return !o.writerRunning() })

	// close: what is queued is written first, then flushed is closed.
	o.sendAck(3, 7, false)
	o.close()
	select {
	case <-o.flushed:
		t.Fatal("flushed before the queued frame was written")
	default: // net.Pipe: the write waits for this read
	}
	if got := readFrames(t, fr, 1); got[0] != "3:ack:7:false" {
		t.Fatalf("got %v after close", got)
	}
	select {
	case <-o.flushed:
	case <-time.After(5 * time.Second):
		t.Fatal("flushed not closed after the last write")
	}
	if err := o.sendAck(3, 8, false); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("send after close: %v, want net.ErrClosed", err)
	}
}

// TestOutboxCloseIdle: closing an outbox with nothing queued closes
// flushed at once; no writer is needed.
func TestOutboxCloseIdle(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	o := newOutbox()
	o.start(a, nil)
	o.close()
	select {
	case <-o.flushed:
	default:
		t.Fatal("flushed not closed")
	}
	o.close() // twice is harmless
}

// TestOutboxWriteErrorCloses: a failed write closes the outbox and the
// socket, and flushed.
func TestOutboxWriteErrorCloses(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	b.Close()
	o := newOutbox()
	o.start(a, nil)
	if err := o.sendAck(1, 1, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-o.flushed:
	case <-time.After(5 * time.Second):
		t.Fatal("flushed not closed after a failed write")
	}
	if err := o.sendAck(1, 2, false); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("send after a failed write: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte{0}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("socket write after a failed write: %v, want it closed", err)
	}
	o.close()
}

// TestOutboxHeartbeat: a quiet outbox sends heartbeat frames at half the
// negotiated interval; close stops the timer.
func TestOutboxHeartbeat(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	o := newOutbox()
	o.start(a, nil)
	o.setHeartbeat(100 * time.Millisecond)
	fr := amqp.NewFrameReader(b, 0)
	for range 2 {
		if got := readFrames(t, fr, 1); got[0] != "0:heartbeat" {
			t.Fatalf("got %v, want a heartbeat", got)
		}
	}
	o.close()
	o.mu.Lock()
	stopped := !o.hb.Stop() // false: already stopped (or firing, and then it sees closed)
	o.mu.Unlock()
	if !stopped {
		t.Fatal("heartbeat timer still armed after close")
	}
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// deferNack queues a nack frame and leaves its write to fs, as a
// consumer's Deliver does for a publisher's reader.
func (o *outbox) deferNack(fs *flushSet, tag uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	buf, _ := amqp.AppendMethodFrame(outBuf(o.buf), 1, &amqp.BasicNack{DeliveryTag: tag})
	o.buf = buf
	o.deferLocked(fs)
}

// TestOutboxFlushInline: frames deferred to a flushSet stay queued, with
// no writer started, until the set is flushed; the flush writes them on
// the caller's goroutine.
func TestOutboxFlushInline(t *testing.T) {
	a, b := tcpPair(t)
	o := newOutbox()
	o.start(a, nil)
	var fs flushSet
	for tag := uint64(1); tag <= 3; tag++ {
		o.deferNack(&fs, tag)
	}
	if len(fs.obs) != 1 {
		t.Fatalf("flushSet holds %d entries, want the outbox once", len(fs.obs))
	}
	if o.writerRunning() {
		t.Fatal("a deferred outbox started its writer")
	}
	o.mu.Lock()
	queued := len(o.buf)
	o.mu.Unlock()
	if queued == 0 {
		t.Fatal("frames were written before the flush")
	}
	fs.flush()
	o.mu.Lock()
	left, writing := len(o.buf), o.writing
	o.mu.Unlock()
	if left != 0 || writing || fs.pending() {
		t.Fatalf("after flush: %d bytes queued, writing %v, set pending %v", left, writing, fs.pending())
	}
	fr := amqp.NewFrameReader(b, 0)
	if got := strings.Join(readFrames(t, fr, 3), " "); got != "1:nack:1:false 1:nack:2:false 1:nack:3:false" {
		t.Fatalf("read %s", got)
	}
}

// TestOutboxFlushInlinePartial: when the socket takes only part of what is
// deferred, the rest goes to a writer goroutine, ahead of frames queued
// later, and every frame arrives once, in order.
func TestOutboxFlushInlinePartial(t *testing.T) {
	a, b := tcpPair(t)
	a.(*net.TCPConn).SetWriteBuffer(16 << 10)
	b.(*net.TCPConn).SetReadBuffer(16 << 10)
	o := newOutbox()
	o.start(a, nil)
	var fs flushSet
	// Far more than the socket buffers hold while nobody reads.
	const n = 200000
	for tag := uint64(1); tag <= n/2; tag++ {
		o.deferNack(&fs, tag)
	}
	fs.flush()
	// What the socket did not take went to a writer goroutine (which may
	// already have taken it out of buf, so buf is no measure).
	if !o.writerRunning() {
		t.Fatal("no writer after the inline write: the socket took everything, and the test does not reach a partial write")
	}
	for tag := uint64(n/2 + 1); tag <= n; tag++ {
		o.sendMethod(1, &amqp.BasicNack{DeliveryTag: tag})
	}
	fr := amqp.NewFrameReader(b, 0)
	for i, f := range readFrames(t, fr, n) {
		if want := fmt.Sprintf("1:nack:%d:false", i+1); f != want {
			t.Fatalf("frame %d is %s, want %s", i, f, want)
		}
	}
	waitUntil(t, "the writer exits on an empty buffer", func() bool { return !o.writerRunning() })
}

// TestOutboxDeferredThenClosed: an outbox closed while its write is
// deferred still writes what was queued and closes flushed; the later
// flush is a no-op.
func TestOutboxDeferredThenClosed(t *testing.T) {
	a, b := tcpPair(t)
	o := newOutbox()
	o.start(a, nil)
	var fs flushSet
	o.deferNack(&fs, 1)
	o.close()
	fr := amqp.NewFrameReader(b, 0)
	if got := readFrames(t, fr, 1); got[0] != "1:nack:1:false" {
		t.Fatalf("read %v", got)
	}
	select {
	case <-o.flushed:
	case <-time.After(5 * time.Second):
		t.Fatal("flushed not closed")
	}
	fs.flush()
}
