package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// FuzzSession mutates whole client sessions (every byte a client sends,
// from the protocol header to connection.close) and plays each against an
// in-process broker that every execution of a fuzz worker shares. An
// execution fails if the broker panics (in any goroutine, recovered or
// not), logs an error, does not end the connection within fuzzDeadline
// once the client has stopped sending, allocates far more than the input
// justifies, leaves goroutines or state behind, or then fails a fresh
// well-behaved client's declare, publish and get.
//
// An execution takes about a millisecond, and a concurrent broker's
// coverage is noisy (new inputs come often), so the default minimisation
// of each new input (up to 60 s, quadratic in its length) would take most
// of a run; fuzz with
//
//	go test -run='^$' -fuzz='^FuzzSession$' -fuzzminimizetime=100x ./server
//
// and minimise a crasher afterwards with a longer -fuzzminimizetime.
func FuzzSession(f *testing.F) {
	b := startFuzzBroker(f)
	for _, s := range sessionSeeds(f) {
		f.Add(s)
	}
	for _, s := range b.recordSessions(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, session []byte) {
		b.run(t, session)
	})
}

// fuzzDeadline bounds each step of an execution: a broker that keeps a
// connection open this long after the client's last byte is hung.
const fuzzDeadline = 10 * time.Second

// fuzzBroker is one broker serving many executions in turn.
type fuzzBroker struct {
	srv      *Server
	addr     string
	accepted chan *fuzzConn
	served   chan struct{} // closed when Serve returns

	logMu  sync.Mutex
	logged []string // records at error level or above

	goroutines int // after a clean execution; 0 until the first
}

// fuzzConn is an accepted socket that reports its close, which serve does
// last, after the connection's cleanup. Embedding *net.TCPConn keeps
// syscall.Conn, so the broker reads and writes it as any client socket.
type fuzzConn struct {
	*net.TCPConn
	once   sync.Once
	closed chan struct{}
}

func (c *fuzzConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

type fuzzListener struct {
	net.Listener
	accepted chan<- *fuzzConn
}

func (l *fuzzListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &fuzzConn{TCPConn: nc.(*net.TCPConn), closed: make(chan struct{})}
	l.accepted <- fc
	return fc, nil
}

type fuzzLog struct{ b *fuzzBroker }

func (w fuzzLog) Write(p []byte) (int, error) {
	w.b.logMu.Lock()
	w.b.logged = append(w.b.logged, string(p))
	w.b.logMu.Unlock()
	return len(p), nil
}

func startFuzzBroker(f testing.TB) *fuzzBroker {
	b := &fuzzBroker{accepted: make(chan *fuzzConn, 4), served: make(chan struct{})}
	log := zerolog.New(fuzzLog{b}).Level(zerolog.ErrorLevel)
	srv, err := New(Config{
		Listen:  "127.0.0.1:0",
		DataDir: f.TempDir(),
		Log:     &log,
		// No resource alarm may block a publisher: a blocked publisher
		// looks like a hang.
		MemoryHighWatermarkBytes: 1 << 50,
		DiskFreeLimit:            1,
		// Fuzzed logins fail all the time, from one address: a throttle
		// that never holds them back, or every later execution waits.
		hooks: testhooks.Hooks{
			Store:         persist.NewMemory(),
			LoginThrottle: auth.NewThrottle(auth.ThrottleConfig{Free: 1 << 30}),
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		srv.Close()
		f.Fatal(err)
	}
	srv.ln = &fuzzListener{Listener: srv.ln, accepted: b.accepted}
	b.srv, b.addr = srv, srv.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(b.served)
		if err := srv.Serve(ctx); err != nil {
			f.Errorf("serve: %v", err)
		}
	}()
	f.Cleanup(func() {
		cancel()
		<-b.served
	})
	return b
}

// run plays one session and checks the broker afterwards.
func (b *fuzzBroker) run(t testing.TB, session []byte) {
	// Every wait below has its deadline, but a lock the broker never
	// releases would stall the fuzzer silently (it does not time out an
	// execution): the watchdog turns that into a crash, with every
	// goroutine's stack.
	watchdog := time.AfterFunc(5*fuzzDeadline, func() {
		buf := make([]byte, 8<<20)
		fmt.Fprintf(os.Stderr, "FuzzSession: an execution took over %v:\n%s\n", 5*fuzzDeadline, buf[:runtime.Stack(buf, true)])
		panic("FuzzSession: execution hung")
	})
	defer watchdog.Stop()
	before := heapAllocs()
	b.play(t, session)
	allocated := heapAllocs() - before
	b.checkLog(t)
	// The bound is loose (decoded tables, queues and messages cost more
	// than their bytes); it is there to catch a length from the wire
	// trusted for an allocation.
	if limit := uint64(32<<20 + 1024*len(session)); allocated > limit {
		t.Fatalf("a session of %d bytes made the broker allocate %d bytes (limit %d)", len(session), allocated, limit)
	}
	b.checkAfterConn(t)
	b.reset(t)
	b.healthy(t)
	b.checkLog(t)
	b.checkGoroutines(t)
}

// dial opens a client connection and returns it with the broker's end of
// it.
func (b *fuzzBroker) dial(t testing.TB) (*net.TCPConn, *fuzzConn) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.addr, fuzzDeadline)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	select {
	case sc := <-b.accepted:
		return nc.(*net.TCPConn), sc
	case <-b.served:
		t.Fatal("the broker stopped serving")
	case <-time.After(fuzzDeadline):
		t.Fatalf("the broker did not accept a connection within %v", fuzzDeadline)
	}
	return nil, nil
}

