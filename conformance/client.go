package conformance

// Helpers for the client-level cases, which drive the broker through
// github.com/rabbitmq/amqp091-go.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	// clWaitTimeout bounds every wait for something that should happen.
	clWaitTimeout = 5 * time.Second
	// clQuietPeriod is how long a case waits to be reasonably sure that
	// something does NOT happen (no delivery, no close).
	clQuietPeriod = 300 * time.Millisecond
	// clCaseDeadline is when a case's connections are forcibly closed.
	clCaseDeadline = 20 * time.Second
)

// AMQP reply codes used by the cases.
const (
	clCodeNoRoute            = 312
	clCodeAccessRefused      = 403
	clCodeNotFound           = 404
	clCodeResourceLocked     = 405
	clCodePreconditionFailed = 406
	clCodeCommandInvalid     = 503
	clCodeNotAllowed         = 530
	clCodeNotImplemented     = 540
)

// clCodeNames maps a reply code to the name RabbitMQ puts at the start of the
// reply text ("NOT_FOUND - no queue 'x' in vhost '/'").
var clCodeNames = map[int]string{
	312: "NO_ROUTE",
	320: "CONNECTION_FORCED",
	402: "INVALID_PATH",
	403: "ACCESS_REFUSED",
	404: "NOT_FOUND",
	405: "RESOURCE_LOCKED",
	406: "PRECONDITION_FAILED",
	501: "FRAME_ERROR",
	502: "SYNTAX_ERROR",
	503: "COMMAND_INVALID",
	504: "CHANNEL_ERROR",
	505: "UNEXPECTED_FRAME",
	506: "RESOURCE_ERROR",
	530: "NOT_ALLOWED",
	540: "NOT_IMPLEMENTED",
	541: "INTERNAL_ERROR",
}

// clUniq returns a fresh name "conf-<what>-<random hex>" so that cases never
// collide with each other or with leftovers of earlier runs.
func clUniq(what string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "conf-" + what + "-" + hex.EncodeToString(b[:])
}

// clUrlUser returns the user name of the target URL ("guest" by default).
func clUrlUser(tg Target) string {
	u, err := url.Parse(tg.URL)
	if err != nil || u.User == nil || u.User.Username() == "" {
		return "guest"
	}
	return u.User.Username()
}

// clConnect dials tg. The TCP connection is forcibly closed after limit
// (unless the returned timer is stopped first): amqp091-go has no timeouts
// on synchronous methods, so this is what makes a case against a broker that
// never answers fail (with a closed-connection error) instead of hanging.
func clConnect(tg Target, limit time.Duration) (*amqp.Connection, net.Conn, *time.Timer, error) {
	var raw net.Conn
	conn, err := amqp.DialConfig(tg.URL, amqp.Config{
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := amqp.DefaultDial(clWaitTimeout)(network, addr)
			raw = c // DialConfig calls Dial synchronously
			return c, err
		},
	})
	if err != nil {
		if raw != nil {
			_ = raw.Close()
		}
		return nil, nil, nil, err
	}
	kill := time.AfterFunc(limit, func() { _ = raw.Close() })
	return conn, raw, kill, nil
}

// clDial opens a connection to the target; it is closed at cleanup, and
// forcibly after clCaseDeadline.
func clDial(t T, tg Target) *amqp.Connection {
	t.Helper()
	conn, raw, kill, err := clConnect(tg, clCaseDeadline)
	if err != nil {
		t.Fatalf("dial %s: %v", tg.Addr(), err)
	}
	t.Cleanup(func() {
		kill.Stop()
		_ = conn.CloseDeadline(time.Now().Add(2 * time.Second))
		_ = raw.Close()
	})
	return conn
}

// clOpenChan opens a channel on conn; it is closed at cleanup (without
// waiting more than a moment for channel.close-ok).
func clOpenChan(t T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = ch.Close()
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			// the connection's cleanup will unblock it
		}
	})
	return ch
}

// clDialChan dials and opens one channel.
func clDialChan(t T, tg Target) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn := clDial(t, tg)
	return conn, clOpenChan(t, conn)
}

// clWithAdmin runs f on a fresh connection and channel, ignoring failures.
// It is used by cleanups, which must not depend on the case's (possibly
// closed) channels.
func clWithAdmin(tg Target, f func(ch *amqp.Channel)) {
	conn, raw, kill, err := clConnect(tg, clWaitTimeout)
	if err != nil {
		return
	}
	defer raw.Close()
	defer kill.Stop()
	defer conn.CloseDeadline(time.Now().Add(2 * time.Second))
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	f(ch)
}

// clCleanupQueue deletes queue name at cleanup time.
func clCleanupQueue(t T, tg Target, name string) {
	t.Cleanup(func() {
		clWithAdmin(tg, func(ch *amqp.Channel) { _, _ = ch.QueueDelete(name, false, false, false) })
	})
}

// clCleanupExchange deletes exchange name at cleanup time.
func clCleanupExchange(t T, tg Target, name string) {
	t.Cleanup(func() {
		clWithAdmin(tg, func(ch *amqp.Channel) { _ = ch.ExchangeDelete(name, false, false) })
	})
}

