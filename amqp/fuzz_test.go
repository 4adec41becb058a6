package amqp

import (
	"bytes"
	"io"
	"runtime/metrics"
	"testing"
)

// allocSample reads the cumulative heap allocation counter without stopping
// the world, so fuzz targets can bound how much one decode allocates.
var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

func heapAllocs() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// checkAllocBound fails if f allocated far more than its input can justify.
// Decoded maps cost more than the bytes they came from, hence the factor; a
// length field trusted before checking would allocate gigabytes. The counter
// is process-wide and the fuzzing engine allocates concurrently, so f (which
// must be repeatable) is retried before failing.
func checkAllocBound(t *testing.T, in []byte, f func()) {
	t.Helper()
	limit := uint64(1<<16 + 256*len(in))
	var got uint64
	for try := 0; try < 3; try++ {
		before := heapAllocs()
		f()
		if got = heapAllocs() - before; got <= limit {
			return
		}
	}
	t.Fatalf("decoding %d bytes allocated %d bytes (limit %d)", len(in), got, limit)
}

func asError(t *testing.T, err error) {
	t.Helper()
	if _, ok := err.(*Error); !ok {
		t.Fatalf("error %v is %T, want *Error", err, err)
	}
}

func methodSeeds(f *testing.F) {
	for _, h := range []string{goldenConnectionStart, goldenBasicPublish, goldenBasicDeliver, goldenQueueDeclare,
		goldenConnectionClose, rabbitConnectionStart, rabbitChannelClose406} {
		b := unhex(f, h)
		f.Add(b[FrameHeaderSize : len(b)-1])
	}
	for i, m := range allMethods() {
		fillNonZero(m, i)
		b, err := AppendMethodFrame(nil, 0, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[FrameHeaderSize : len(b)-1])
	}
}

func FuzzDecodeMethod(f *testing.F) {
	methodSeeds(f)
	f.Add([]byte{0, 60, 3, 0xe7})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var m Method
		var err error
		checkAllocBound(t, payload, func() { m, err = DecodeMethod(payload) })
		if err != nil {
			asError(t, err)
			return
		}
		// Re-encoding is idempotent after one normalisation (unused bits,
		// table key order and duplicate keys are not preserved).
		b1, err := AppendMethodFrame(nil, 1, m)
		if err != nil {
			t.Fatalf("re-encoding decoded %s: %v", m.Name(), err)
		}
		m2, err := DecodeMethod(b1[FrameHeaderSize : len(b1)-1])
		if err != nil {
			t.Fatalf("decoding re-encoded %s: %v", m.Name(), err)
		}
		b2, _ := AppendMethodFrame(nil, 1, m2)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("%s not stable:\n%x\n%x", m.Name(), b1, b2)
		}
	})
}

func FuzzDecodeTable(f *testing.F) {
	f.Add(unhex(f, goldenTable))
	f.Add(nested(MaxTableDepth + 1))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 3, 1, 'a', 'Z'})
	f.Fuzz(func(t *testing.T, in []byte) {
		var tab Table
		var n int
		var err error
		checkAllocBound(t, in, func() { tab, n, err = DecodeTable(in) })
		// The allocation-free validator must agree with the decoder.
		verr := error(nil)
		if len(in) < 4 {
			verr = errTableTruncated
		} else if l := uint64(in[0])<<24 | uint64(in[1])<<16 | uint64(in[2])<<8 | uint64(in[3]); l > uint64(len(in)-4) {
			verr = errTableTruncated
		} else {
			verr = validateTableBody(in[4:4+l], 0)
		}
		if (err == nil) != (verr == nil) {
			t.Fatalf("decoder err %v, validator err %v", err, verr)
		}
		if err != nil {
			asError(t, err)
			return
		}
		if n < 4 || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		b1, err := AppendTable(nil, tab)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		tab2, n2, err := DecodeTable(b1)
		if err != nil || n2 != len(b1) {
			t.Fatalf("decoding re-encoded: %v (%d of %d)", err, n2, len(b1))
		}
		b2, _ := AppendTable(nil, tab2)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("not stable:\n%x\n%x", b1, b2)
		}
	})
}

