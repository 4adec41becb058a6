package server_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/internal/amqpopen"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// startAdminBroker runs a broker through servertest and returns it with its
// amqp:// URL.
func startAdminBroker(t *testing.T) (*server.Server, string) {
	t.Helper()
	return startAdminBrokerConfig(t, server.Config{})
}

func startAdminBrokerConfig(t *testing.T, cfg server.Config) (*server.Server, string) {
	t.Helper()
	b := servertest.StartBroker(t, cfg)
	return b.Server(), b.URL()
}

func adminDial(t *testing.T, url string) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c, ch, err := amqpopen.Channel(func() (*amqp091.Connection, error) { return amqp091.Dial(url) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ch
}

func openAdmin(t *testing.T, srv *server.Server) *server.AdminSession {
	t.Helper()
	a, err := srv.OpenAdmin("guest", "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func adminCode(err error) uint16 {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

func TestAdminSnapshots(t *testing.T) {
	srv, url := startAdminBroker(t)
	_, ch := adminDial(t, url)
	if err := ch.ExchangeDeclare("adm.x", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("adm.q", true, false, false, false, amqp091.Table{"x-message-ttl": int32(60000)}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("adm.q", "a.#", "adm.x", false, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.Publish("adm.x", "a.b", false, false, amqp091.Publishing{Body: []byte("hello")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("adm.q", "ctag-1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	adminWaitFor(t, func() bool {
		q, err := srv.Queue("/", "adm.q")
		return err == nil && q.Unacked == 1 && q.Ready == 2
	})
	q, _ := srv.Queue("/", "adm.q")
	if !q.Durable || q.Consumers != 1 || q.Args["x-message-ttl"] != int32(60000) || q.ReadyBytes != 10 || q.Memory <= q.ReadyBytes {
		t.Errorf("queue = %+v", q)
	}
	x, err := srv.Exchange("/", "adm.x")
	if err != nil || x.Type != "topic" || !x.Durable || x.Args["alternate-exchange"] != "amq.fanout" || x.Bindings != 1 {
		t.Errorf("exchange = %+v, %v", x, err)
	}
	if _, err := srv.Exchange("/", "nope"); adminCode(err) != amqp.NotFound {
		t.Errorf("missing exchange: %v", err)
	}
	bs, _ := srv.QueueBindings("/", "adm.q")
	if len(bs) != 2 || bs[0].Source != "" || bs[1].Source != "adm.x" || bs[1].RoutingKey != "a.#" {
		t.Errorf("queue bindings = %+v", bs)
	}
	conns := srv.Connections()
	if len(conns) != 1 || conns[0].User != "guest" || conns[0].VHost != "/" || conns[0].Channels != 1 || conns[0].PeerPort == 0 {
		t.Fatalf("connections = %+v", conns)
	}
	cons, _ := srv.Consumers("")
	if len(cons) != 1 || cons[0].Tag != "ctag-1" || cons[0].Queue != "adm.q" || !cons[0].AckRequired || cons[0].Prefetch != 1 || cons[0].Connection != conns[0].Name {
		t.Errorf("consumers = %+v", cons)
	}
	chans := srv.Channels()
	if len(chans) != 1 || chans[0].Unacked != 1 || chans[0].Consumers != 1 || chans[0].Prefetch != 1 {
		t.Errorf("channels = %+v", chans)
	}
	o := srv.Overview()
	if o.Queues != 1 || o.Connections != 1 || o.Consumers != 1 || o.Ready != 2 || o.Unacked != 1 || o.Exchanges != 8 { // amq.rabbitmq.trace included
		t.Errorf("overview = %+v", o)
	}
}

func adminWaitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAdminActions(t *testing.T) {
	srv, url := startAdminBroker(t)
	a := openAdmin(t, srv)
	if err := a.DeclareQueue(server.QueueDecl{Name: "act.q", Durable: true, Args: map[string]any{"x-max-length": int64(10)}}); err != nil {
		t.Fatal(err)
	}
	// Equivalence rules are the AMQP ones.
	err := a.DeclareQueue(server.QueueDecl{Name: "act.q", Durable: false})
	if adminCode(err) != amqp.PreconditionFailed {
		t.Fatalf("inequivalent declare: %v", err)
	}
	// The session recovers from the closed channel.
	if err := a.DeclareExchange(server.ExchangeDecl{Name: "act.x", Type: "fanout", Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeclareExchange(server.ExchangeDecl{Name: "act.bad", Type: "nope"}); adminCode(err) != amqp.CommandInvalid {
		t.Fatalf("bad type: %v", err)
	}
	// A hard error ends the session; a new one works.
	a = openAdmin(t, srv)
	b := server.BindingInfo{VHost: "/", Source: "act.x", Destination: "act.q", DestinationType: "queue", RoutingKey: "k"}
	if err := a.Bind(b); err != nil {
		t.Fatal(err)
	}
	if !srv.HasBinding(b) {
		t.Fatal("binding missing")
	}
	routed, err := a.Publish("act.x", "", amqp.Properties{DeliveryMode: 2, ContentType: "text/plain"}, []byte("m1"))
	if err != nil || !routed {
		t.Fatalf("publish: %v %v", routed, err)
	}
	routed, err = a.Publish("", "nowhere", amqp.Properties{}, []byte("m2"))
	if err != nil || routed {
		t.Fatalf("unroutable publish: %v %v", routed, err)
	}
	if _, err := a.Publish("no.such.x", "", amqp.Properties{}, nil); adminCode(err) != amqp.NotFound {
		t.Fatalf("publish to missing exchange: %v", err)
	}
	if _, err := a.Publish("", "act.q", amqp.Properties{}, []byte("m3")); err != nil {
		t.Fatal(err)
	}

	got, err := a.Get("act.q", 5, server.AckRequeueTrue)
	if err != nil || len(got) != 2 || string(got[0].Body) != "m1" || got[0].MessageCount != 1 || got[0].Redelivered {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if p, _ := amqp.DecodeProperties(got[0].Props); p.ContentType != "text/plain" || p.DeliveryMode != 2 {
		t.Errorf("props = %+v", p)
	}
	got, err = a.Get("act.q", 1, server.AckRequeueFalse)
	if err != nil || len(got) != 1 || !got[0].Redelivered || string(got[0].Body) != "m1" {
		t.Fatalf("get after requeue = %+v, %v", got, err)
	}
	if q, _ := srv.Queue("/", "act.q"); q.Ready != 1 || q.Unacked != 0 {
		t.Fatalf("queue after ack = %+v", q)
	}
	if n, err := srv.PurgeQueue("/", "act.q"); n != 1 || err != nil {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if err := a.Unbind(b); err != nil || srv.HasBinding(b) {
		t.Fatalf("unbind: %v", err)
	}
	if err := a.DeleteExchange("amq.direct", false); adminCode(err) != amqp.AccessRefused {
		t.Fatalf("delete amq.direct: %v", err)
	}
	a = openAdmin(t, srv)
	if err := a.DeleteExchange("act.x", false); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteExchange("act.x", false); adminCode(err) != amqp.NotFound {
		t.Fatalf("delete missing exchange: %v", err)
	}

	// Exclusive queues of other connections can be deleted, as in RabbitMQ.
	_, ch := adminDial(t, url)
	if _, err := ch.QueueDeclare("act.excl", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if q, err := srv.Queue("/", "act.excl"); err != nil || q.Owner != srv.Connections()[0].Name {
		t.Fatalf("exclusive queue = %+v, %v", q, err)
	}
	if _, err := srv.DeleteQueue("/", "act.excl", false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.DeleteQueue("/", "act.excl", false, false); adminCode(err) != amqp.NotFound {
		t.Fatalf("delete missing queue: %v", err)
	}
	// Admin sessions are not listed.
	if n := len(srv.Connections()); n != 1 {
		t.Fatalf("%d connections listed", n)
	}
	if err := srv.CloseConnection(srv.Connections()[0].Name, "bye"); err != nil {
		t.Fatal(err)
	}
	adminWaitFor(t, func() bool { return len(srv.Connections()) == 0 })
}

func TestAdminDurable(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv := b.Server()
	a, err := srv.OpenAdmin("guest", "/")
	if err != nil {
		t.Fatal(err)
	}
	a.DeclareQueue(server.QueueDecl{Name: "dur.q", Durable: true})
	a.DeclareExchange(server.ExchangeDecl{Name: "dur.x", Type: "direct", Durable: true})
	a.Bind(server.BindingInfo{Source: "dur.x", Destination: "dur.q", DestinationType: "queue", RoutingKey: "k"})
	if _, err := a.Publish("dur.x", "k", amqp.Properties{DeliveryMode: 2}, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Restart()
	srv = b.Server()

	q, err := srv.Queue("/", "dur.q")
	if err != nil || q.Ready != 1 {
		t.Fatalf("after restart: %+v %v", q, err)
	}
	if !srv.HasBinding(server.BindingInfo{VHost: "/", Source: "dur.x", Destination: "dur.q", DestinationType: "queue", RoutingKey: "k"}) {
		t.Fatal("binding lost")
	}
	if x, err := srv.Exchange("/", "dur.x"); err != nil || !x.Durable {
		t.Fatalf("exchange after restart: %+v %v", x, err)
	}
}

// TestAdminSnapshotsRace takes snapshots while connections come and go,
// mid-handshake included, with and without heartbeats, opening channels and
// consumers; run it with -race.
func TestAdminSnapshotsRace(t *testing.T) {
	srv, url := startAdminBroker(t)
	_, ch := adminDial(t, url)
	if _, err := ch.QueueDeclare("race.q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			srv.Connections()
			srv.Channels()
			srv.Consumers("")
			srv.Overview()
			srv.Queues("")
			srv.Bindings("")
		}
	}()
	for i := range 30 {
		cfg := amqp091.Config{Heartbeat: time.Duration(i%2) * 10 * time.Second}
		c, err := amqp091.DialConfig(url, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := cch.Consume("race.q", "", false, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		cch2, _ := c.Channel()
		cch2.Close()
		c.Close()
	}
	close(stop)
	<-done
}

func TestAdminPagedQueueMemory(t *testing.T) {
	srv, _ := startAdminBrokerConfig(t, server.Config{QueueWindow: 3})
	a := openAdmin(t, srv)
	if err := a.DeclareQueue(server.QueueDecl{Name: "paged", Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeclareQueue(server.QueueDecl{Name: "transient", Durable: false}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		for _, q := range []string{"paged", "transient"} {
			if _, err := a.Publish("", q, amqp.Properties{DeliveryMode: 2}, []byte("0123456789")); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, _ := srv.Queue("/", "paged")
	if p.Ready != 10 || p.ReadyInMemory != 3 || p.ReadyInMemoryBytes != 30 || p.ReadyBytes != 100 {
		t.Errorf("paged queue = %+v", p)
	}
	// A non-durable queue spills past its window to files of its own.
	tr, _ := srv.Queue("/", "transient")
	if tr.Ready != 10 || tr.ReadyInMemory != 3 || tr.ReadyInMemoryBytes != 30 || tr.Memory != p.Memory {
		t.Errorf("transient queue = %+v (paged %+v)", tr, p)
	}
}

// TestAdminGetBounded: one management "get messages" holds at most
// 64 MiB of messages, however many are asked for; the rest stay queued.
func TestAdminGetBounded(t *testing.T) {
	srv, _ := startAdminBroker(t)
	a := openAdmin(t, srv)
	if err := a.DeclareQueue(server.QueueDecl{Name: "big.q"}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 20<<20)
	for range 6 {
		if _, err := a.Publish("", "big.q", amqp.Properties{}, body); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.Get("big.q", 10000, server.AckRequeueFalse)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d messages of 20 MiB, want 4 (stop once 64 MiB are held)", len(got))
	}
	if q, _ := srv.Queue("/", "big.q"); q.Ready != 2 {
		t.Fatalf("queue after the get = %+v, want 2 left", q)
	}
}

// TestConnectionByteCounters checks the socket counters against what a
// client wrote and read: exactly for a handshake's first bytes, within the
// frame overhead for a burst of messages.
func TestConnectionByteCounters(t *testing.T) {
	srv, url := startAdminBroker(t)
	raw, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write(amqp.ProtocolHeader); err != nil {
		t.Fatal(err)
	}
	// connection.start is one frame: read its header, then the rest.
	var hdr [7]byte
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(raw, hdr[:]); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, binary.BigEndian.Uint32(hdr[3:])+1)
	if _, err := io.ReadFull(raw, rest); err != nil {
		t.Fatal(err)
	}
	got := uint64(len(hdr) + len(rest))
	adminWaitFor(t, func() bool {
		cs := srv.Connections()
		return len(cs) == 1 && cs[0].RecvOct == 8 && cs[0].SendOct == got
	})
	c := srv.Connections()[0]
	if c.RecvCnt != 1 || c.SendCnt != 1 || c.SendPend != 0 {
		t.Errorf("handshake: %d reads, %d writes, %d pending; want 1, 1, 0", c.RecvCnt, c.SendCnt, c.SendPend)
	}
	raw.Close()
	adminWaitFor(t, func() bool { return len(srv.Connections()) == 0 })

	pc, pch := adminDial(t, url)
	_, cch := adminDial(t, url)
	if _, err := pch.QueueDeclare("bytes.q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := cch.Consume("bytes.q", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	byPort := func(port int) server.ConnectionInfo {
		for _, c := range srv.Connections() {
			if c.PeerPort == port {
				return c
			}
		}
		t.Fatalf("no connection from port %d", port)
		return server.ConnectionInfo{}
	}
	pport := pc.LocalAddr().(*net.TCPAddr).Port
	var cport int
	for _, c := range srv.Connections() {
		if c.PeerPort != pport {
			cport = c.PeerPort
		}
	}
	p0, c0 := byPort(pport), byPort(cport)
	const n, size = 100, 10000
	body := make([]byte, size)
	for range n {
		if err := pch.Publish("", "bytes.q", false, false, amqp091.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		select {
		case <-deliveries:
		case <-time.After(5 * time.Second):
			t.Fatal("deliveries stopped")
		}
	}
	// Each message adds its body and up to 200 bytes of frames: the
	// method, the content header, the frame headers.
	// The counters are added after each read and write returns: the
	// client may hold the bytes a moment before they are counted.
	adminWaitFor(t, func() bool {
		return byPort(pport).RecvOct-p0.RecvOct >= n*size && byPort(cport).SendOct-c0.SendOct >= n*size
	})
	p1, c1 := byPort(pport), byPort(cport)
	if d := p1.RecvOct - p0.RecvOct; d > n*(size+200) {
		t.Errorf("publisher's recv_oct grew by %d for %d bytes of bodies", d, n*size)
	}
	if d := c1.SendOct - c0.SendOct; d < n*size || d > n*(size+200) {
		t.Errorf("consumer's send_oct grew by %d for %d bytes of bodies", d, n*size)
	}
	if p1.RecvCnt <= p0.RecvCnt || c1.SendCnt <= c0.SendCnt {
		t.Errorf("read and write counts did not grow: %d -> %d reads, %d -> %d writes", p0.RecvCnt, p1.RecvCnt, c0.SendCnt, c1.SendCnt)
	}
}

// TestOverviewPublishers: a channel counts as a publisher from its first
// publish until it closes.
func TestOverviewPublishers(t *testing.T) {
	srv, url := startAdminBroker(t)
	_, ch := adminDial(t, url)
	if n := srv.Overview().Publishers; n != 0 {
		t.Fatalf("%d publishers before any publish", n)
	}
	for range 2 {
		if err := ch.Publish("", "nowhere", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// The declare's answer follows the publishes on the channel.
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if n := srv.Overview().Publishers; n != 1 {
		t.Fatalf("%d publishers after one channel published twice, want 1", n)
	}
	// channel.close-ok comes after the channel let its resources go.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if n := srv.Overview().Publishers; n != 0 {
		t.Fatalf("%d publishers after the publishing channel closed, want 0", n)
	}
}