// clDeclareQueue declares a fresh non-durable queue (unique name derived from
// what) and schedules its deletion.
func clDeclareQueue(t T, tg Target, ch *amqp.Channel, what string, args amqp.Table) string {
	t.Helper()
	name := clUniq(what)
	clCleanupQueue(t, tg, name)
	if _, err := ch.QueueDeclare(name, false, false, false, false, args); err != nil {
		t.Fatalf("queue.declare %s: %v", name, err)
	}
	return name
}

// clDeclareExchange declares a fresh non-durable exchange of kind and
// schedules its deletion.
func clDeclareExchange(t T, tg Target, ch *amqp.Channel, kind string, args amqp.Table) string {
	t.Helper()
	name := clUniq("x-" + kind)
	clCleanupExchange(t, tg, name)
	if err := ch.ExchangeDeclare(name, kind, false, false, false, false, args); err != nil {
		t.Fatalf("exchange.declare %s (%s): %v", name, kind, err)
	}
	return name
}

// clBindQueue binds queue to exchange with key and args.
func clBindQueue(t T, ch *amqp.Channel, queue, key, exchange string, args amqp.Table) {
	t.Helper()
	if err := ch.QueueBind(queue, key, exchange, false, args); err != nil {
		t.Fatalf("queue.bind %s -> %s (%q): %v", exchange, queue, key, err)
	}
}

// clPublish publishes msg, failing the case on a client-side error.
func clPublish(t T, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	clPublishOpts(t, ch, exchange, key, false, msg)
}

// clPublishOpts publishes with an explicit mandatory flag.
func clPublishOpts(t T, ch *amqp.Channel, exchange, key string, mandatory bool, msg amqp.Publishing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clWaitTimeout)
	defer cancel()
	if err := ch.PublishWithContext(ctx, exchange, key, mandatory, false, msg); err != nil {
		t.Fatalf("basic.publish to %q/%q: %v", exchange, key, err)
	}
}

// clBody makes a text message.
func clBody(s string) amqp.Publishing {
	return amqp.Publishing{Body: []byte(s)}
}

// clSyncChan makes a round trip on ch so that every asynchronous method sent
// before it on ch (publish, ack, ...) has been handled by the broker, which
// handles a channel's methods in order.
func clSyncChan(t T, ch *amqp.Channel) {
	t.Helper()
	if err := ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil); err != nil {
		t.Fatalf("sync round trip: %v", err)
	}
}

// clGetWait polls basic.get until a message arrives or the timeout passes.
func clGetWait(t T, ch *amqp.Channel, queue string, autoAck bool) amqp.Delivery {
	t.Helper()
	deadline := time.Now().Add(clWaitTimeout)
	for {
		d, ok, err := ch.Get(queue, autoAck)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("basic.get %s: no message within %v", queue, clWaitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clGetEmpty asserts that basic.get on queue returns get-empty.
func clGetEmpty(t T, ch *amqp.Channel, queue string) {
	t.Helper()
	d, ok, err := ch.Get(queue, false)
	if err != nil {
		t.Fatalf("basic.get %s: %v", queue, err)
	}
	if ok {
		t.Fatalf("basic.get %s: want get-empty, got message %q", queue, d.Body)
	}
}

// clConsume starts a consumer with tag on queue.
func clConsume(t T, ch *amqp.Channel, queue, tag string, autoAck bool) <-chan amqp.Delivery {
	t.Helper()
	if tag == "" {
		tag = clUniq("ctag")
	}
	d, err := ch.Consume(queue, tag, autoAck, false, false, false, nil)
	if err != nil {
		t.Fatalf("basic.consume %s: %v", queue, err)
	}
	return d
}

// clRecvDelivery waits for one delivery.
func clRecvDelivery(t T, deliveries <-chan amqp.Delivery) amqp.Delivery {
	t.Helper()
	select {
	case d, ok := <-deliveries:
		if !ok {
			t.Fatalf("deliveries channel closed while waiting for a delivery")
		}
		return d
	case <-time.After(clWaitTimeout):
		t.Fatalf("no delivery within %v", clWaitTimeout)
	}
	return amqp.Delivery{}
}

// clRecvN waits for n deliveries.
func clRecvN(t T, deliveries <-chan amqp.Delivery, n int) []amqp.Delivery {
	t.Helper()
	out := make([]amqp.Delivery, 0, n)
	for len(out) < n {
		out = append(out, clRecvDelivery(t, deliveries))
	}
	return out
}

// clRecvFrom waits for n deliveries in total from any of the channels.
func clRecvFrom(t T, n int, chans ...<-chan amqp.Delivery) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	timeout := time.After(clWaitTimeout)
	for len(out) < n {
		for _, c := range chans {
			if len(out) == n {
				break
			}
			select {
			case d, ok := <-c:
				if ok {
					out = append(out, d)
				}
			default:
			}
		}
		if len(out) == n {
			break
		}
		select {
		case <-timeout:
			t.Fatalf("got %d deliveries within %v, want %d", len(out), clWaitTimeout, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return out
}

// clNoDelivery asserts that nothing arrives within the quiet period.
func clNoDelivery(t T, deliveries <-chan amqp.Delivery) {
	t.Helper()
	select {
	case d, ok := <-deliveries:
		if ok {
			t.Fatalf("unexpected delivery %q (key %q)", d.Body, d.RoutingKey)
		}
	case <-time.After(clQuietPeriod):
	}
}

// clBodies returns the bodies of ds as strings.
func clBodies(ds []amqp.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body)
	}
	return out
}

// clDrain receives everything that arrives within the quiet period.
func clDrain(deliveries <-chan amqp.Delivery) []amqp.Delivery {
	var out []amqp.Delivery
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return out
			}
			out = append(out, d)
		case <-time.After(clQuietPeriod):
			return out
		}
	}
}