// play sends session, then half-closes, reading whatever the broker sends
// until it closes the connection, and waits for the broker to be done with
// it.
func (b *fuzzBroker) play(t testing.TB, session []byte) {
	nc, sc := b.dial(t)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(fuzzDeadline))
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, nc)
		read <- err
	}()
	// A write error is the broker having closed first, except a timeout.
	if _, err := nc.Write(session); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the broker stopped reading the session for %v", fuzzDeadline)
	}
	nc.CloseWrite()
	if err := <-read; errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the broker did not end the connection within %v of the client's end of input", fuzzDeadline)
	}
	b.waitClosed(t, sc)
}

func (b *fuzzBroker) waitClosed(t testing.TB, sc *fuzzConn) {
	t.Helper()
	select {
	case <-sc.closed:
	case <-time.After(fuzzDeadline):
		t.Fatalf("the broker did not close its socket within %v of the client's", fuzzDeadline)
	}
}

func (b *fuzzBroker) checkLog(t testing.TB) {
	t.Helper()
	b.logMu.Lock()
	logged := b.logged
	b.logged = nil
	b.logMu.Unlock()
	if len(logged) > 0 {
		t.Fatalf("the broker logged errors:\n%s", strings.Join(logged, ""))
	}
}

// checkAfterConn checks what a closed connection must have given back:
// every connection is gone from its vhost's count, and no direct reply-to
// consumer is left.
func (b *fuzzBroker) checkAfterConn(t testing.TB) {
	t.Helper()
	for _, v := range b.vhosts() {
		if n := v.conns.Load(); n != 0 {
			t.Fatalf("vhost %q counts %d connections after the last closed", v.name, n)
		}
	}
	if n := b.srv.replies.Len(); n != 0 {
		t.Fatalf("%d direct reply-to consumers left after their connection closed", n)
	}
}

func (b *fuzzBroker) vhosts() []*vhost {
	b.srv.vhostsMu.RLock()
	defer b.srv.vhostsMu.RUnlock()
	return slices.Collect(maps.Values(b.srv.vhosts))
}

// builtinExchanges are the exchanges every vhost starts with.
var builtinExchanges = []string{"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"}

