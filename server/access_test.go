package server_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

func dialOK(t *testing.T, url string) *amqp091.Connection {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestAccessControlSurvivesRestart checks that users (with their hashed
// passwords), vhosts, permissions and limits are durable, and that a
// deleted vhost's durable queues do not come back.
func TestAccessControlSurvivesRestart(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv := b.Server()
	host := strings.TrimPrefix(strings.TrimSuffix(b.URL(), "/"), "amqp://guest:guest@")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.AddVHost(auth.VHost{Name: "tenant", Description: "a tenant"}))
	must(srv.Auth().SetPassword("alice", "secret", []string{"management"}))
	must(srv.Auth().SetPermission(auth.Permission{User: "alice", VHost: "tenant", Configure: ".*", Write: ".*", Read: ".*"}))
	must(srv.Auth().SetVHostLimits("tenant", map[string]int64{"max-queues": 5}))
	aliceURL := fmt.Sprintf("amqp://alice:secret@%s/tenant", host)
	conn := dialOK(t, aliceURL)
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	b.Restart()
	srv = b.Server()
	u, ok := srv.Auth().User("alice")
	if !ok || !u.HasTag("management") {
		t.Fatalf("user after restart: %+v %v", u, ok)
	}
	if strings.Contains(string(u.PasswordHash), "secret") {
		t.Fatal("the password is stored in plain text")
	}
	if v, _ := srv.Auth().VHost("tenant"); v.Description != "a tenant" || v.Limits["max-queues"] != 5 {
		t.Fatalf("vhost after restart: %+v", v)
	}
	conn = dialOK(t, aliceURL)
	ch, _ = conn.Channel()
	if _, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil); err != nil {
		t.Fatalf("durable queue of the tenant vhost after restart: %v", err)
	}
	conn.Close()

	must(srv.DeleteVHost("tenant"))
	b.Restart()
	srv = b.Server()
	if _, ok := srv.Auth().VHost("tenant"); ok {
		t.Fatal("deleted vhost came back")
	}
	if srv.Auth().CanAccessVHost("alice", "tenant") {
		t.Fatal("permissions in a deleted vhost came back")
	}
	must(srv.AddVHost(auth.VHost{Name: "tenant"}))
	must(srv.Auth().SetPermission(auth.Permission{User: "alice", VHost: "tenant", Configure: ".*", Write: ".*", Read: ".*"}))
	conn = dialOK(t, aliceURL)
	ch, _ = conn.Channel()
	if _, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil); err == nil {
		t.Fatal("a queue of the deleted vhost reappeared in the new vhost of the same name")
	}
}

// TestFirstStartUsersOnly checks that Config.Users seeds the first start
// only: a password changed later is not reset by a restart.
func TestFirstStartUsersOnly(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv := b.Server()
	if err := srv.Auth().SetPassword("guest", "changed", nil); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	srv = b.Server()
	if _, ok := srv.Auth().Authenticate("guest", "guest"); ok {
		t.Fatal("restart restored the default password")
	}
	if _, ok := srv.Auth().Authenticate("guest", "changed"); !ok {
		t.Fatal("changed password lost")
	}
}

// TestUserConnectionLimit checks RabbitMQ's per-user max-connections.
func TestUserConnectionLimit(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv, url := b.Server(), b.URL()
	if err := srv.Auth().SetUserLimits("guest", map[string]int64{"max-connections": 1}); err != nil {
		t.Fatal(err)
	}
	dialOK(t, url)
	_, err := amqp091.Dial(url)
	ae, ok := err.(*amqp091.Error)
	if !ok || ae.Code != 530 || !strings.Contains(ae.Reason, "user connection limit (1) is reached") {
		t.Fatalf("second connection: %v, want 530 user connection limit", err)
	}
}

// TestHandshakeTimeout checks that a client that connects and then stalls,
// before or inside the handshake, is disconnected.
func TestHandshakeTimeout(t *testing.T) {
	url := servertest.Start(t, server.Config{HandshakeTimeout: 200 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/")
	for _, sent := range [][]byte{nil, []byte("AMQP\x00\x00\x09\x01")} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(sent)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, c) // connection.start, then EOF
		c.Close()
		if err != nil {
			t.Fatalf("after sending %q and stalling: %v, want the broker to close the socket", sent, err)
		}
	}
}

// TestUserChannelLimit checks RabbitMQ's per-user max-channels, counted
// over all the user's connections: the channel.open over it closes the
// connection with 530.
func TestUserChannelLimit(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv, url := b.Server(), b.URL()
	if err := srv.Auth().SetUserLimits("guest", map[string]int64{"max-channels": 2}); err != nil {
		t.Fatal(err)
	}
	c1, c2 := dialOK(t, url), dialOK(t, url)
	if _, err := c1.Channel(); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Channel(); err != nil {
		t.Fatal(err)
	}
	_, err := c2.Channel()
	ae, ok := err.(*amqp091.Error)
	if !ok || ae.Code != 530 || !strings.Contains(ae.Reason, "maximum allowed user limit of (2)") {
		t.Fatalf("third channel of the user: %v, want 530", err)
	}
	if c1.IsClosed() {
		t.Fatal("the user's other connection was closed")
	}
}
