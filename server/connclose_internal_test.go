package server

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
)

// onlyConn is s's one connection.
func onlyConn(t *testing.T, s *Server) *conn {
	t.Helper()
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if len(s.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(s.conns))
	}
	for c := range s.conns {
		return c
	}
	return nil
}

// expectBrokerEOF waits (bounded) for the broker to close the socket; any
// frame it sends first fails the test.
func expectBrokerEOF(rc *rawClient, within time.Duration) {
	rc.t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		select {
		case f, ok := <-rc.frames:
			if !ok {
				return
			}
			name := "a non-method frame"
			if m, err := amqp.DecodeMethod(f.Payload); err == nil {
				name = m.Name()
				if cl, ok := m.(*amqp.ConnectionClose); ok {
					name += " " + cl.ReplyText
				}
			}
			rc.t.Fatalf("broker sent %s (channel %d), want the socket closed", name, f.Channel)
		case <-timeout.C:
			rc.t.Fatalf("the broker did not close the socket within %v", within)
		}
	}
}

// sendIgnored sends what the broker must discard after its
// connection.close: methods on an open and an unopened channel, a
// channel.open (answered with open-ok otherwise), a heartbeat.
func sendIgnored(rc *rawClient) {
	rc.t.Helper()
	rc.send(1, &amqp.QueueDeclare{Queue: "after-close"})
	rc.send(2, &amqp.ChannelOpen{})
	rc.send(7, &amqp.QueueDeclare{Queue: "after-close-7"})
	rc.write(amqp.AppendHeartbeat(nil))
}

// TestServerCloseAcceptsCloseOk: once the broker has sent connection.close
// (a management force-close, a shutdown, a connection-level error), the
// client's close-ok makes it close the socket at once, quietly: no
// connection.close again, no 504 "unexpected method" for the close-ok in
// the log, and every other frame meanwhile discarded without a reply. A
// client's connection.close crossing the broker's is answered with
// close-ok. The broker's own cut after an unanswered close is put off by a
// minute, so only close-ok can end these connections in time.
func TestServerCloseAcceptsCloseOk(t *testing.T) {
	const within = 10 * time.Second
	start := func(t *testing.T) (*Server, *rawClient, *lockedBuffer) {
		logs := &lockedBuffer{}
		log := zerolog.New(logs)
		s := newTestServer(t, Config{Log: &log})
		s.closeOkWait = time.Minute
		rc := openRaw(t, s, 0, 131072)
		rc.nc.SetWriteDeadline(time.Now().Add(within))
		return s, rc, logs
	}
	quiet := func(t *testing.T, logs *lockedBuffer, hardErrors int) {
		t.Helper()
		out := logs.String()
		if strings.Contains(out, `"code":504`) || strings.Contains(out, "unexpected method") {
			t.Errorf("504 for close-ok logged:\n%s", out)
		}
		if n := strings.Count(out, "closing connection on error"); n != hardErrors {
			t.Errorf("%d 'closing connection on error' lines, want %d:\n%s", n, hardErrors, out)
		}
	}

	t.Run("management-close", func(t *testing.T) {
		s, rc, logs := start(t)
		if err := s.CloseConnection(s.Connections()[0].Name, ""); err != nil {
			t.Fatal(err)
		}
		cl := expectRaw[*amqp.ConnectionClose](rc)
		if cl.ReplyCode != amqp.ConnectionForced || cl.ReplyText != "CONNECTION_FORCED - Closed via management plugin" {
			t.Fatalf("close %d %q", cl.ReplyCode, cl.ReplyText)
		}
		rc.send(0, &amqp.ConnectionCloseOk{})
		expectBrokerEOF(rc, within)
		quiet(t, logs, 0)
		if out := logs.String(); !strings.Contains(out, "connection closed by the broker") ||
			!strings.Contains(out, `"reason":"Closed via management plugin"`) {
			t.Errorf("no 'closed by the broker' line with the reason:\n%s", out)
		}
	})

	t.Run("shutdown-frames-ignored", func(t *testing.T) {
		s, rc, logs := start(t)
		onlyConn(t, s).forceClose("broker shutdown")
		if cl := expectRaw[*amqp.ConnectionClose](rc); cl.ReplyCode != amqp.ConnectionForced {
			t.Fatalf("close code %d", cl.ReplyCode)
		}
		sendIgnored(rc)
		rc.send(0, &amqp.ConnectionCloseOk{})
		expectBrokerEOF(rc, within)
		quiet(t, logs, 0)
	})

	t.Run("shutdown-crossing-close", func(t *testing.T) {
		s, rc, logs := start(t)
		onlyConn(t, s).forceClose("broker shutdown")
		if cl := expectRaw[*amqp.ConnectionClose](rc); cl.ReplyCode != amqp.ConnectionForced {
			t.Fatalf("close code %d", cl.ReplyCode)
		}
		rc.send(0, &amqp.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
		expectRaw[*amqp.ConnectionCloseOk](rc)
		rc.send(0, &amqp.ConnectionCloseOk{})
		expectBrokerEOF(rc, within)
		quiet(t, logs, 0)
	})

	t.Run("connection-error-then-shutdown", func(t *testing.T) {
		s, rc, logs := start(t)
		// A heartbeat on channel 1: RabbitMQ closes the connection with
		// 505 UNEXPECTED_FRAME.
		hb := amqp.AppendHeartbeat(nil)
		hb[2] = 1
		rc.write(hb)
		if cl := expectRaw[*amqp.ConnectionClose](rc); cl.ReplyCode != amqp.UnexpectedFrame {
			t.Fatalf("close %d %q", cl.ReplyCode, cl.ReplyText)
		}
		sendIgnored(rc)
		// A shutdown meanwhile sends no second connection.close.
		onlyConn(t, s).forceClose("broker shutdown")
		rc.send(0, &amqp.ConnectionCloseOk{})
		expectBrokerEOF(rc, within)
		quiet(t, logs, 1)
	})

	t.Run("shutdown-during-handshake", func(t *testing.T) {
		// Before open-ok RabbitMQ closes the socket without a frame.
		s := newTestServer(t, Config{})
		s.closeOkWait = time.Minute
		rc := startRaw(t, s)
		expectRaw[*amqp.ConnectionTune](rc)
		onlyConn(t, s).forceClose("broker shutdown")
		expectBrokerEOF(rc, within)
	})
}
