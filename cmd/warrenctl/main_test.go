package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// broker starts a broker and its management API on 127.0.0.1:0 and returns
// the API's base URL and the broker's amqp:// URL.
func broker(t *testing.T) (string, string) {
	t.Helper()
	var b *server.Server
	bk := servertest.StartBroker(t, server.Config{OnStart: func(s *server.Server) { b = s }})
	m := mgmt.New(b, mgmt.Options{Listen: "127.0.0.1:0"})
	if err := m.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + m.Addr().String(), bk.URL()
}

// ctl runs warrenctl against base and returns its output.
func ctl(t *testing.T, base string, args ...string) string {
	t.Helper()
	out, err := ctlErr(base, "", args...)
	if err != nil {
		t.Fatalf("warrenctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func ctlErr(base, stdin string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := run(append([]string{"--url", base}, args...), strings.NewReader(stdin), &out, &errOut)
	return out.String() + errOut.String(), err
}

func TestWarrenctl(t *testing.T) {
	base, amqpURL := broker(t)

	ctl(t, base, "declare", "queue", "orders", "--arg", "x-max-length=100")
	ctl(t, base, "declare", "exchange", "shop", "--type", "topic")
	ctl(t, base, "declare", "binding", "--source", "shop", "--destination", "orders", "--routing-key", "order.*")

	out := ctl(t, base, "list", "queues")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "orders") {
		t.Fatalf("list queues:\n%s", out)
	}
	var qs []map[string]any
	if err := json.Unmarshal([]byte(ctl(t, base, "list", "queues", "--format", "json")), &qs); err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0]["name"] != "orders" || qs[0]["arguments"].(map[string]any)["x-max-length"] != 100.0 {
		t.Fatalf("queues json = %v", qs)
	}
	if out := ctl(t, base, "list", "exchanges"); !strings.Contains(out, "shop") || !strings.Contains(out, "topic") {
		t.Fatalf("list exchanges:\n%s", out)
	}
	if out := ctl(t, base, "list", "bindings"); !strings.Contains(out, "order.*") {
		t.Fatalf("list bindings:\n%s", out)
	}
	if out := ctl(t, base, "list", "users"); !strings.Contains(out, "guest") || !strings.Contains(out, "administrator") {
		t.Fatalf("list users:\n%s", out)
	}
	if out := ctl(t, base, "overview"); !strings.Contains(out, "Warren") {
		t.Fatalf("overview:\n%s", out)
	}

	if out := ctl(t, base, "publish", "--exchange", "shop", "--routing-key", "order.new", "--payload", "hello",
		"--property", "content_type=text/plain", "--header", "n=1", "--persistent"); !strings.Contains(out, "routed") || strings.Contains(out, "not routed") {
		t.Fatalf("publish:\n%s", out)
	}
	if out := ctl(t, base, "publish", "--routing-key", "nowhere", "--payload", "x"); !strings.Contains(out, "not routed") {
		t.Fatalf("unroutable publish:\n%s", out)
	}
	out = ctl(t, base, "get", "orders", "--count", "5")
	if !strings.Contains(out, "hello") || !strings.Contains(out, "order.new") {
		t.Fatalf("get:\n%s", out)
	}
	var msgs []map[string]any
	json.Unmarshal([]byte(ctl(t, base, "get", "orders", "--format", "json")), &msgs)
	if len(msgs) != 1 || msgs[0]["redelivered"] != true || msgs[0]["properties"].(map[string]any)["headers"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("get json = %v", msgs)
	}
	ctl(t, base, "purge", "queue", "orders")
	json.Unmarshal([]byte(ctl(t, base, "list", "queues", "--format", "json")), &qs)
	if qs[0]["messages"] != 0.0 {
		t.Fatalf("after purge: %v", qs)
	}

	// Export, delete, import: the definitions come back.
	file := filepath.Join(t.TempDir(), "defs.json")
	ctl(t, base, "export", file)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"orders"`) {
		t.Fatalf("export: %v\n%s", err, b)
	}
	ctl(t, base, "delete", "binding", "--source", "shop", "--destination", "orders", "--routing-key", "order.*")
	ctl(t, base, "delete", "exchange", "shop")
	ctl(t, base, "delete", "queue", "orders")
	if out := ctl(t, base, "list", "queues"); strings.Contains(out, "orders") {
		t.Fatalf("queue not deleted:\n%s", out)
	}
	ctl(t, base, "import", file)
	if out := ctl(t, base, "list", "bindings"); !strings.Contains(out, "order.*") {
		t.Fatalf("bindings after import:\n%s", out)
	}
	// Import from stdin, idempotent.
	if out, err := ctlErr(base, string(b), "import", "-"); err != nil {
		t.Fatalf("import -: %v %s", err, out)
	}

	// Policies.
	ctl(t, base, "declare", "policy", "cap", "--pattern", "^orders$", "--definition", `{"max-length": 1}`, "--apply-to", "queues")
	if out := ctl(t, base, "list", "policies"); !strings.Contains(out, "cap") || !strings.Contains(out, "max-length") {
		t.Fatalf("list policies:\n%s", out)
	}
	ctl(t, base, "delete", "policy", "cap")
	if _, err := ctlErr(base, "", "delete", "policy", "cap"); err == nil {
		t.Fatal("deleting a missing policy succeeded")
	}

	// Connections: list and close.
	c, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	var conns []map[string]any
	json.Unmarshal([]byte(ctl(t, base, "list", "connections", "--format", "json")), &conns)
	if len(conns) != 1 {
		t.Fatalf("connections = %v", conns)
	}
	ctl(t, base, "close", "connection", conns[0]["name"].(string), "--reason", "bye")
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("close: %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}

	// Errors carry the API's reason.
	if out, err := ctlErr(base, "", "delete", "queue", "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("delete missing queue: %v %s", err, out)
	}
	if _, err := ctlErr(base, "", "--password", "wrong", "list", "queues"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("bad password: %v", err)
	}
	if _, err := ctlErr(base, "", "declare", "queue", "x", "--arg", "x-max-length=oops"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad argument: %v", err)
	}
	if _, err := ctlErr(base, "", "list", "queues", "--format", "yaml"); err == nil {
		t.Fatal("bad format accepted")
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"--version"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "warrenctl ") || !strings.Contains(got, "commit ") || !strings.Contains(got, "go1.") {
		t.Fatalf("--version: %q", got)
	}
}

func TestHealth(t *testing.T) {
	base, _ := broker(t)
	if out := ctl(t, base, "health"); !strings.Contains(out, `"status":"ok"`) {
		t.Fatalf("health: %s", out)
	}
	out, err := ctlErr(base, "", "health", "protocol-listener/mqtt")
	if err == nil || !strings.Contains(err.Error(), "No active listener") {
		t.Fatalf("health mqtt: %v %s", err, out)
	}
}
