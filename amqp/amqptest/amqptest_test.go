package amqptest

import (
	"bytes"
	"os"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

func TestPublishFrames(t *testing.T) {
	b := Publish(t, 1, "ex", "rk", amqp.Properties{DeliveryMode: 2}, bytes.Repeat([]byte{'x'}, 5000), 4096)
	fr := amqp.NewFrameReader(bytes.NewReader(b), 0)
	var types []uint8
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		types = append(types, f.Type)
	}
	if !bytes.Equal(types, []byte{amqp.FrameMethod, amqp.FrameHeader, amqp.FrameBody, amqp.FrameBody}) {
		t.Fatalf("frame types %v", types)
	}
	if got := Raw(amqp.FrameHeartbeat, 0, nil, amqp.FrameEnd); !bytes.Equal(got, amqp.AppendHeartbeat(nil)) {
		t.Fatalf("Raw heartbeat %x", got)
	}
}

// TestDialBroker runs against a broker when WARREN_AMQP_ADDR is set, e.g.
// WARREN_AMQP_ADDR=127.0.0.1:5672 for a local RabbitMQ.
func TestDialBroker(t *testing.T) {
	addr := os.Getenv("WARREN_AMQP_ADDR")
	if addr == "" {
		t.Skip("WARREN_AMQP_ADDR not set")
	}
	c := Dial(t, addr, "guest", "guest", "/")
	c.OpenChannel(1)
	c.Send(1, &amqp.QueueDeclare{Queue: "warren-amqptest", AutoDelete: true})
	Expect[*amqp.QueueDeclareOk](c, 1)
	c.Send(1, &amqp.BasicGet{Queue: "warren-amqptest", NoAck: true})
	Expect[*amqp.BasicGetEmpty](c, 1)
}
