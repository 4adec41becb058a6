package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/persist"
)

// remotePipe is one end of a net.Pipe that claims to come from addr.
type remotePipe struct {
	net.Conn
	addr net.Addr
}

func (p remotePipe) RemoteAddr() net.Addr { return p.addr }

func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.hooks.Store == nil {
		cfg.hooks.Store = persist.NewMemory()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.connsMu.Lock()
		s.closing = true
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.connsMu.Unlock()
		for _, c := range conns {
			c.nc.Close()
		}
		s.wg.Wait()
		s.store.Close()
	})
	return s
}

// dialFrom connects a client to s over a pipe whose far end reports addr.
func dialFrom(s *Server, addr net.Addr, user, pass string) (*amqp091.Connection, error) {
	client, srvEnd := net.Pipe()
	s.startConn(remotePipe{Conn: srvEnd, addr: addr})
	return amqp091.Open(client, amqp091.Config{
		SASL:      []amqp091.Authentication{&amqp091.PlainAuth{Username: user, Password: pass}},
		Vhost:     "/",
		Heartbeat: 10 * time.Second,
	})
}

// TestGuestLoopbackOnly checks RabbitMQ's loopback_users rule: guest may
// log in from 127.0.0.1 and ::1 only; another user may log in from
// anywhere.
func TestGuestLoopbackOnly(t *testing.T) {
	s := newTestServer(t, Config{Users: map[string]string{"guest": "guest", "ops": "pw"}})
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}
	_, err := dialFrom(s, remote, "guest", "guest")
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 403 {
		t.Fatalf("guest from %v: %v, want 403", remote, err)
	}
	if got := rawLoginClose(t, s, remote, "guest", "guest"); got != "ACCESS_REFUSED - user 'guest' can only connect via localhost" {
		t.Fatalf("guest from %v: connection.close %q", remote, got)
	}
	for _, local := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000},
		&net.TCPAddr{IP: net.IPv6loopback, Port: 40000},
	} {
		conn, err := dialFrom(s, local, "guest", "guest")
		if err != nil {
			t.Fatalf("guest from %v: %v", local, err)
		}
		conn.Close()
	}
	conn, err := dialFrom(s, remote, "ops", "pw")
	if err != nil {
		t.Fatalf("non-guest user from %v: %v", remote, err)
	}
	conn.Close()
}

// rawLoginClose logs in with PLAIN over a pipe from addr, announcing
// authentication_failure_close, and returns the reply text of the
// connection.close the broker answers with.
func rawLoginClose(t *testing.T, s *Server, addr net.Addr, user, pass string) string {
	t.Helper()
	client, srvEnd := net.Pipe()
	defer client.Close()
	s.startConn(remotePipe{Conn: srvEnd, addr: addr})
	client.SetDeadline(time.Now().Add(5 * time.Second))
	client.Write(amqp.ProtocolHeader)
	fr := amqp.NewFrameReader(client, 1<<20)
	fr.ReadFrame() // start
	b, _ := amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{"capabilities": amqp.Table{"authentication_failure_close": true}},
		Mechanism:        "PLAIN", Response: "\x00" + user + "\x00" + pass, Locale: "en_US",
	})
	client.Write(b)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no reply to start-ok: %v", err)
	}
	m, err := amqp.DecodeMethod(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	cl, ok := m.(*amqp.ConnectionClose)
	if !ok {
		t.Fatalf("reply to start-ok: %T, want connection.close", m)
	}
	return cl.ReplyText
}

// TestMaxConnections checks that sockets over the broker's limit are
// closed at once while connections under it keep working, and that a
// slot frees when a connection closes.
func TestMaxConnections(t *testing.T) {
	s := newTestServer(t, Config{MaxConnections: 3, Listen: "127.0.0.1:0"})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "amqp://guest:guest@" + s.Addr().String() + "/"
	var open []*amqp091.Connection
	for range 3 {
		c, err := amqp091.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	if _, err := amqp091.Dial(url); err == nil {
		t.Fatal("a connection over the limit was accepted")
	}
	ch, err := open[0].Channel()
	if err != nil {
		t.Fatalf("a connection under the limit stopped working: %v", err)
	}
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	open[2].Close()
	// The slot frees once the broker has seen the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := amqp091.Dial(url)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a connection closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range open[:2] {
		c.Close()
	}
}

