package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Frame layout sizes.
const (
	FrameHeaderSize = 7 // type(1) + channel(2) + size(4)
	FrameOverhead   = 8 // FrameHeaderSize + frame-end(1)
)

// ProtocolHeader is the 8 bytes a client sends first.
var ProtocolHeader = []byte("AMQP\x00\x00\x09\x01")

// Frame is one decoded frame. Payload aliases the FrameReader's buffer and is
// valid only until the next call to ReadFrame.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// FrameReader reads frames through an internal buffer, so many small frames
// cost one read syscall. The buffer grows for large frames, never beyond the
// maximum frame size, and the size field is checked before growing.
//
// Over a LazyReader, the FrameReader gives its buffer back whenever nothing
// is buffered and takes one again only once input has arrived, so an idle
// connection holds no read buffer.
//
// A FrameReader is not safe for concurrent use, but for BytesRead and
// Reads, which any goroutine may call.
type FrameReader struct {
	r        io.Reader
	lazy     LazyReader    // r, when it is one
	size     int           // the buffer's initial size
	buf      []byte        // len(buf) is the capacity in use; nil while released
	start    int           // first unconsumed byte
	end      int           // end of valid data
	maxFrame uint32        // total frame size limit incl. overhead; 0 = FrameMinSize
	err      error         // read error held back while buffered bytes remain
	read     atomic.Uint64 // bytes read from r, ever
	reads    atomic.Uint64 // calls to r's Read or ReadLazy that returned bytes
}

// LazyReader is a reader that needs a buffer only while input is there.
// ReadLazy reads like Read into the buffer take returns; when no input is
// available yet, it calls drop (the buffer is no longer needed), waits, and
// calls take again once input has arrived. It returns io.EOF at the end of
// the input.
type LazyReader interface {
	io.Reader
	ReadLazy(take func() []byte, drop func()) (int, error)
}

// bufPools holds released buffers by size.
var bufPools sync.Map // int -> *sync.Pool of *[]byte

func getBuf(size int) []byte {
	if p, ok := bufPools.Load(size); ok {
		if b, ok := p.(*sync.Pool).Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

func putBuf(b []byte) {
	p, ok := bufPools.Load(len(b))
	if !ok {
		p, _ = bufPools.LoadOrStore(len(b), &sync.Pool{})
	}
	p.(*sync.Pool).Put(&b)
}

// NewFrameReader returns a reader with an initial buffer of bufSize bytes
// (at least FrameMinSize).
func NewFrameReader(r io.Reader, bufSize int) *FrameReader {
	if bufSize < FrameMinSize {
		bufSize = FrameMinSize
	}
	fr := &FrameReader{size: bufSize}
	fr.SetReader(r)
	return fr
}

// SetReader replaces the underlying reader; what is buffered stays. Over a
// LazyReader the buffer is released whenever it runs empty.
func (fr *FrameReader) SetReader(r io.Reader) {
	fr.r = r
	fr.lazy, _ = r.(LazyReader)
}

// SetMaxFrameSize sets the largest accepted frame, including the 8 bytes of
// overhead, as negotiated by frame_max. 0 means FrameMinSize (the limit in
// force before connection.tune-ok).
func (fr *FrameReader) SetMaxFrameSize(n uint32) { fr.maxFrame = n }

func (fr *FrameReader) limit() uint64 {
	if fr.maxFrame == 0 {
		return FrameMinSize
	}
	return uint64(fr.maxFrame)
}

// BytesRead returns how many bytes were read from the underlying reader
// so far, whole frames or not: a slow peer in the middle of a large frame
// is making progress.
func (fr *FrameReader) BytesRead() uint64 { return fr.read.Load() }

// Reads returns how many reads from the underlying reader returned bytes
// (RabbitMQ's recv_cnt counts the socket's packets; a read takes what has
// arrived, one packet or many).
func (fr *FrameReader) Reads() uint64 { return fr.reads.Load() }

// count adds one read of k bytes to the counters: two atomic adds per
// read of the underlying reader, not per frame.
func (fr *FrameReader) count(k int) {
	if k > 0 {
		fr.read.Add(uint64(k))
		fr.reads.Add(1)
	}
}

// Buffered returns the number of bytes read from the underlying reader but not
// yet returned as frames.
func (fr *FrameReader) Buffered() int { return fr.end - fr.start }

// HasFrame reports whether a whole frame is buffered, so that ReadFrame
// returns without reading from the underlying reader.
func (fr *FrameReader) HasFrame() bool {
	n := fr.end - fr.start
	if n < FrameHeaderSize {
		return false
	}
	size := uint64(binary.BigEndian.Uint32(fr.buf[fr.start+3:]))
	return uint64(n) >= FrameHeaderSize+size+1
}

// ReadProtocolHeader reads the 8-byte protocol header through the buffer, so
// frames pipelined behind it are not lost and its bytes are counted. The
// caller validates the bytes.
func (fr *FrameReader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	if err := fr.fill(8); err != nil {
		return h, err
	}
	copy(h[:], fr.buf[fr.start:])
	fr.start += 8
	return h, nil
}

// ReadFrame reads the next frame. Errors from the underlying reader are
// returned as they are (io.EOF at a frame boundary, io.ErrUnexpectedEOF
// inside a frame); after a timeout ReadFrame may be called again. Protocol violations are *Error with code FrameError: an
// unknown frame type, a size above the limit, or a bad frame-end octet.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if err := fr.fill(FrameHeaderSize); err != nil {
		return Frame{}, err
	}
	h := fr.buf[fr.start:]
	typ := h[0]
	channel := binary.BigEndian.Uint16(h[1:])
	size := binary.BigEndian.Uint32(h[3:])
	switch typ {
	case FrameMethod, FrameHeader, FrameBody, FrameHeartbeat:
	default:
		return Frame{}, Errorf(FrameError, 0, 0, "unknown frame type %d", typ)
	}
	if total := uint64(size) + FrameOverhead; total > fr.limit() {
		return Frame{}, Errorf(FrameError, 0, 0, "frame size %d exceeds frame_max %d", total, fr.limit())
	}
	total := int(size) + FrameOverhead
	if err := fr.fill(total); err != nil {
		return Frame{}, err
	}
	f := fr.buf[fr.start : fr.start+total]
	if f[total-1] != FrameEnd {
		return Frame{}, Errorf(FrameError, 0, 0, "frame-end octet is 0x%02x, want 0xce", f[total-1])
	}
	fr.start += total
	return Frame{Type: typ, Channel: channel, Payload: f[FrameHeaderSize : total-1 : total-1]}, nil
}