// reset deletes what the session declared (queues, exchanges, bindings), so
// that every execution starts from the same broker state.
func (b *fuzzBroker) reset(t testing.TB) {
	t.Helper()
	for _, v := range b.vhosts() {
		v.mu.RLock()
		qs := slices.Collect(maps.Values(v.queues))
		v.mu.RUnlock()
		for _, q := range qs {
			if _, err := v.deleteQueue(q, false, false); err != nil {
				t.Fatalf("deleting queue %q: %v", q.Decl().Name, err)
			}
		}
		v.mu.Lock()
		for name, e := range v.exchanges {
			if !slices.Contains(builtinExchanges, name) {
				v.removeExchange(e)
			}
		}
		for _, name := range builtinExchanges {
			v.unbindDest(binding.Destination{Kind: binding.Exchange, Name: name})
		}
		var bad []string
		for name, e := range v.exchanges {
			if !slices.Contains(builtinExchanges, name) || e.HasBindings() {
				bad = append(bad, name)
			}
		}
		nq, ne := len(v.queues), len(v.exchanges)
		v.mu.Unlock()
		if nq != 0 || ne != len(builtinExchanges) || len(bad) > 0 {
			t.Fatalf("vhost %q after reset: %d queues, %d exchanges (want %d), left over: %q", v.name, nq, ne, len(builtinExchanges), bad)
		}
	}
}

// healthy runs a fresh well-behaved client: declare, publish, get, close.
func (b *fuzzBroker) healthy(t testing.TB) {
	nc, sc := b.dial(t)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(fuzzDeadline))
	if _, err := nc.Write(healthSession); err != nil {
		t.Fatalf("health check: write: %v", err)
	}
	fr := amqp.NewFrameReader(nc, 4096)
	fr.SetMaxFrameSize(1 << 17)
	var got []string
	var body []byte
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("health check: after %q: %v", got, err)
		}
		switch fm.Type {
		case amqp.FrameBody:
			body = append(body, fm.Payload...)
			continue
		case amqp.FrameMethod:
		default:
			continue
		}
		m, err := amqp.DecodeMethod(fm.Payload)
		if err != nil {
			t.Fatalf("health check: after %q: %v", got, err)
		}
		got = append(got, m.Name())
		switch m := m.(type) {
		case *amqp.ConnectionClose:
			t.Fatalf("health check: after %q: connection.close %d %s", got, m.ReplyCode, m.ReplyText)
		case *amqp.ChannelClose:
			t.Fatalf("health check: after %q: channel.close %d %s", got, m.ReplyCode, m.ReplyText)
		}
		if _, ok := m.(*amqp.ConnectionCloseOk); ok {
			break
		}
	}
	want := []string{"connection.start", "connection.tune", "connection.open-ok", "channel.open-ok",
		"queue.declare-ok", "basic.get-ok", "connection.close-ok"}
	if !slices.Equal(got, want) || string(body) != "ping" {
		t.Fatalf("health check: got %q with body %q, want %q with body ping", got, body, want)
	}
	nc.Close()
	b.waitClosed(t, sc)
}

// checkGoroutines waits for the goroutine count to come back to where the
// first execution left it.
func (b *fuzzBroker) checkGoroutines(t testing.TB) {
	t.Helper()
	if b.goroutines == 0 {
		b.goroutines = runtime.NumGoroutine()
		return
	}
	deadline := time.Now().Add(fuzzDeadline)
	for n := runtime.NumGoroutine(); n > b.goroutines; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines %v after the session, %d before:\n%s", n, fuzzDeadline, b.goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// heapAllocs reads the cumulative heap allocation counter without stopping
// the world.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sessionBuilder writes a client's side of a session with the amqp
// package's encoders. The client never waits for a reply: every method
// goes out at once, as a pipelining client sends them.
type sessionBuilder struct {
	tb       testing.TB
	b        []byte
	frameMax uint32
}

func newSession(tb testing.TB, frameMax uint32, heartbeat uint16) *sessionBuilder {
	return newSessionTo(tb, "/", frameMax, heartbeat)
}

// newSessionTo starts a session: protocol header, start-ok (PLAIN,
// guest), tune-ok and open of vhost.
func newSessionTo(tb testing.TB, vhost string, frameMax uint32, heartbeat uint16) *sessionBuilder {
	s := &sessionBuilder{tb: tb, frameMax: frameMax}
	s.b = append(s.b, amqp.ProtocolHeader...)
	s.method(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{
			"product": "fuzz",
			"capabilities": amqp.Table{
				"publisher_confirms": true, "consumer_cancel_notify": true,
				"connection.blocked": true, "authentication_failure_close": true,
			},
		},
		Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
	})
	s.method(0, &amqp.ConnectionTuneOk{ChannelMax: 64, FrameMax: frameMax, Heartbeat: heartbeat})
	s.method(0, &amqp.ConnectionOpen{VirtualHost: vhost})
	return s
}

