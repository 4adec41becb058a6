package server

import (
	"fmt"
	"net"
	"testing"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// BenchmarkPublishRouteDeliver measures the broker's hot path without
// sockets: a complete publish is routed through amq.direct to one queue and
// delivered to a consumer, whose frames are encoded into the connection's
// outbound buffer.
func BenchmarkPublishRouteDeliver(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			srv, err := New(Config{Log: ptr(zerolog.Nop()), hooks: testhooks.Hooks{Store: persist.NewMemory()}})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			v := srv.vhost("/")
			pub, _ := net.Pipe()
			c := newConn(srv, pub)
			c.vhost = v
			c.user = "guest" // the default user, allowed everything on /
			c.frameMax = 131072
			ch := newChannel(c, 1)
			c.channels[1] = ch
			if err := ch.queueDeclare(&amqp.QueueDeclare{Queue: "bench"}); err != nil {
				b.Fatal(err)
			}
			if err := v.changeBinding("amq.direct", binding.Binding{Dest: binding.Destination{Kind: binding.Queue, Name: "bench"}, Key: "k"}, true); err != nil {
				b.Fatal(err)
			}
			if err := ch.basicConsume(&amqp.BasicConsume{Queue: "bench", NoAck: true}); err != nil {
				b.Fatal(err)
			}
			props, _ := (&amqp.Properties{ContentType: "text/plain"}).Append(nil)
			body := make([]byte, size)
			method := &amqp.BasicPublish{Exchange: "amq.direct", RoutingKey: "k"}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ch.route(&publishing{method: method, props: props, body: body, bodySize: uint64(size), gotHdr: true}, nil)
				if i%256 == 0 {
					c.out.mu.Lock()
					c.out.buf, c.out.full = c.out.buf[:0], false
					c.out.mu.Unlock()
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkPublishFrames is the publish path from decoded frames on: the
// reader's handling of basic.publish, its content header and body frames
// (content assembly included), then routing and delivery as in
// BenchmarkPublishRouteDeliver. The 1 MiB body comes in 128 KiB frames.
func BenchmarkPublishFrames(b *testing.B) {
	for _, size := range []int{16, 1024, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			srv, err := New(Config{Log: ptr(zerolog.Nop()), hooks: testhooks.Hooks{Store: persist.NewMemory()}})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			v := srv.vhost("/")
			pub, _ := net.Pipe()
			c := newConn(srv, pub)
			c.vhost = v
			c.user = "guest"
			c.frameMax = 131072
			ch := newChannel(c, 1)
			c.channels[1] = ch
			if err := ch.queueDeclare(&amqp.QueueDeclare{Queue: "bench"}); err != nil {
				b.Fatal(err)
			}
			if err := v.changeBinding("amq.direct", binding.Binding{Dest: binding.Destination{Kind: binding.Queue, Name: "bench"}, Key: "k"}, true); err != nil {
				b.Fatal(err)
			}
			if err := ch.basicConsume(&amqp.BasicConsume{Queue: "bench", NoAck: true}); err != nil {
				b.Fatal(err)
			}
			props, _ := (&amqp.Properties{ContentType: "text/plain"}).Append(nil)
			mf, err := amqp.AppendMethodFrame(nil, 1, &amqp.BasicPublish{Exchange: "amq.direct", RoutingKey: "k"})
			if err != nil {
				b.Fatal(err)
			}
			frames := []amqp.Frame{
				{Type: amqp.FrameMethod, Channel: 1, Payload: mf[amqp.FrameHeaderSize : len(mf)-1]},
			}
			hf := amqp.AppendHeaderFrame(nil, 1, 60, uint64(size), props)
			frames = append(frames, amqp.Frame{Type: amqp.FrameHeader, Channel: 1, Payload: hf[amqp.FrameHeaderSize : len(hf)-1]})
			bf := amqp.AppendBodyFrames(nil, 1, make([]byte, size), c.frameMax)
			for len(bf) > 0 {
				n := int(bf[3])<<24 | int(bf[4])<<16 | int(bf[5])<<8 | int(bf[6])
				frames = append(frames, amqp.Frame{Type: amqp.FrameBody, Channel: 1, Payload: bf[amqp.FrameHeaderSize : amqp.FrameHeaderSize+n]})
				bf = bf[amqp.FrameOverhead+n:]
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, f := range frames {
					if err := c.handleFrame(f); err != nil {
						b.Fatal(err)
					}
				}
				c.out.mu.Lock()
				c.out.buf, c.out.full = c.out.buf[:0], false
				c.out.mu.Unlock()
			}
		})
	}
}