// fill ensures at least n bytes are buffered. n is bounded by the frame
// limit, which callers check first.
func (fr *FrameReader) fill(n int) error {
	if fr.end-fr.start >= n {
		return nil
	}
	if fr.start == fr.end {
		// Nothing buffered: start again at the head of the buffer, or,
		// over a LazyReader, give the buffer back until input arrives.
		fr.start, fr.end = 0, 0
		if fr.lazy != nil && fr.err == nil {
			k, err := fr.lazy.ReadLazy(func() []byte {
				fr.reserve(n)
				return fr.buf[fr.end:]
			}, fr.release)
			fr.end += k
			fr.count(k)
			if err != nil {
				fr.err = err
				if fr.end-fr.start >= n {
					return nil
				}
				return fr.takeErr()
			}
		}
	}
	fr.reserve(n)
	for empty := 0; fr.end-fr.start < n; {
		if fr.err != nil {
			return fr.takeErr()
		}
		k, err := fr.r.Read(fr.buf[fr.end:])
		fr.end += k
		fr.count(k)
		if k == 0 && err == nil {
			if empty++; empty == 100 { // as bufio does
				return io.ErrNoProgress
			}
		}
		if err != nil {
			fr.err = err
			if fr.end-fr.start >= n {
				return nil // report the error once the buffer runs dry
			}
			return fr.takeErr()
		}
	}
	return nil
}

// reserve makes room for n bytes from fr.start, taking, growing or
// compacting the buffer.
func (fr *FrameReader) reserve(n int) {
	if fr.buf == nil {
		fr.buf = getBuf(fr.size)
	}
	if len(fr.buf)-fr.start >= n {
		return
	}
	if n > len(fr.buf) {
		size := 2 * len(fr.buf)
		if lim := fr.limit(); uint64(size) > lim {
			size = int(lim)
		}
		if size < n {
			size = n
		}
		nb := make([]byte, size)
		fr.end = copy(nb, fr.buf[fr.start:fr.end])
		if len(fr.buf) == fr.size {
			putBuf(fr.buf)
		}
		fr.buf = nb
	} else {
		fr.end = copy(fr.buf, fr.buf[fr.start:fr.end])
	}
	fr.start = 0
}

// release gives an empty buffer back: one of the initial size to the pool
// for the next reader, a grown one to the garbage collector.
func (fr *FrameReader) release() {
	if fr.buf == nil {
		return
	}
	if len(fr.buf) == fr.size {
		putBuf(fr.buf)
	}
	fr.buf = nil
	fr.start, fr.end = 0, 0
}

// takeErr returns the held read error once, as io.ErrUnexpectedEOF if the
// stream ended inside a frame. It is not sticky: after a read deadline, say,
// the caller may call ReadFrame again and a partial frame is kept.
func (fr *FrameReader) takeErr() error {
	err := fr.err
	fr.err = nil
	if errors.Is(err, io.EOF) && fr.end != fr.start {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendHeartbeat appends a heartbeat frame (channel 0, empty payload).
func AppendHeartbeat(dst []byte) []byte {
	return append(dst, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// AppendHeaderFrame appends a content header frame. rawProps is the property
// flags and property list exactly as received (or from Properties.Append).
func AppendHeaderFrame(dst []byte, channel uint16, classID uint16, bodySize uint64, rawProps []byte) []byte {
	dst = append(dst, FrameHeader, byte(channel>>8), byte(channel))
	dst = appendU32(dst, uint32(12+len(rawProps)))
	dst = appendU16(dst, classID)
	dst = appendU16(dst, 0) // weight
	dst = appendU64(dst, bodySize)
	dst = append(dst, rawProps...)
	return append(dst, FrameEnd)
}

// AppendBodyFrames appends body as content body frames, each at most frameMax
// bytes including the 8 bytes of overhead. frameMax 0 means no limit; values
// below FrameMinSize are raised to FrameMinSize. An empty body appends
// nothing.
func AppendBodyFrames(dst []byte, channel uint16, body []byte, frameMax uint32) []byte {
	chunk := len(body)
	if frameMax != 0 {
		if frameMax < FrameMinSize {
			frameMax = FrameMinSize
		}
		if c := uint64(frameMax - FrameOverhead); c < uint64(chunk) {
			chunk = int(c)
		}
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		dst = append(dst, FrameBody, byte(channel>>8), byte(channel))
		dst = appendU32(dst, uint32(n))
		dst = append(dst, body[:n]...)
		dst = append(dst, FrameEnd)
		body = body[n:]
	}
	return dst
}

// String describes the frame for logs.
func (f Frame) String() string {
	return fmt.Sprintf("frame{type=%d channel=%d size=%d}", f.Type, f.Channel, len(f.Payload))
}
