package amqp

import (
	"bytes"
	"testing"
)

// loopReader replays one stream forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// publishStream is what a publisher sends per message: method, header, body.
func publishStream(b testing.TB, bodySize int) []byte {
	var s []byte
	s, err := AppendMethodFrame(s, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "bench.queue"})
	if err != nil {
		b.Fatal(err)
	}
	p := Properties{ContentType: "application/octet-stream", DeliveryMode: 2}
	props, _ := p.Append(nil)
	s = AppendHeaderFrame(s, 1, ClassBasic, uint64(bodySize), props)
	return AppendBodyFrames(s, 1, bytes.Repeat([]byte{'x'}, bodySize), 131072)
}

func BenchmarkReadFrame(b *testing.B) {
	stream := publishStream(b, 256)
	fr := NewFrameReader(&loopReader{data: bytes.Repeat(stream, 64)}, 64*1024)
	fr.SetMaxFrameSize(131072)
	b.SetBytes(int64(len(stream)) / 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fr.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMethodBasicPublish(b *testing.B) {
	frame, _ := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "bench.queue", Mandatory: true})
	payload := frame[FrameHeaderSize : len(frame)-1]
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMethod(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendMethodFrameBasicDeliver(b *testing.B) {
	m := &BasicDeliver{ConsumerTag: "amq.ctag-0123456789abcdef", DeliveryTag: 42, Exchange: "amq.direct", RoutingKey: "bench.queue"}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendMethodFrame(buf[:0], 1, m); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendHeaderAndBodyFrames(b *testing.B) {
	for _, size := range []int{256, 64 * 1024, 1 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			p := Properties{ContentType: "application/octet-stream", DeliveryMode: 2, Headers: Table{"k": "v"}}
			props, _ := p.Append(nil)
			body := bytes.Repeat([]byte{'x'}, size)
			buf := make([]byte, 0, size+size/1000+1024)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendHeaderFrame(buf[:0], 1, ClassBasic, uint64(size), props)
				buf = AppendBodyFrames(buf, 1, body, 131072)
			}
		})
	}
}

func BenchmarkDecodeContentHeader(b *testing.B) {
	p := allProps()
	props, _ := p.Append(nil)
	payload := append(make([]byte, 12), props...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeContentHeader(payload); err != nil {
			b.Fatal(err)
		}
		_ = PropDeliveryMode(props)
	}
}

func BenchmarkDecodeTable(b *testing.B) {
	in := unhex(b, goldenTable)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeTable(in); err != nil {
			b.Fatal(err)
		}
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return itoa(n>>20) + "MiB"
	case n >= 1<<10:
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
