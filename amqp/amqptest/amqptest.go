// Package amqptest builds AMQP 0-9-1 frames for tests and drives a broker
// over a raw connection, for cases no client library will produce
// (malformed frames, out-of-order methods). It fails the test on its own
// errors, so callers stay short.
package amqptest

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Method returns a complete method frame.
func Method(tb testing.TB, channel uint16, m amqp.Method) []byte {
	tb.Helper()
	b, err := amqp.AppendMethodFrame(nil, channel, m)
	if err != nil {
		tb.Fatalf("amqptest: encoding %s: %v", m.Name(), err)
	}
	return b
}

// Content returns a basic content header frame followed by body frames.
func Content(tb testing.TB, channel uint16, props amqp.Properties, body []byte, frameMax uint32) []byte {
	tb.Helper()
	raw, err := props.Append(nil)
	if err != nil {
		tb.Fatalf("amqptest: encoding properties: %v", err)
	}
	b := amqp.AppendHeaderFrame(nil, channel, amqp.ClassBasic, uint64(len(body)), raw)
	return amqp.AppendBodyFrames(b, channel, body, frameMax)
}

// Publish returns basic.publish with its header and body frames.
func Publish(tb testing.TB, channel uint16, exchange, routingKey string, props amqp.Properties, body []byte, frameMax uint32) []byte {
	tb.Helper()
	b := Method(tb, channel, &amqp.BasicPublish{Exchange: exchange, RoutingKey: routingKey})
	return append(b, Content(tb, channel, props, body, frameMax)...)
}

// Raw returns a frame with any type, payload and frame-end octet.
func Raw(typ uint8, channel uint16, payload []byte, end byte) []byte {
	b := []byte{typ, byte(channel >> 8), byte(channel)}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return append(b, end)
}

// MethodPayload returns class id, method id and raw argument bytes, for
// building malformed method frames with Raw.
func MethodPayload(classID, methodID uint16, args []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, classID)
	b = binary.BigEndian.AppendUint16(b, methodID)
	return append(b, args...)
}

// Client is a raw AMQP client connection. It is not safe for concurrent use.
type Client struct {
	tb       testing.TB
	Conn     net.Conn
	R        *amqp.FrameReader
	FrameMax uint32
	Tune     amqp.ConnectionTune // what the server offered
}

// Dial connects, authenticates with PLAIN and opens vhost, accepting the
// server's channel-max and frame-max and disabling heartbeats. Every read and
// write has a deadline of 10 seconds from the call that makes it.
func Dial(tb testing.TB, addr, user, password, vhost string) *Client {
	tb.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("amqptest: dial %s: %v", addr, err)
	}
	c := &Client{tb: tb, Conn: conn, R: amqp.NewFrameReader(conn, 64*1024)}
	tb.Cleanup(func() { conn.Close() })
	c.Write(amqp.ProtocolHeader)
	Expect[*amqp.ConnectionStart](c, 0)
	c.Send(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{"product": "warren amqptest"},
		Mechanism:        "PLAIN",
		Response:         "\x00" + user + "\x00" + password,
		Locale:           "en_US",
	})
	tune := Expect[*amqp.ConnectionTune](c, 0)
	c.Tune = *tune
	c.FrameMax = tune.FrameMax
	if c.FrameMax == 0 {
		c.FrameMax = 131072
	}
	c.R.SetMaxFrameSize(c.FrameMax)
	c.Send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: c.FrameMax, Heartbeat: 0})
	c.Send(0, &amqp.ConnectionOpen{VirtualHost: vhost})
	Expect[*amqp.ConnectionOpenOk](c, 0)
	return c
}

// Write sends raw bytes.
func (c *Client) Write(b []byte) {
	c.tb.Helper()
	c.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Conn.Write(b); err != nil {
		c.tb.Fatalf("amqptest: write: %v", err)
	}
}

// Send sends one method frame.
func (c *Client) Send(channel uint16, m amqp.Method) {
	c.tb.Helper()
	c.Write(Method(c.tb, channel, m))
}

// OpenChannel opens a channel and waits for channel.open-ok.
func (c *Client) OpenChannel(channel uint16) {
	c.tb.Helper()
	c.Send(channel, &amqp.ChannelOpen{})
	Expect[*amqp.ChannelOpenOk](c, channel)
}

// ReadFrame reads the next frame, skipping heartbeats. The payload is copied.
func (c *Client) ReadFrame() (amqp.Frame, error) {
	for {
		c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := c.R.ReadFrame()
		if err != nil {
			return amqp.Frame{}, err
		}
		if f.Type == amqp.FrameHeartbeat {
			continue
		}
		f.Payload = append([]byte(nil), f.Payload...)
		return f, nil
	}
}

// ReadMethod reads frames until a method frame and decodes it.
func (c *Client) ReadMethod() (uint16, amqp.Method, error) {
	for {
		f, err := c.ReadFrame()
		if err != nil {
			return 0, nil, err
		}
		if f.Type != amqp.FrameMethod {
			continue
		}
		m, err := amqp.DecodeMethod(f.Payload)
		return f.Channel, m, err
	}
}

// Expect reads the next method and fails the test unless it is a T on the
// given channel.
func Expect[T amqp.Method](c *Client, channel uint16) T {
	c.tb.Helper()
	ch, m, err := c.ReadMethod()
	if err != nil {
		var zero T
		c.tb.Fatalf("amqptest: waiting for %T on channel %d: %v", zero, channel, err)
	}
	t, ok := m.(T)
	if !ok || ch != channel {
		c.tb.Fatalf("amqptest: got %s on channel %d, want %T on channel %d%s", m.Name(), ch, t, channel, closeInfo(m))
	}
	return t
}

func closeInfo(m amqp.Method) string {
	switch m := m.(type) {
	case *amqp.ConnectionClose:
		return fmt.Sprintf(" (%d %q)", m.ReplyCode, m.ReplyText)
	case *amqp.ChannelClose:
		return fmt.Sprintf(" (%d %q)", m.ReplyCode, m.ReplyText)
	}
	return ""
}
