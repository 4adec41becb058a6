package server

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// TestAckTimeoutCheckEvery: the check runs every minute, RabbitMQ's
// channel tick, or every timeout when that is shorter; with the timeout
// off there is no check and deliveries carry no time.
func TestAckTimeoutCheckEvery(t *testing.T) {
	for timeout, want := range map[time.Duration]time.Duration{
		0: time.Minute, ConsumerTimeoutOff: 0, 5 * time.Second: 5 * time.Second, time.Hour: time.Minute,
	} {
		s := newTestServer(t, Config{ConsumerTimeout: timeout})
		if got := s.ackCheckEvery(); got != want {
			t.Errorf("ConsumerTimeout %v: checked every %v, want %v", timeout, got, want)
		}
		if at := s.deliveredAt(); (at != 0) != (want != 0) {
			t.Errorf("ConsumerTimeout %v: deliveredAt %d", timeout, at)
		}
	}
}

// TestAckTimeoutKeepsHeartbeatTimeout: the check's wake-ups do not count
// as life from the client. With a 600 ms heartbeat timeout and a check
// every 100 ms, a client that sends nothing is still cut for missed
// heartbeats, neither before 7/8 of the timeout nor much after it; and a
// client that sends heartbeats keeps its connection while the broker
// closes the channel holding a delivery past the timeout.
func TestAckTimeoutKeepsHeartbeatTimeout(t *testing.T) {
	s := newTestServer(t, Config{ConsumerTimeout: 100 * time.Millisecond})
	s.heartbeatUnit = 300 * time.Millisecond
	const timeout = 600 * time.Millisecond

	silent := openRaw(t, s, 1, 131072)
	start := time.Now()
	select {
	case _, open := <-silent.frames:
		if open {
			t.Fatal("a frame on a silent connection")
		}
		if d := time.Since(start); d < timeout*7/8 {
			t.Fatalf("silent connection cut after %v, before 7/8 of the %v heartbeat timeout", d, timeout)
		}
	case <-time.After(5 * timeout):
		t.Fatalf("silent connection not cut within %v (heartbeat timeout %v)", 5*timeout, timeout)
	}

	rc := openRaw(t, s, 1, 131072)
	beats := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		hb := []byte{amqp.FrameHeartbeat, 0, 0, 0, 0, 0, 0, amqp.FrameEnd}
		for {
			select {
			case <-beats:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := rc.nc.Write(hb); err != nil {
					return
				}
			}
		}
	}()
	rc.send(1, &amqp.QueueDeclare{Queue: "ackq"})
	expectRaw[*amqp.QueueDeclareOk](rc)
	rc.send(1, &amqp.BasicPublish{RoutingKey: "ackq"})
	rc.write(amqp.AppendHeaderFrame(nil, 1, 60, 1, []byte{0, 0}))
	rc.write(amqp.AppendBodyFrames(nil, 1, []byte("m"), 131072))
	rc.send(1, &amqp.BasicGet{Queue: "ackq"})
	expectRaw[*amqp.BasicGetOk](rc)
	<-rc.frames // the content header
	<-rc.frames // and body
	cl := expectRaw[*amqp.ChannelClose](rc)
	if cl.ReplyCode != amqp.PreconditionFailed || cl.ReplyClassID != 0 || cl.ReplyMethodID != 0 {
		t.Fatalf("channel.close %+v, want 406 with class and method 0", cl)
	}
	rc.send(1, &amqp.ChannelCloseOk{})
	deadline := time.Now().Add(3 * timeout)
	for time.Now().Before(deadline) {
		rc.send(2, &amqp.ChannelOpen{})
		expectRaw[*amqp.ChannelOpenOk](rc)
		rc.send(2, &amqp.ChannelClose{})
		expectRaw[*amqp.ChannelCloseOk](rc)
		time.Sleep(100 * time.Millisecond) // idle between round trips, heartbeats going
	}
	// The requeued message waits, ready, for the next consumer.
	rc.send(2, &amqp.ChannelOpen{})
	expectRaw[*amqp.ChannelOpenOk](rc)
	rc.send(2, &amqp.QueueDeclare{Queue: "ackq", Passive: true})
	if ok := expectRaw[*amqp.QueueDeclareOk](rc); ok.MessageCount != 1 {
		t.Fatalf("%d messages ready after the close, want the requeued one", ok.MessageCount)
	}
	close(beats)
	<-done
}
