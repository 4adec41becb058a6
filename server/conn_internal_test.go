package server

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// TestIdleConnectionGoroutines: once the handshake is over and the
// replies are written, an idle connection keeps only its reader: no
// writer and no handshake goroutine.
func TestIdleConnectionGoroutines(t *testing.T) {
	s := newTestServer(t, Config{})
	cl, err := dialFrom(s, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Channel(); err != nil {
		t.Fatal(err)
	}
	s.connsMu.Lock()
	var c *conn
	for k := range s.conns {
		c = k
	}
	s.connsMu.Unlock()
	waitUntil(t, "the writer exits", func() bool { return !c.out.writerRunning() })
	// The handshake goroutine closes open's channel in a deferred call, so
	// it may still be on its way out when the reader starts: wait for it
	// to be gone rather than look once.
	var dump string
	gone := func() bool {
		buf := make([]byte, 1<<20)
		dump = string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(dump, "server.(*conn).open.func")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			t.Fatalf("handshake goroutine still running:\n%s", dump)
		}
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(dump, "server.(*conn).readLoop") {
		t.Fatalf("no reader goroutine:\n%s", dump)
	}
}

// panicConn panics on the first read, as a bug in the handshake would.
type panicConn struct{ remotePipe }

func (panicConn) Read([]byte) (int, error) { panic("test: read panics") }

// TestHandshakePanic: a panic on the handshake goroutine closes the
// connection with 541 INTERNAL_ERROR, as one on the reader does, instead
// of taking the broker down.
func TestHandshakePanic(t *testing.T) {
	s := newTestServer(t, Config{})
	client, srvEnd := net.Pipe()
	defer client.Close()
	s.startConn(panicConn{remotePipe{Conn: srvEnd, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}})
	client.SetDeadline(time.Now().Add(5 * time.Second))
	f, err := amqp.NewFrameReader(client, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	m, err := amqp.DecodeMethod(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := m.(*amqp.ConnectionClose)
	if !ok || cc.ReplyCode != amqp.InternalError {
		t.Fatalf("got %#v, want connection.close 541", m)
	}
	s.wg.Wait() // the connection ended
}
