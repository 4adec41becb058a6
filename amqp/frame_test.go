package amqp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestHeartbeatGolden(t *testing.T) {
	if got := AppendHeartbeat(nil); !bytes.Equal(got, unhex(t, "08 0000 00000000 ce")) {
		t.Fatalf("heartbeat %x", got)
	}
}

func TestHeaderFrameGolden(t *testing.T) {
	props := unhex(t, "9000 0a 746578742f706c61696e 02") // content-type "text/plain", delivery-mode 2
	want := unhex(t, `
02 0005 0000001a       // header frame, channel 5, size 26
003c 0000              // class basic, weight 0
0000000000010000       // body size 65536
9000 0a 746578742f706c61696e 02
ce`)
	got := AppendHeaderFrame(nil, 5, ClassBasic, 65536, props)
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
	f, err := NewFrameReader(bytes.NewReader(got), 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	h, err := DecodeContentHeader(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.BodySize != 65536 || !bytes.Equal(h.RawProps, props) {
		t.Fatalf("header %+v", h)
	}
}

func TestBodyFrames(t *testing.T) {
	if got := AppendBodyFrames(nil, 1, nil, 4096); len(got) != 0 {
		t.Fatal("empty body should produce no frames")
	}
	want := unhex(t, "03 0001 00000003 616263 ce")
	if got := AppendBodyFrames(nil, 1, []byte("abc"), 4096); !bytes.Equal(got, want) {
		t.Fatalf("got %x", got)
	}
	body := bytes.Repeat([]byte("0123456789"), 1000) // 10000 bytes
	for _, fm := range []uint32{0, 1, FrameMinSize, 5000, 10008, 10007, 131072} {
		out := AppendBodyFrames([]byte("pre"), 9, body, fm)
		fr := NewFrameReader(bytes.NewReader(out[3:]), 0)
		fr.SetMaxFrameSize(1 << 20)
		var got []byte
		limit := fm
		if limit != 0 && limit < FrameMinSize {
			limit = FrameMinSize
		}
		for {
			f, err := fr.ReadFrame()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != FrameBody || f.Channel != 9 {
				t.Fatalf("frame %v", f)
			}
			if limit != 0 && uint32(len(f.Payload)+FrameOverhead) > limit {
				t.Fatalf("frameMax %d: frame of %d bytes", fm, len(f.Payload)+FrameOverhead)
			}
			got = append(got, f.Payload...)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("frameMax %d: body mismatch", fm)
		}
	}
}

func TestFrameReaderManyFrames(t *testing.T) {
	var stream []byte
	stream = AppendHeartbeat(stream)
	stream, _ = AppendMethodFrame(stream, 3, &BasicPublish{Exchange: "e", RoutingKey: "r"})
	stream = AppendHeaderFrame(stream, 3, ClassBasic, 9000, []byte{0, 0})
	big := bytes.Repeat([]byte{7}, 9000)
	stream = AppendBodyFrames(stream, 3, big, 131072)

	for name, r := range map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(stream) },
		"one-byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"data-err": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
	} {
		t.Run(name, func(t *testing.T) {
			fr := NewFrameReader(r(), 16)
			fr.SetMaxFrameSize(131072)
			types := []uint8{FrameHeartbeat, FrameMethod, FrameHeader, FrameBody}
			for i, typ := range types {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if f.Type != typ {
					t.Fatalf("frame %d type %d, want %d", i, f.Type, typ)
				}
				if typ == FrameBody && !bytes.Equal(f.Payload, big) {
					t.Fatal("body mismatch")
				}
			}
			if _, err := fr.ReadFrame(); err != io.EOF {
				t.Fatalf("at end: %v, want io.EOF", err)
			}
		})
	}
}

func TestFrameReaderBuffered(t *testing.T) {
	var stream []byte
	for i := 0; i < 3; i++ {
		stream = AppendHeartbeat(stream)
	}
	fr := NewFrameReader(bytes.NewReader(stream), 0)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if fr.Buffered() != 16 {
		t.Fatalf("Buffered = %d, want 16", fr.Buffered())
	}
}