func (s *sessionBuilder) method(ch uint16, ms ...amqp.Method) *sessionBuilder {
	for _, m := range ms {
		var err error
		if s.b, err = amqp.AppendMethodFrame(s.b, ch, m); err != nil {
			s.tb.Fatalf("encoding %s: %v", m.Name(), err)
		}
	}
	return s
}

func (s *sessionBuilder) publish(ch uint16, m *amqp.BasicPublish, p amqp.Properties, body string) *sessionBuilder {
	s.method(ch, m)
	raw, err := p.Append(nil)
	if err != nil {
		s.tb.Fatalf("encoding properties: %v", err)
	}
	s.b = amqp.AppendHeaderFrame(s.b, ch, amqp.ClassBasic, uint64(len(body)), raw)
	s.b = amqp.AppendBodyFrames(s.b, ch, []byte(body), s.frameMax)
	return s
}

func (s *sessionBuilder) heartbeat() *sessionBuilder {
	s.b = amqp.AppendHeartbeat(s.b)
	return s
}

func (s *sessionBuilder) close() []byte {
	s.method(0, &amqp.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	s.method(0, &amqp.ConnectionCloseOk{})
	return s.b
}

// healthSession is the well-behaved client of the health check.
var healthSession = func() []byte {
	s := newSession(nil, 1<<17, 0)
	s.method(1, &amqp.ChannelOpen{}, &amqp.QueueDeclare{Queue: "fuzz.health", Exclusive: true})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "fuzz.health"}, amqp.Properties{}, "ping")
	s.method(1, &amqp.BasicGet{Queue: "fuzz.health", NoAck: true})
	s.method(0, &amqp.ConnectionClose{ReplyCode: 200})
	return s.b
}()

