package server

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// rawClient is a hand-driven AMQP client over a pipe: it writes frames
// itself, and a goroutine reads the broker's frames into frames (closed
// when the broker's side closes).
type rawClient struct {
	t      *testing.T
	nc     net.Conn
	frames chan amqp.Frame
}

// openRaw runs the handshake with the given heartbeat (in units of
// s.heartbeatUnit) and frame_max, then opens channel 1.
func openRaw(t *testing.T, s *Server, heartbeat uint16, frameMax uint32) *rawClient {
	t.Helper()
	rc := startRaw(t, s)
	expectRaw[*amqp.ConnectionTune](rc)
	rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: frameMax, Heartbeat: heartbeat})
	rc.send(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	expectRaw[*amqp.ConnectionOpenOk](rc)
	rc.send(1, &amqp.ChannelOpen{})
	expectRaw[*amqp.ChannelOpenOk](rc)
	rc.nc.SetWriteDeadline(time.Time{})
	return rc
}

// startRaw connects to s and logs in as guest: connection.tune is the
// next frame.
func startRaw(t *testing.T, s *Server) *rawClient {
	t.Helper()
	client, srvEnd := net.Pipe()
	t.Cleanup(func() { client.Close() })
	s.startConn(remotePipe{Conn: srvEnd, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	rc := &rawClient{t: t, nc: client, frames: make(chan amqp.Frame, 64)}
	go func() {
		defer close(rc.frames)
		fr := amqp.NewFrameReader(client, 1<<20)
		fr.SetMaxFrameSize(1 << 20)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if f.Type == amqp.FrameHeartbeat {
				continue
			}
			f.Payload = append([]byte(nil), f.Payload...)
			rc.frames <- f
		}
	}()
	client.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write(amqp.ProtocolHeader); err != nil {
		t.Fatal(err)
	}
	expectRaw[*amqp.ConnectionStart](rc)
	rc.send(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{"capabilities": amqp.Table{"connection.blocked": true}},
		Mechanism:        "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
	})
	return rc
}

func (rc *rawClient) send(ch uint16, m amqp.Method) {
	rc.t.Helper()
	b, err := amqp.AppendMethodFrame(nil, ch, m)
	if err != nil {
		rc.t.Fatal(err)
	}
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatalf("send %s: %v", m.Name(), err)
	}
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

// expectRaw waits (bounded) for the broker's next method frame, which must
// be an M.
func expectRaw[M amqp.Method](rc *rawClient) M {
	rc.t.Helper()
	var zero M
	select {
	case f, ok := <-rc.frames:
		if !ok {
			rc.t.Fatalf("connection closed while waiting for %T", zero)
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			rc.t.Fatal(err)
		}
		got, ok := m.(M)
		if !ok {
			rc.t.Fatalf("got %#v, want %T", m, zero)
		}
		return got
	case <-time.After(5 * time.Second):
		rc.t.Fatalf("timed out waiting for %T", zero)
	}
	return zero
}

