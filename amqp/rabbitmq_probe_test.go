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