// countingReader records the largest read buffer it was handed.
type countingReader struct {
	r       io.Reader
	maxRead int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	return c.r.Read(p)
}

func TestFrameReaderErrors(t *testing.T) {
	frame := func(typ uint8, size uint32, end byte) []byte {
		b := []byte{typ, 0, 1, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}
		b = append(b, make([]byte, min(size, 1<<16))...)
		return append(b, end)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		max  uint32
	}{
		{"bad frame end", frame(FrameBody, 3, 0xAB), 0},
		{"unknown type", frame(9, 0, FrameEnd), 0},
		{"type zero", frame(0, 0, FrameEnd), 0},
		{"too big before tune", frame(FrameBody, FrameMinSize-7, FrameEnd), 0},
		{"too big after tune", frame(FrameBody, 131072-7, FrameEnd), 131072},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: bytes.NewReader(tc.in)}
			fr := NewFrameReader(cr, 0)
			fr.SetMaxFrameSize(tc.max)
			_, err := fr.ReadFrame()
			wantCode(t, err, FrameError)
		})
	}
	// Exactly at the limit is fine.
	fr := NewFrameReader(bytes.NewReader(frame(FrameBody, FrameMinSize-8, FrameEnd)), 0)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatalf("frame at limit: %v", err)
	}
	// A huge declared size is refused before any allocation or read.
	cr := &countingReader{r: bytes.NewReader([]byte{3, 0, 1, 0xff, 0xff, 0xff, 0xff})}
	fr = NewFrameReader(cr, 0)
	fr.SetMaxFrameSize(1 << 20)
	_, err := fr.ReadFrame()
	wantCode(t, err, FrameError)
	if len(fr.buf) != FrameMinSize {
		t.Fatalf("buffer grew to %d", len(fr.buf))
	}
	// EOF inside a frame.
	fr = NewFrameReader(bytes.NewReader([]byte{1, 0, 1, 0, 0}), 0)
	if _, err := fr.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated header: %v", err)
	}
	fr = NewFrameReader(bytes.NewReader(frame(FrameBody, 10, FrameEnd)[:12]), 0)
	if _, err := fr.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated payload: %v", err)
	}
	// Other reader errors are returned as they are.
	boom := errors.New("boom")
	fr = NewFrameReader(iotest.ErrReader(boom), 0)
	if _, err := fr.ReadFrame(); err != boom {
		t.Fatalf("reader error: %v", err)
	}
}

func TestFrameReaderGrowthBounded(t *testing.T) {
	body := bytes.Repeat([]byte{1}, 100000)
	stream := AppendBodyFrames(nil, 1, body, 131072)
	fr := NewFrameReader(bytes.NewReader(stream), 4096)
	fr.SetMaxFrameSize(131072)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Payload) != len(body) {
		t.Fatalf("payload %d", len(f.Payload))
	}
	if len(fr.buf) > 131072 {
		t.Fatalf("buffer %d exceeds frame max", len(fr.buf))
	}
}

// scriptReader returns one scripted (data, error) pair per Read.
type scriptReader struct {
	steps []struct {
		data []byte
		err  error
	}
}

func (s *scriptReader) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	return copy(p, st.data), st.err
}

func TestFrameReaderReadErrors(t *testing.T) {
	boom := errors.New("boom (timeout)")
	hb := AppendHeartbeat(nil)
	r := &scriptReader{steps: []struct {
		data []byte
		err  error
	}{
		{hb, boom},     // a frame and an error together: frame first, then the error
		{hb[:3], boom}, // part of a frame, then a timeout: retry keeps the part
		{hb[3:], nil},
	}}
	fr := NewFrameReader(r, 0)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatalf("first frame: %v", err)
	}
	if _, err := fr.ReadFrame(); err != boom {
		t.Fatalf("after data: %v, want boom", err)
	}
	if _, err := fr.ReadFrame(); err != boom {
		t.Fatalf("partial frame: %v, want boom", err)
	}
	if f, err := fr.ReadFrame(); err != nil || f.Type != FrameHeartbeat {
		t.Fatalf("retry after error: %v %v", f, err)
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}
