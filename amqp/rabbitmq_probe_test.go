//go:build rabbitmq

package amqp

// This file records how RabbitMQ reacts to malformed input, so the codec's
// error codes match it. It needs a broker and is excluded from normal runs:
//
//	WARREN_RABBITMQ_ADDR=127.0.0.1:5672 go test -tags rabbitmq -run TestRabbitMQMalformed -v ./amqp

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"
)

func rawFrame(typ uint8, channel uint16, payload []byte, end byte) []byte {
	b := []byte{typ, byte(channel >> 8), byte(channel)}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return append(b, end)
}

func methodPayload(classID, methodID uint16, args []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, classID)
	b = binary.BigEndian.AppendUint16(b, methodID)
	return append(b, args...)
}

// rabbitSession opens a connection and channel 1 and returns the conn and a
// reader positioned after channel.open-ok.
func rabbitSession(t *testing.T, addr string) (net.Conn, *FrameReader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Skipf("no broker: %v", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fr := NewFrameReader(c, 0)
	fr.SetMaxFrameSize(1 << 20)
	send := func(ch uint16, m Method) {
		b, err := AppendMethodFrame(nil, ch, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) Method {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		m, err := DecodeMethod(f.Payload)
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if m.Name() != want {
			t.Fatalf("got %s, want %s", m.Name(), want)
		}
		return m
	}
	c.Write(ProtocolHeader)
	expect("connection.start")
	send(0, &ConnectionStartOk{ClientProperties: Table{"product": "warren-probe"}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune := expect("connection.tune").(*ConnectionTune)
	send(0, &ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: 0})
	send(0, &ConnectionOpen{VirtualHost: "/"})
	expect("connection.open-ok")
	send(1, &ChannelOpen{})
	expect("channel.open-ok")
	return c, fr
}

func TestRabbitMQMalformed(t *testing.T) {
	addr := os.Getenv("WARREN_RABBITMQ_ADDR")
	if addr == "" {
		addr = "127.0.0.1:5672"
	}
	publish := rawFrame(FrameMethod, 1, methodPayload(60, 40, []byte{0, 0, 0, 1, 'q', 0}), FrameEnd)
	header := func(props []byte) []byte {
		p := binary.BigEndian.AppendUint16(nil, 60)
		p = append(p, 0, 0)
		p = binary.BigEndian.AppendUint64(p, 0)
		return rawFrame(FrameHeader, 1, append(p, props...), FrameEnd)
	}
	cases := []struct {
		name string
		in   []byte
	}{
		{"unknown method id", rawFrame(FrameMethod, 1, methodPayload(60, 999, nil), FrameEnd)},
		{"unknown class id", rawFrame(FrameMethod, 1, methodPayload(999, 10, nil), FrameEnd)},
		{"payload shorter than ids", rawFrame(FrameMethod, 1, []byte{0, 60}, FrameEnd)},
		{"truncated queue.declare", rawFrame(FrameMethod, 1, methodPayload(50, 10, []byte{0, 0}), FrameEnd)},
		{"truncated shortstr", rawFrame(FrameMethod, 1, methodPayload(50, 10, []byte{0, 0, 9, 'a'}), FrameEnd)},
		{"trailing bytes basic.qos", rawFrame(FrameMethod, 1, methodPayload(60, 10, []byte{0, 0, 0, 0, 0, 1, 0, 7}), FrameEnd)},
		{"bad table tag", rawFrame(FrameMethod, 1, methodPayload(50, 10, []byte{0, 0, 1, 'q', 0, 0, 0, 0, 4, 1, 'k', 'Z', 0}), FrameEnd)},
		{"table length overrun", rawFrame(FrameMethod, 1, methodPayload(50, 10, []byte{0, 0, 1, 'q', 0, 0, 0, 0, 99}), FrameEnd)},
		{"unknown frame type", rawFrame(9, 1, nil, FrameEnd)},
		{"bad frame end", rawFrame(FrameMethod, 1, methodPayload(60, 10, []byte{0, 0, 0, 0, 0, 1, 0}), 0xAB)},
		{"frame too large", rawFrame(FrameBody, 1, make([]byte, 200000), FrameEnd)},
		{"heartbeat on channel 1", rawFrame(FrameHeartbeat, 1, nil, FrameEnd)},
		{"short content header", append(publish, rawFrame(FrameHeader, 1, []byte{0, 60, 0}, FrameEnd)...)},
		{"truncated property shortstr", append(publish, header([]byte{0x80, 0, 5, 'a'})...)},
		{"property continuation bit", append(publish, header([]byte{0, 1, 0, 0})...)},
		{"undefined property bit", append(publish, header([]byte{0, 2})...)},
		{"bad tag in headers property", append(publish, header([]byte{0x20, 0, 0, 0, 0, 4, 1, 'k', 'Z', 0})...)},
		{"trailing bytes after properties", append(publish, header([]byte{0, 0, 1, 2, 3})...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fr := rabbitSession(t, addr)
			defer c.Close()
			c.Write(tc.in)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Logf("%s: read error %v", tc.name, err)
					return
				}
				if f.Type != FrameMethod {
					continue
				}
				m, err := DecodeMethod(f.Payload)
				if err != nil {
					t.Logf("%s: decode error %v", tc.name, err)
					return
				}
				switch m := m.(type) {
				case *ConnectionClose:
					t.Logf("%-32s connection.close %d (%d,%d) %q", tc.name, m.ReplyCode, m.ReplyClassID, m.ReplyMethodID, m.ReplyText)
					return
				case *ChannelClose:
					t.Logf("%-32s channel.close %d (%d,%d) %q", tc.name, m.ReplyCode, m.ReplyClassID, m.ReplyMethodID, m.ReplyText)
					return
				default:
					t.Logf("%s: got %s", tc.name, m.Name())
				}
			}
		})
	}
}

// TestRabbitMQCapture prints frames RabbitMQ produces, for the golden tests
// in rabbitmq_golden_test.go.
func TestRabbitMQCapture(t *testing.T) {
	addr := os.Getenv("WARREN_RABBITMQ_ADDR")
	if addr == "" {
		addr = "127.0.0.1:5672"
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Skipf("no broker: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fr := NewFrameReader(c, 0)
	fr.SetMaxFrameSize(1 << 20)
	raw := func(what string) Frame {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out := []byte{f.Type, byte(f.Channel >> 8), byte(f.Channel)}
		out = binary.BigEndian.AppendUint32(out, uint32(len(f.Payload)))
		out = append(out, f.Payload...)
		out = append(out, FrameEnd)
		t.Logf("%s: %x", what, out)
		return f
	}
	send := func(ch uint16, m Method) {
		b, err := AppendMethodFrame(nil, ch, m)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
	}
	c.Write(ProtocolHeader)
	raw("connection.start")
	send(0, &ConnectionStartOk{ClientProperties: Table{"product": "warren-probe"}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	raw("connection.tune")
	send(0, &ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072})
	send(0, &ConnectionOpen{VirtualHost: "/"})
	raw("connection.open-ok")
	send(1, &ChannelOpen{})
	raw("channel.open-ok")
	send(1, &QueueDeclare{Queue: "warren-amqp-capture", AutoDelete: true})
	raw("queue.declare-ok")
	send(1, &QueuePurge{Queue: "warren-amqp-capture"})
	raw("queue.purge-ok")
	p := allProps()
	p.ReplyTo = "replies" // amq.rabbitmq.reply-to needs a direct reply-to consumer
	p.Headers = Table{"A": []any{true, int32(1)}, "B": uint8(255), "D": Decimal{Scale: 2, Value: -300},
		"F": Table{"n": "v"}, "I": int32(-5), "S": "abc", "T": time.Unix(0x65a0bc00, 0).UTC(), "V": nil,
		"b": int8(-128), "d": 1.5, "f": float32(1.5), "l": int64(-1), "s": int16(-2), "t": false, "x": []byte{0, 0xff}}
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	send(1, &BasicPublish{RoutingKey: "warren-amqp-capture"})
	c.Write(AppendHeaderFrame(nil, 1, ClassBasic, 5, props))
	c.Write(AppendBodyFrames(nil, 1, []byte("hello"), 131072))
	send(1, &BasicConsume{Queue: "warren-amqp-capture", ConsumerTag: "ctag", NoAck: true})
	raw("basic.consume-ok")
	raw("basic.deliver")
	raw("content header")
	raw("content body")
}