// sessionSeeds are sessions covering most methods, written with the amqp
// encoders.
func sessionSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	long := strings.Repeat("0123456789abcdef", 300) // two frames at frame_max 4096

	// The smallest session, and one that stops after the header.
	seeds = append(seeds, newSession(tb, 0, 0).close(), amqp.ProtocolHeader)

	// Topology: every exchange type, queue arguments, bindings, deletes.
	s := newSession(tb, 4096, 0)
	s.method(1, &amqp.ChannelOpen{},
		&amqp.ExchangeDeclare{Exchange: "x.topic", Type: "topic", Durable: true},
		&amqp.ExchangeDeclare{Exchange: "x.fan", Type: "fanout", AutoDelete: true},
		&amqp.ExchangeDeclare{Exchange: "x.hdr", Type: "headers", Arguments: amqp.Table{"alternate-exchange": "x.fan"}},
		&amqp.ExchangeDeclare{Exchange: "x.int", Type: "direct", Internal: true, NoWait: true},
		&amqp.ExchangeDeclare{Exchange: "x.topic", Type: "topic", Passive: true},
		&amqp.QueueDeclare{Queue: "q.dur", Durable: true, Arguments: amqp.Table{
			"x-message-ttl": int32(60000), "x-max-length": int32(10), "x-overflow": "reject-publish",
			"x-dead-letter-exchange": "x.fan", "x-dead-letter-routing-key": "dead"}},
		&amqp.QueueDeclare{Queue: "q.prio", Arguments: amqp.Table{"x-max-priority": int32(5), "x-expires": int32(100000)}},
		&amqp.QueueDeclare{Queue: "", Exclusive: true, AutoDelete: true},
		&amqp.QueueDeclare{Queue: "q.lazy", Arguments: amqp.Table{"x-queue-mode": "lazy", "x-single-active-consumer": true}},
		&amqp.QueueDeclare{Queue: "q.quorum", Durable: true, Arguments: amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(2)}},
		&amqp.QueueBind{Queue: "q.dur", Exchange: "x.topic", RoutingKey: "a.*.#"},
		&amqp.QueueBind{Queue: "q.prio", Exchange: "x.hdr", Arguments: amqp.Table{"x-match": "any", "k": "v"}},
		&amqp.QueueBind{Queue: "q.lazy", Exchange: "x.fan", NoWait: true},
		&amqp.ExchangeBind{Destination: "x.fan", Source: "x.topic", RoutingKey: "#"},
		&amqp.ExchangeUnbind{Destination: "x.fan", Source: "x.topic", RoutingKey: "#"},
		&amqp.QueueUnbind{Queue: "q.dur", Exchange: "x.topic", RoutingKey: "a.*.#"},
		&amqp.QueuePurge{Queue: "q.dur"},
		&amqp.QueueDelete{Queue: "q.prio", IfUnused: true, IfEmpty: true},
		&amqp.ExchangeDelete{Exchange: "x.hdr", IfUnused: true},
		&amqp.ExchangeDelete{Exchange: "x.int", NoWait: true},
		&amqp.ChannelClose{ReplyCode: 200})
	seeds = append(seeds, s.close())

	// Publishing and consuming: routing, properties, mandatory returns,
	// multi-frame bodies, acks of each kind, recover, cancel, get, flow.
	s = newSession(tb, 4096, 0)
	props := amqp.Properties{
		ContentType: "text/plain", ContentEncoding: "utf-8", Headers: amqp.Table{"k": "v", "n": int32(1)},
		DeliveryMode: 2, Priority: 3, CorrelationID: "c", ReplyTo: "r", Expiration: "60000", MessageID: "m",
		Timestamp: time.Unix(1700000000, 0), Type: "t", UserID: "guest", AppID: "a",
		Flags: amqp.FlagContentType | amqp.FlagContentEncoding | amqp.FlagHeaders | amqp.FlagDeliveryMode |
			amqp.FlagPriority | amqp.FlagCorrelationID | amqp.FlagReplyTo | amqp.FlagExpiration |
			amqp.FlagMessageID | amqp.FlagTimestamp | amqp.FlagType | amqp.FlagUserID | amqp.FlagAppID,
	}
	s.method(1, &amqp.ChannelOpen{},
		&amqp.ExchangeDeclare{Exchange: "x.t", Type: "topic"},
		&amqp.QueueDeclare{Queue: "q1"},
		&amqp.QueueDeclare{Queue: "q2", Arguments: amqp.Table{"x-max-priority": int32(9)}},
		&amqp.QueueBind{Queue: "q1", Exchange: "x.t", RoutingKey: "k.#"},
		&amqp.QueueBind{Queue: "q2", Exchange: "x.t", RoutingKey: "*.b"},
		&amqp.BasicQos{PrefetchCount: 2})
	s.publish(1, &amqp.BasicPublish{Exchange: "x.t", RoutingKey: "k.b"}, props, "hello")
	s.publish(1, &amqp.BasicPublish{Exchange: "x.t", RoutingKey: "k.c", Mandatory: true}, amqp.Properties{}, long)
	s.publish(1, &amqp.BasicPublish{Exchange: "x.t", RoutingKey: "none", Mandatory: true}, amqp.Properties{}, "unroutable")
	s.publish(1, &amqp.BasicPublish{RoutingKey: "q1"}, amqp.Properties{}, "")
	s.heartbeat()
	s.method(1, &amqp.BasicConsume{Queue: "q1", ConsumerTag: "c1"},
		&amqp.BasicAck{DeliveryTag: 1},
		&amqp.BasicNack{DeliveryTag: 2, Requeue: true},
		&amqp.BasicReject{DeliveryTag: 3, Requeue: false},
		&amqp.BasicRecover{Requeue: true},
		&amqp.BasicAck{DeliveryTag: 5, Multiple: true},
		&amqp.BasicCancel{ConsumerTag: "c1"},
		&amqp.BasicGet{Queue: "q2"},
		&amqp.BasicAck{DeliveryTag: 6},
		&amqp.BasicGet{Queue: "q2", NoAck: true},
		&amqp.ChannelFlow{Active: true},
		&amqp.BasicConsume{Queue: "q2", NoAck: true, Exclusive: true},
		&amqp.BasicRecoverAsync{Requeue: true})
	s.method(2, &amqp.ChannelOpen{}, &amqp.BasicConsume{Queue: "q1", NoWait: true, ConsumerTag: "c2",
		Arguments: amqp.Table{"x-priority": int32(1)}})
	s.publish(2, &amqp.BasicPublish{Exchange: "amq.topic", RoutingKey: "k.a"}, props, "two")
	s.method(2, &amqp.BasicNack{Multiple: true}, &amqp.ChannelFlow{Active: false})
	seeds = append(seeds, s.close())

	// Transactions and confirms.
	s = newSession(tb, 1<<17, 0)
	s.method(1, &amqp.ChannelOpen{}, &amqp.QueueDeclare{Queue: "tq", Durable: true}, &amqp.TxSelect{})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "tq"}, amqp.Properties{DeliveryMode: 2, Flags: amqp.FlagDeliveryMode}, "tx1")
	s.method(1, &amqp.TxCommit{}, &amqp.BasicGet{Queue: "tq"}, &amqp.BasicAck{DeliveryTag: 1}, &amqp.TxRollback{})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "tq"}, amqp.Properties{}, "tx2")
	s.method(1, &amqp.TxCommit{}, &amqp.ConfirmSelect{})
	s.method(2, &amqp.ChannelOpen{}, &amqp.ConfirmSelect{})
	s.publish(2, &amqp.BasicPublish{RoutingKey: "tq"}, amqp.Properties{DeliveryMode: 2, Flags: amqp.FlagDeliveryMode}, "c1")
	s.publish(2, &amqp.BasicPublish{Exchange: "missing", RoutingKey: "tq"}, amqp.Properties{}, "c2")
	s.method(2, &amqp.ChannelCloseOk{})
	s.method(3, &amqp.ChannelOpen{}, &amqp.ConfirmSelect{NoWait: true}, &amqp.TxSelect{})
	s.method(3, &amqp.ChannelCloseOk{})
	s.method(4, &amqp.ChannelOpen{}, &amqp.QueueDeclare{Queue: "tq", Passive: true}, &amqp.QueueDelete{Queue: "tq"})
	seeds = append(seeds, s.close())

	// Dead-lettering, expiry and direct reply-to.
	s = newSession(tb, 1<<17, 0)
	s.method(1, &amqp.ChannelOpen{},
		&amqp.ExchangeDeclare{Exchange: "dlx", Type: "fanout"},
		&amqp.QueueDeclare{Queue: "dead"},
		&amqp.QueueBind{Queue: "dead", Exchange: "dlx"},
		&amqp.QueueDeclare{Queue: "short", Arguments: amqp.Table{"x-message-ttl": int32(0), "x-dead-letter-exchange": "dlx"}},
		&amqp.QueueDeclare{Queue: "limited", Arguments: amqp.Table{"x-max-length": int32(1), "x-dead-letter-exchange": "dlx"}})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "short"}, amqp.Properties{}, "expires")
	s.publish(1, &amqp.BasicPublish{RoutingKey: "limited"}, amqp.Properties{Expiration: "0", Flags: amqp.FlagExpiration}, "a")
	s.publish(1, &amqp.BasicPublish{RoutingKey: "limited"}, amqp.Properties{}, "b")
	s.method(1, &amqp.BasicGet{Queue: "limited"}, &amqp.BasicReject{DeliveryTag: 1},
		&amqp.BasicConsume{Queue: "amq.rabbitmq.reply-to", NoAck: true})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "dead"}, amqp.Properties{ReplyTo: "amq.rabbitmq.reply-to", Flags: amqp.FlagReplyTo}, "req")
	s.method(1, &amqp.BasicGet{Queue: "dead", NoAck: true})
	seeds = append(seeds, s.close())

	// Errors: a soft error, then what a client sends next; a frame on a
	// closed channel; a hard error; a wrong vhost.
	s = newSession(tb, 1<<17, 0)
	s.method(1, &amqp.ChannelOpen{}, &amqp.QueueDeclare{Queue: "nope", Passive: true}, &amqp.QueueDeclare{Queue: "ignored"})
	s.method(1, &amqp.ChannelCloseOk{}, &amqp.ChannelOpen{}, &amqp.BasicAck{DeliveryTag: 99})
	s.method(5, &amqp.QueueDeclare{Queue: "no-channel"})
	seeds = append(seeds, s.close())
	seeds = append(seeds, newSessionTo(tb, "no-such-vhost", 1<<17, 0).close())

	// The rarer methods: update-secret, access.request, global qos, a
	// consumer with arguments on a priority queue, a channel over
	// channel_max; and the AMQP 0-9 protocol header.
	s = newSession(tb, 1<<17, 0)
	s.method(0, &amqp.ConnectionUpdateSecret{NewSecret: "guest", Reason: "rotate"})
	s.method(1, &amqp.ChannelOpen{}, &amqp.AccessRequest{Realm: "/data", Active: true, Read: true},
		&amqp.BasicQos{PrefetchCount: 1, Global: true},
		&amqp.QueueDeclare{Queue: "p", Arguments: amqp.Table{"x-max-priority": int32(2), "x-queue-type": "classic"}},
		&amqp.BasicConsume{Queue: "p", ConsumerTag: "pc", Arguments: amqp.Table{"x-priority": int32(-1), "x-cancel-on-ha-failover": true}})
	s.publish(1, &amqp.BasicPublish{RoutingKey: "p"}, amqp.Properties{Priority: 9, Flags: amqp.FlagPriority}, "prio")
	s.method(1, &amqp.BasicReject{DeliveryTag: 1, Requeue: true}, &amqp.BasicCancel{ConsumerTag: "pc", NoWait: true})
	s.method(65, &amqp.ChannelOpen{})
	seeds = append(seeds, s.close())
	s = newSession(tb, 1<<17, 0)
	copy(s.b, "AMQP\x01\x01\x00\x09")
	seeds = append(seeds, s.close())

	// A session that stops in the middle of a message whose announced body
	// is large (the broker used to allocate it whole on the header).
	s = newSession(tb, 1<<17, 60)
	s.method(1, &amqp.ChannelOpen{}, &amqp.BasicPublish{RoutingKey: "q"})
	s.b = amqp.AppendHeaderFrame(s.b, 1, amqp.ClassBasic, 100<<20, []byte{0, 0})
	s.b = amqp.AppendBodyFrames(s.b, 1, []byte("partial"), 0)
	seeds = append(seeds, s.b)
	return seeds
}

