package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
		if f.Type == amqp.FrameHeartbeat {
			out = append(out, "0:heartbeat")
			continue
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *amqp.BasicAck:
			out = append(out, fmt.Sprintf("%d:ack:%d:%v", f.Channel, m.DeliveryTag, m.Multiple))
		case *amqp.BasicNack:
			out = append(out, fmt.Sprintf("%d:nack:%d:%v", f.Channel, m.DeliveryTag, m.Multiple))
		default:
			t.Fatalf("unexpected %s", m.Name())
		}
	}
	return out
}