// TestHeartbeatBusyReader: a client that keeps the broker's read buffer
// from ever running empty (pipelined queue.bind nowait, every write ending
// inside a frame) is alive; the broker must not cut it for missed
// heartbeats. The heartbeat unit is shortened to 300 ms, so the broker's
// heartbeat timeout is 600 ms, and the client streams for five of those.
func TestHeartbeatBusyReader(t *testing.T) {
	s := newTestServer(t, Config{})
	s.heartbeatUnit = 300 * time.Millisecond
	const timeout = 600 * time.Millisecond
	rc := openRaw(t, s, 1, 131072)
	rc.send(1, &amqp.QueueDeclare{Queue: "hbq"})
	expectRaw[*amqp.QueueDeclareOk](rc)

	// One 63-byte queue.bind frame: 63 does not divide the broker's read
	// buffer, and every write below ends 30 bytes into a frame, so no read
	// leaves the buffer holding whole frames only.
	frame, err := amqp.AppendMethodFrame(nil, 1, &amqp.QueueBind{
		Queue: "hbq", Exchange: "amq.direct", RoutingKey: strings.Repeat("k", 28), NoWait: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) != 63 {
		t.Fatalf("bind frame is %d bytes, want 63", len(frame))
	}
	const cut = 30
	var burst []byte
	for range 16 {
		burst = append(burst, frame...)
	}
	steady := append(append([]byte(nil), frame[cut:]...), burst[:len(burst)-len(frame)]...)
	steady = append(steady, frame[:cut]...)

	if _, err := rc.nc.Write(frame[:cut]); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(5 * timeout)
	for time.Now().Before(end) {
		rc.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := rc.nc.Write(steady); err != nil {
			t.Fatalf("the broker cut a connection whose frames kept arriving: %v", err)
		}
	}
	// Finish the frame in flight; the connection still answers.
	if _, err := rc.nc.Write(frame[cut:]); err != nil {
		t.Fatalf("the broker cut a connection whose frames kept arriving: %v", err)
	}
	rc.send(1, &amqp.QueueDeclare{Queue: "hbq", Passive: true})
	expectRaw[*amqp.QueueDeclareOk](rc)
}

// queueReady is the number of ready messages in queue name of vhost /.
func queueReady(t *testing.T, s *Server, name string) int {
	t.Helper()
	v := s.vhost("/")
	v.mu.RLock()
	q := v.queues[name]
	v.mu.RUnlock()
	if q == nil {
		t.Fatalf("no queue %s", name)
	}
	return q.Stats().Ready
}

// TestAlarmStopsContentInFlight: a message whose body is being streamed
// when a resource alarm rises is not assembled meanwhile: the body frames
// wait unread, the client is told connection.blocked, and the message
// arrives once the alarm clears.
func TestAlarmStopsContentInFlight(t *testing.T) {
	s := newTestServer(t, Config{})
	rc := openRaw(t, s, 0, 4096)
	rc.send(1, &amqp.QueueDeclare{Queue: "alarmq"})
	expectRaw[*amqp.QueueDeclareOk](rc)

	const chunk = 4000
	rc.send(1, &amqp.BasicPublish{RoutingKey: "alarmq"})
	rc.write(amqp.AppendHeaderFrame(nil, 1, 60, 3*chunk, []byte{0, 0}))
	// A round trip on another channel: the publish and its header are
	// handled before the alarm rises.
	rc.send(2, &amqp.ChannelOpen{})
	expectRaw[*amqp.ChannelOpenOk](rc)

	s.alarms.set(true, false)
	var body []byte
	for range 3 {
		body = amqp.AppendBodyFrames(body, 1, make([]byte, chunk), 4096)
	}
	wrote := make(chan error, 1)
	go func() { _, err := rc.nc.Write(body); wrote <- err }()
	expectRaw[*amqp.ConnectionBlocked](rc)
	// The reader is parked before the first body frame.
	if n := queueReady(t, s, "alarmq"); n != 0 {
		t.Fatalf("%d messages assembled during the alarm, want 0", n)
	}
	s.alarms.set(false, false)
	expectRaw[*amqp.ConnectionUnblocked](rc)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	rc.send(2, &amqp.QueueDeclare{Queue: "alarmq", Passive: true})
	if ok := expectRaw[*amqp.QueueDeclareOk](rc); ok.MessageCount != 1 {
		t.Fatalf("%d messages after the alarm, want 1", ok.MessageCount)
	}
}

// TestContentHeaderReservesNothing: a content header announcing a large
// body takes no room for it; the body grows with the frames that arrive.
func TestContentHeaderReservesNothing(t *testing.T) {
	s := newTestServer(t, Config{})
	rc := openRaw(t, s, 0, 4096)
	const size = 100 << 20
	rc.send(1, &amqp.BasicPublish{RoutingKey: "nowhere"})
	rc.write(amqp.AppendHeaderFrame(nil, 1, 60, size, []byte{0, 0}))
	rc.send(2, &amqp.ChannelOpen{})
	expectRaw[*amqp.ChannelOpenOk](rc)
	if c := cap(rawChannel(s, 1).pub.body); c != 0 {
		t.Fatalf("header of a %d-byte body took %d bytes", size, c)
	}
	rc.write(amqp.AppendBodyFrames(nil, 1, make([]byte, 4000), 4096))
	rc.send(2, &amqp.ChannelFlow{Active: true})
	expectRaw[*amqp.ChannelFlowOk](rc)
	if c := cap(rawChannel(s, 1).pub.body); c > 2*4000 {
		t.Fatalf("4000 bytes of a %d-byte body took %d bytes", size, c)
	}
}

// rawChannel is channel id of the only connection of s. The caller must
// have had a reply from the connection since the state it reads changed.
func rawChannel(s *Server, id uint16) *channel {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	for c := range s.conns {
		c.chanMu.Lock()
		defer c.chanMu.Unlock()
		return c.channels[id]
	}
	return nil
}

// TestHeartbeatSlowFrame: a large frame arriving slowly, over more than the
// heartbeat timeout, is a live peer too: every byte received counts, as in
// RabbitMQ. The heartbeat unit is 300 ms (timeout 600 ms); the body frame
// takes about three timeouts to arrive, a chunk every 20 ms.
func TestHeartbeatSlowFrame(t *testing.T) {
	s := newTestServer(t, Config{})
	s.heartbeatUnit = 300 * time.Millisecond
	const timeout = 600 * time.Millisecond
	rc := openRaw(t, s, 1, 131072)
	rc.send(1, &amqp.QueueDeclare{Queue: "slowq"})
	expectRaw[*amqp.QueueDeclareOk](rc)
	const size = 6000
	rc.send(1, &amqp.BasicPublish{RoutingKey: "slowq"})
	rc.write(amqp.AppendHeaderFrame(nil, 1, 60, size, []byte{0, 0}))
	frame := amqp.AppendBodyFrames(nil, 1, make([]byte, size), 131072)
	end := time.Now().Add(3 * timeout)
	step := len(frame) / int(3*timeout/(20*time.Millisecond))
	for len(frame) > 0 {
		n := min(step, len(frame))
		if time.Now().After(end) {
			n = len(frame)
		}
		if _, err := rc.nc.Write(frame[:n]); err != nil {
			t.Fatalf("the broker cut a connection whose frame kept arriving: %v", err)
		}
		frame = frame[n:]
		time.Sleep(20 * time.Millisecond) // the pace of a slow link
	}
	rc.send(1, &amqp.QueueDeclare{Queue: "slowq", Passive: true})
	if ok := expectRaw[*amqp.QueueDeclareOk](rc); ok.MessageCount != 1 {
		t.Fatalf("%d messages, want 1", ok.MessageCount)
	}
}