func FuzzDecodeProperties(f *testing.F) {
	f.Add(unhex(f, goldenAllProps))
	if h := unhex(f, rabbitContentHeader); len(h) > 20 {
		f.Add(h[FrameHeaderSize+12 : len(h)-1])
	}
	f.Add([]byte{0x90, 0, 1, 'a', 2})
	f.Add([]byte{0, 1, 0, 0})
	f.Add([]byte{0x20, 0, 0, 0, 0, 4, 1, 'k', 'Z', 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p Properties
		var err error
		checkAllocBound(t, raw, func() { p, err = DecodeProperties(raw) })
		h, herr := DecodeContentHeader(append(make([]byte, 12), raw...))
		if (err == nil) != (herr == nil) {
			t.Fatalf("DecodeProperties err %v, DecodeContentHeader err %v", err, herr)
		}
		dm := PropDeliveryMode(raw)
		prio, prioOK := PropPriority(raw)
		exp, expOK := PropExpiration(raw)
		hdrs, hdrErr := PropHeaders(raw)
		if err != nil {
			asError(t, err)
			asError(t, herr)
			return
		}
		if dm != p.DeliveryMode || prio != p.Priority || prioOK != (p.Flags&FlagPriority != 0) ||
			exp != p.Expiration || expOK != (p.Flags&FlagExpiration != 0) || hdrErr != nil ||
			(hdrs == nil) != (p.Headers == nil) {
			t.Fatalf("accessors disagree with DecodeProperties: %+v", p)
		}
		checkIndex(t, h.Props, raw, p)
		b1, err := p.Append(nil)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		p2, err := DecodeProperties(b1)
		if err != nil {
			t.Fatalf("decoding re-encoded: %v", err)
		}
		if p2.Flags != p.Flags {
			t.Fatalf("flags %04x became %04x", p.Flags, p2.Flags)
		}
		b2, _ := p2.Append(nil)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("not stable:\n%x\n%x", b1, b2)
		}
	})
}

// chunkReader returns the stream in chunks whose sizes come from the input,
// exercising the reader's refill and growth paths.
type chunkReader struct {
	data   []byte
	chunks []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.chunks) > 0 {
		n = int(c.chunks[0]) + 1
		c.chunks = c.chunks[1:]
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func FuzzReadFrame(f *testing.F) {
	var stream []byte
	stream = AppendHeartbeat(stream)
	stream = append(stream, unhex(f, goldenBasicPublish)...)
	props, _ := func() ([]byte, error) { p := allProps(); return p.Append(nil) }()
	stream = AppendHeaderFrame(stream, 1, ClassBasic, 300, props)
	stream = AppendBodyFrames(stream, 1, bytes.Repeat([]byte{'b'}, 200), FrameMinSize)
	stream = AppendBodyFrames(stream, 1, bytes.Repeat([]byte{'c'}, 100), FrameMinSize)
	f.Add(stream, []byte{}, uint32(0))
	f.Add(stream, []byte{0, 7, 200, 1}, uint32(8192))
	f.Add([]byte{3, 0, 1, 0xff, 0xff, 0xff, 0xff}, []byte{}, uint32(1<<17-1))
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0xce}, []byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, data, chunks []byte, frameMax uint32) {
		// Keep buffers small so executions (and minimisation) stay fast;
		// larger limits run the same code.
		frameMax %= 1 << 17
		fr := NewFrameReader(&chunkReader{data: data, chunks: chunks}, 64)
		fr.SetMaxFrameSize(frameMax)
		limit := int(frameMax)
		if limit == 0 {
			limit = FrameMinSize
		}
		for {
			fm, err := fr.ReadFrame() // allocation is bounded by the buffer check below
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil {
				asError(t, err)
				return
			}
			if len(fm.Payload)+FrameOverhead > limit {
				t.Fatalf("frame of %d bytes accepted with limit %d", len(fm.Payload)+FrameOverhead, limit)
			}
			if len(fr.buf) > max(limit, FrameMinSize) {
				t.Fatalf("buffer grew to %d with limit %d", len(fr.buf), limit)
			}
			switch fm.Type {
			case FrameMethod:
				if _, err := DecodeMethod(fm.Payload); err != nil {
					asError(t, err)
				}
			case FrameHeader:
				if h, err := DecodeContentHeader(fm.Payload); err != nil {
					asError(t, err)
				} else if _, err := DecodeProperties(h.RawProps); err != nil {
					t.Fatalf("header accepted but properties fail: %v", err)
				}
			}
		}
	})
}

// checkIndex fails unless x, the index of raw, agrees with p, its
// decoding.
func checkIndex(t *testing.T, x PropIndex, raw []byte, p Properties) {
	t.Helper()
	str := func(b []byte, ok bool, want string, flag uint16) bool {
		return ok == (p.Flags&flag != 0) && (!ok || string(b) == want)
	}
	rt, rtOK := x.ReplyTo(raw)
	exp, expOK := x.Expiration(raw)
	uid, uidOK := x.UserID(raw)
	hdrs, err := x.Headers(raw)
	if x.Flags != p.Flags || x.DeliveryMode != p.DeliveryMode || x.Priority != p.Priority ||
		!str(rt, rtOK, p.ReplyTo, FlagReplyTo) || !str(exp, expOK, p.Expiration, FlagExpiration) ||
		!str(uid, uidOK, p.UserID, FlagUserID) || err != nil || (hdrs == nil) != (p.Headers == nil) || len(hdrs) != len(p.Headers) {
		t.Fatalf("index %+v disagrees with %+v (headers %v, %v)", x, p, hdrs, err)
	}
}