// clCloseKind says whether an error closed only the channel or the whole
// connection.
type clCloseKind int

const (
	clChanClose clCloseKind = iota
	clConnClose
)

func (k clCloseKind) String() string {
	if k == clConnClose {
		return "connection.close"
	}
	return "channel.close"
}

// clExpectErr asserts that err is a server-initiated *amqp.Error with code,
// whose reply text starts with the code's name, and that it closed the
// channel only (the connection stays usable) or the whole connection.
func clExpectErr(t T, conn *amqp.Connection, err error, code int, kind clCloseKind) *amqp.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s %d, got success", kind, code)
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		t.Fatalf("want %s %d, got non-AMQP error %T: %v", kind, code, err, err)
	}
	if ae.Code != code {
		t.Fatalf("want %s %d, got code %d (%q)", kind, code, ae.Code, ae.Reason)
	}
	t.Logf("%s %d %q", kind, ae.Code, ae.Reason)
	if name := clCodeNames[code]; name != "" && !strings.HasPrefix(ae.Reason, name) {
		t.Errorf("reply text %q does not start with %s", ae.Reason, name)
	}
	clCheckCloseKind(t, conn, kind)
	return ae
}

// clCheckCloseKind asserts that conn is closed (clConnClose) or still open and
// usable (clChanClose).
func clCheckCloseKind(t T, conn *amqp.Connection, kind clCloseKind) {
	t.Helper()
	if kind == clConnClose {
		deadline := time.Now().Add(clWaitTimeout)
		for !conn.IsClosed() {
			if time.Now().After(deadline) {
				t.Fatalf("want connection.close, but the connection is still open")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return
	}
	if conn.IsClosed() {
		t.Fatalf("want channel.close, but the connection was closed")
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("want channel.close only, but the connection is unusable: %v", err)
	}
	_ = ch.Close()
}

// clNotifyClose registers for ch's close.
func clNotifyClose(ch *amqp.Channel) chan *amqp.Error {
	return ch.NotifyClose(make(chan *amqp.Error, 1))
}

// clExpectAsyncClose waits for the channel (or connection) close that follows
// an asynchronous method such as basic.publish or basic.ack and checks it
// like expectErr.
func clExpectAsyncClose(t T, conn *amqp.Connection, closes chan *amqp.Error, code int, kind clCloseKind) *amqp.Error {
	t.Helper()
	select {
	case e, ok := <-closes:
		if !ok || e == nil {
			t.Fatalf("want %s %d, channel closed without an error", kind, code)
		}
		return clExpectErr(t, conn, e, code, kind)
	case <-time.After(clWaitTimeout):
		t.Fatalf("want %s %d, nothing within %v", kind, code, clWaitTimeout)
	}
	return nil
}

// clQueueExists reports whether a passive declare of name succeeds, using a
// throw-away channel on conn.
func clQueueExists(t T, conn *amqp.Connection, name string) bool {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err == nil {
		return true
	}
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == clCodeNotFound {
		return false
	}
	t.Fatalf("passive queue.declare %s: %v", name, err)
	return false
}

// clExchangeExists is queueExists for exchanges.
func clExchangeExists(t T, conn *amqp.Connection, name string) bool {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	err = ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	if err == nil {
		return true
	}
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == clCodeNotFound {
		return false
	}
	t.Fatalf("passive exchange.declare %s: %v", name, err)
	return false
}

// clEventually polls cond until it holds or the timeout passes.
func clEventually(t T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clWaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clConfirmChan opens a channel in confirm mode on conn. Publishing through
// clPublishConfirmed on it guarantees that the message has reached (or been
// dropped by) every queue it routes to before the call returns.
func clConfirmChan(t T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch := clOpenChan(t, conn)
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	return ch
}

// clPublishConfirmed publishes on a confirm-mode channel and waits for the ack.
func clPublishConfirmed(t T, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clWaitTimeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	if err != nil {
		t.Fatalf("basic.publish to %q/%q: %v", exchange, key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("waiting for the confirm of %q/%q: %v", exchange, key, err)
	}
	if !ok {
		t.Fatalf("publish to %q/%q was nacked", exchange, key)
	}
}

// clGetAll drains queue with basic.get (auto-ack) and returns the bodies.
func clGetAll(t T, ch *amqp.Channel, queue string) []string {
	t.Helper()
	var out []string
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(d.Body))
	}
}