// recordingConn keeps a copy of what the client writes.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, p...)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// recordSessions runs amqp091-go clients against the broker and returns
// the bytes each sent.
func (b *fuzzBroker) recordSessions(f *testing.F) [][]byte {
	var sessions [][]byte
	record := func(name string, fn func(ch *amqp091.Channel) error) {
		var rc *recordingConn
		conn, err := amqp091.DialConfig("amqp://guest:guest@"+b.addr+"/", amqp091.Config{
			Heartbeat: time.Hour, // no heartbeat while recording
			FrameSize: 4096,      // bodies of several frames
			Dial: func(network, addr string) (net.Conn, error) {
				nc, err := net.DialTimeout(network, addr, fuzzDeadline)
				if err != nil {
					return nil, err
				}
				rc = &recordingConn{Conn: nc}
				return rc, nil
			},
		})
		if err != nil {
			f.Fatalf("recording %s: %v", name, err)
		}
		sc := <-b.accepted
		ch, err := conn.Channel()
		if err == nil {
			err = fn(ch)
		}
		if err != nil {
			f.Fatalf("recording %s: %v", name, err)
		}
		if err := conn.Close(); err != nil {
			f.Fatalf("recording %s: close: %v", name, err)
		}
		select {
		case <-sc.closed:
		case <-time.After(fuzzDeadline):
			f.Fatalf("recording %s: the broker did not close the connection", name)
		}
		rc.mu.Lock()
		sessions = append(sessions, bytes.Clone(rc.out))
		rc.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
	defer cancel()
	publish := func(ch *amqp091.Channel, ex, key string, p amqp091.Publishing) error {
		return ch.PublishWithContext(ctx, ex, key, false, false, p)
	}
	record("consume", func(ch *amqp091.Channel) error {
		if err := ch.ExchangeDeclare("rec.x", "topic", false, true, false, false, nil); err != nil {
			return err
		}
		q, err := ch.QueueDeclare("", false, false, true, false, amqp091.Table{"x-max-priority": int32(3)})
		if err != nil {
			return err
		}
		if err := ch.QueueBind(q.Name, "a.#", "rec.x", false, nil); err != nil {
			return err
		}
		if err := ch.Qos(10, 0, false); err != nil {
			return err
		}
		for i, body := range []string{"one", "two", "three"} {
			if err := publish(ch, "rec.x", "a.b", amqp091.Publishing{
				Headers: amqp091.Table{"i": int32(i)}, ContentType: "text/plain", Priority: uint8(i),
				MessageId: body, Body: []byte(body),
			}); err != nil {
				return err
			}
		}
		ds, err := ch.Consume(q.Name, "rec", false, false, false, false, nil)
		if err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			var d amqp091.Delivery
			select {
			case d = <-ds:
			case <-ctx.Done():
				return ctx.Err()
			}
			switch i {
			case 0:
				err = d.Ack(false)
			case 1:
				err = d.Nack(false, false)
			default:
				err = d.Reject(false)
			}
			if err != nil {
				return err
			}
		}
		if err := ch.Cancel("rec", false); err != nil {
			return err
		}
		if _, _, err := ch.Get(q.Name, true); err != nil {
			return err
		}
		if _, err := ch.QueuePurge(q.Name, false); err != nil {
			return err
		}
		if _, err := ch.QueueDelete(q.Name, false, false, false); err != nil {
			return err
		}
		return ch.Close()
	})
	record("confirm", func(ch *amqp091.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		q, err := ch.QueueDeclare("rec.confirm", true, false, false, false, nil)
		if err != nil {
			return err
		}
		for _, body := range []string{"c1", strings.Repeat("c", 5000)} {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, true, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("confirm: %v %v", ok, err)
			}
		}
		_, err = ch.QueueDelete(q.Name, false, false, false)
		return err
	})
	record("tx", func(ch *amqp091.Channel) error {
		q, err := ch.QueueDeclare("rec.tx", false, false, false, false, nil)
		if err != nil {
			return err
		}
		if err := ch.Tx(); err != nil {
			return err
		}
		if err := publish(ch, "", q.Name, amqp091.Publishing{Body: []byte("t1")}); err != nil {
			return err
		}
		if err := ch.TxCommit(); err != nil {
			return err
		}
		if err := publish(ch, "", q.Name, amqp091.Publishing{Body: []byte("t2")}); err != nil {
			return err
		}
		if err := ch.TxRollback(); err != nil {
			return err
		}
		d, ok, err := ch.Get(q.Name, false)
		if err != nil || !ok {
			return fmt.Errorf("get: %v %v", ok, err)
		}
		if err := d.Ack(false); err != nil {
			return err
		}
		if err := ch.TxCommit(); err != nil {
			return err
		}
		_, err = ch.QueueDelete(q.Name, false, false, false)
		return err
	})
	return sessions
}
