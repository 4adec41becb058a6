package server_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// The admin API's actions are domain calls (no internal AMQP connection):
// these tests pin what the internal connection used to give them.

func adminText(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Text
	}
	return ""
}

// TestAdminPublishWaitsForStore: a persistent publish to a durable queue
// is answered only once the store's write is done, and a failed write is
// a nack, as basic.publish's confirm.
func TestAdminPublishWaitsForStore(t *testing.T) {
	disk := persist.NewMemoryDisk()
	st, err := persist.OpenMemory(disk)
	if err != nil {
		t.Fatal(err)
	}
	b := servertest.StartBroker(t, server.Config{}, servertest.WithStore(st))
	a := openAdmin(t, b.Server())
	if err := a.DeclareQueue(server.QueueDecl{Name: "wait.q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // before the broker stops: the committer must not stay held
	disk.FailCommits(func() error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := a.Publish("", "wait.q", amqp.Properties{DeliveryMode: 2}, []byte("held"))
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the publish never reached the store")
	}
	// The store's write is held: the publish must still wait (a window to
	// catch it answering early; it cannot pass by luck).
	select {
	case err := <-done:
		t.Fatalf("publish answered (%v) while its store write was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	open()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("publish not answered after the store's write")
	}

	disk.FailCommits(func() error { return errors.New("disk full") })
	_, err = a.Publish("", "wait.q", amqp.Properties{DeliveryMode: 2}, []byte("lost"))
	if adminCode(err) != amqp.InternalError || adminText(err) != "message 2 nacked by the broker" {
		t.Fatalf("publish with a failing store: %v", err)
	}
	disk.FailCommits(nil)
	// A transient message is not stored: answered at once.
	if routed, err := a.Publish("", "wait.q", amqp.Properties{}, []byte("transient")); err != nil || !routed {
		t.Fatalf("transient publish: routed %v, %v", routed, err)
	}
}

// TestAdminPermissions: the admin API acts with its user's permissions,
// checked where AMQP checks them (a dead-letter exchange only on creation).
func TestAdminPermissions(t *testing.T) {
	srv, _ := startAdminBroker(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.Auth().SetPassword("alice", "secret", []string{"management"}))
	must(srv.Auth().SetPermission(auth.Permission{User: "alice", VHost: "/", Configure: "^q", Write: "^q", Read: "^q"}))
	a, err := srv.OpenAdmin("alice", "/")
	must(err)
	defer a.Close()

	err = a.DeclareQueue(server.QueueDecl{Name: "q.dl", Args: map[string]any{"x-dead-letter-exchange": "dlx"}})
	if adminCode(err) != amqp.AccessRefused || adminText(err) != "access to exchange 'dlx' in vhost '/' refused for user 'alice'" {
		t.Fatalf("declare with a dead-letter exchange alice may not write: %v", err)
	}
	if err := a.DeclareQueue(server.QueueDecl{Name: "other"}); adminText(err) != "access to queue 'other' in vhost '/' refused for user 'alice'" {
		t.Fatalf("declare without configure: %v", err)
	}
	must(a.DeclareQueue(server.QueueDecl{Name: "q.ok"}))
	if _, err := a.Publish("", "q.ok", amqp.Properties{}, nil); adminText(err) != "access to exchange 'amq.default' in vhost '/' refused for user 'alice'" {
		t.Fatalf("publish without write on the default exchange: %v", err)
	}
	if _, err := a.Publish("amq.direct", "q.ok", amqp.Properties{UserID: "guest"}, nil); adminCode(err) != amqp.AccessRefused {
		t.Fatalf("publish without write on amq.direct: %v", err)
	}
	must(srv.Auth().SetPermission(auth.Permission{User: "alice", VHost: "/", Configure: "^q", Write: ".*", Read: "^q"}))
	if _, err := a.Publish("", "q.ok", amqp.Properties{UserID: "guest"}, nil); adminText(err) != "user_id property set to 'guest' but authenticated user was 'alice'" {
		t.Fatalf("publish with another user's user-id: %v", err)
	}
	if routed, err := a.Publish("", "q.ok", amqp.Properties{UserID: "alice"}, []byte("m")); err != nil || !routed {
		t.Fatalf("publish: %v %v", routed, err)
	}
	if got, err := a.Get("q.ok", 1, server.AckRequeueFalse); err != nil || len(got) != 1 {
		t.Fatalf("get: %v %v", got, err)
	}

	if _, err := srv.OpenAdmin("nobody", "/"); adminCode(err) != amqp.AccessRefused {
		t.Fatalf("open as a missing user: %v", err)
	}
	must(srv.AddVHost(auth.VHost{Name: "closed"}))
	if _, err := srv.OpenAdmin("alice", "closed"); adminCode(err) != amqp.NotAllowed ||
		adminText(err) != "access to vhost 'closed' refused for user 'alice'" {
		t.Fatalf("open on a vhost without permissions: %v", err)
	}
	if _, err := srv.OpenAdmin("alice", "nope"); adminCode(err) != amqp.NotFound {
		t.Fatalf("open on a missing vhost: %v", err)
	}
}

// TestAdminExclusiveLocked: another connection's exclusive queue is locked
// to the admin API's declarations, bindings and gets (405), while delete
// and purge reach it, as in RabbitMQ.
func TestAdminExclusiveLocked(t *testing.T) {
	srv, url := startAdminBroker(t)
	_, ch := adminDial(t, url)
	if _, err := ch.QueueDeclare("excl.q", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	a := openAdmin(t, srv)
	if err := a.DeclareQueue(server.QueueDecl{Name: "excl.q"}); adminCode(err) != amqp.ResourceLocked {
		t.Fatalf("declare: %v", err)
	}
	if _, err := a.Get("excl.q", 1, server.AckRequeueTrue); adminCode(err) != amqp.ResourceLocked {
		t.Fatalf("get: %v", err)
	}
	b := server.BindingInfo{Source: "amq.direct", Destination: "excl.q", DestinationType: "queue", RoutingKey: "k"}
	if err := a.Bind(b); adminCode(err) != amqp.ResourceLocked {
		t.Fatalf("bind: %v", err)
	}
	if _, err := srv.PurgeQueue("/", "excl.q"); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if _, err := srv.DeleteQueue("/", "excl.q", false, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// TestAdminCodecChecks: names, keys and arguments are refused as an AMQP
// client's would be: too long for a short string, or not UTF-8.
func TestAdminCodecChecks(t *testing.T) {
	srv, _ := startAdminBroker(t)
	a := openAdmin(t, srv)
	long := strings.Repeat("k", 256)
	if err := a.DeclareQueue(server.QueueDecl{Name: long}); !errors.Is(err, amqp.ErrStringTooLong) {
		t.Fatalf("declare a 256-byte name: %v", err)
	}
	b := server.BindingInfo{Source: "amq.direct", Destination: "x", DestinationType: "queue", RoutingKey: long}
	if err := a.Bind(b); !errors.Is(err, amqp.ErrStringTooLong) {
		t.Fatalf("bind with a 256-byte key: %v", err)
	}
	if _, err := a.Publish("", long, amqp.Properties{}, nil); adminCode(err) != amqp.PreconditionFailed {
		t.Fatalf("publish with a 256-byte key: %v", err)
	}
	if err := a.DeclareQueue(server.QueueDecl{Name: "bad\xff"}); adminCode(err) != amqp.FrameError {
		t.Fatalf("declare a name that is not UTF-8: %v", err)
	}
	// Arguments get the wire's types: a nested object is an amqp.Table.
	if err := a.DeclareQueue(server.QueueDecl{Name: "typed", Args: map[string]any{"x-custom": map[string]any{"a": int64(1)}}}); err != nil {
		t.Fatal(err)
	}
	q, err := srv.Queue("/", "typed")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.Args["x-custom"].(amqp.Table); !ok {
		t.Fatalf("nested argument kept as %T, want amqp.Table", q.Args["x-custom"])
	}
}