// TestUnackedCapPerConnection checks that a consumer without prefetch
// stops receiving at the connection's unacked cap and resumes when it
// acknowledges.
func TestUnackedCapPerConnection(t *testing.T) {
	s := newTestServer(t, Config{MaxUnackedPerConnection: 10})
	conn, err := dialFrom(s, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	q, _ := ch.QueueDeclare("", false, true, true, false, nil)
	ch.Confirm(false)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 50))
	for i := range 50 {
		ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte{byte(i)}})
	}
	for range 50 {
		<-confirms
	}
	cch, _ := conn.Channel()
	ds, err := cch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last amqp091.Delivery
	for range 10 {
		last = <-ds
	}
	// The queue offered everything it could when the consumer started;
	// the rest wait in the queue.
	if got := s.vhost("/").queues[q.Name].Stats(); got.Ready != 40 || got.Unacked != 10 {
		t.Fatalf("queue %+v, want 40 ready and 10 unacked at the cap", got)
	}
	last.Ack(true)
	for range 10 {
		<-ds
	}
	// The ack's settlement reaches the queue's counters just after the
	// credit it frees has let the next ten go.
	waitUntil(t, "30 ready and 10 unacked after acking", func() bool {
		got := s.vhost("/").queues[q.Name].Stats()
		return got.Ready == 30 && got.Unacked == 10
	})
}

// TestOutboundBufferBounded checks that a client that sends requests but
// never reads replies cannot grow the broker's outbound buffer past the
// bound: the reader stops taking frames instead.
func TestOutboundBufferBounded(t *testing.T) {
	s := newTestServer(t, Config{})
	s.outMaxBuffered = 64 << 10
	client, srvEnd := net.Pipe()
	s.startConn(remotePipe{Conn: srvEnd, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	// Handshake by hand, then flood channel 1 with queue.declare.
	r := bufio.NewReader(client)
	client.Write(amqp.ProtocolHeader)
	fr := amqp.NewFrameReader(r, 1<<20)
	write := func(ch uint16, m amqp.Method) {
		b, err := amqp.AppendMethodFrame(nil, ch, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	fr.ReadFrame() // start
	write(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	fr.ReadFrame() // tune
	write(0, &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072})
	write(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	fr.ReadFrame() // open-ok
	write(1, &amqp.ChannelOpen{})
	fr.ReadFrame() // open-ok
	req, _ := amqp.AppendMethodFrame(nil, 1, &amqp.QueueDeclare{Queue: "flood", AutoDelete: true})
	var c *conn
	s.connsMu.Lock()
	for k := range s.conns {
		c = k
	}
	s.connsMu.Unlock()
	// net.Pipe has no buffer: a write returns only once the broker read
	// it, so when a write stalls the broker has stopped reading.
	stalled := make(chan int)
	go func() {
		n := 0
		for {
			client.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := client.Write(req); err != nil {
				stalled <- n
				return
			}
			n++
		}
	}()
	n := <-stalled
	c.out.mu.Lock()
	buffered := len(c.out.buf)
	c.out.mu.Unlock()
	replySize := len(must(amqp.AppendMethodFrame(nil, 1, &amqp.QueueDeclareOk{Queue: "flood"})))
	if n*replySize < s.outMaxBuffered {
		t.Fatalf("the broker stopped reading after %d requests (%d reply bytes), below the bound", n, n*replySize)
	}
	if buffered > s.outMaxBuffered+replySize {
		t.Fatalf("%d bytes buffered for a client that does not read, bound %d", buffered, s.outMaxBuffered)
	}
	// Reading resumes the flow.
	go io.Copy(io.Discard, r)
	client.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write(req); err != nil {
		t.Fatalf("the broker did not resume reading once the client read: %v", err)
	}
	client.Close()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
