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
	return brokerWith(t, mgmt.Options{})
}

// brokerWith is broker with the management API's options (Listen is set).
func brokerWith(t *testing.T, opts mgmt.Options) (string, string) {
	t.Helper()
	bk := servertest.StartBroker(t, server.Config{})
	b := bk.Server()
	opts.Listen = "127.0.0.1:0"
	m := mgmt.New(b, opts)
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

// TestRabbitmqctlCommands: rabbitmqctl's command names, column lists and
// tab-separated layout (compared with RabbitMQ 3.10's rabbitmqctl).
func TestRabbitmqctlCommands(t *testing.T) {
	base, amqpURL := broker(t)
	conn, err := amqp091.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("rq", true, false, false, false, amqp091.Table{"x-max-length": int32(10)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ch.Publish("", "rq", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	want := "Timeout: 60.0 seconds ...\nListing queues for vhost / ...\nname\tmessages\tconsumers\nrq\t2\t0\n"
	var out string
	waitUntil(t, "two messages listed", func() bool {
		out = ctl(t, base, "list_queues", "name", "messages", "consumers")
		return out == want
	})
	if out := ctl(t, base, "-q", "list_queues", "name", "arguments"); out != "name\targuments\nrq\t[{\"x-max-length\",10}]\n" {
		t.Errorf("list_queues -q name arguments: %q", out)
	}
	if out := ctl(t, base, "list_queues", "--formatter", "json", "name", "messages"); strings.TrimSpace(out) != `[{"messages":2,"name":"rq"}]` {
		t.Errorf("list_queues --formatter json: %q", out)
	}
	if _, err := ctlErr(base, "", "list_queues", "-p", "nosuch"); err == nil || err.Error() != "vhost 'nosuch' does not exist" {
		t.Errorf("list_queues -p nosuch: %v", err)
	}
	out = ctl(t, base, "list_bindings")
	if !strings.HasPrefix(out, "Listing bindings for vhost /...\nsource_name\tsource_kind\tdestination_name\tdestination_kind\trouting_key\targuments\n") ||
		!strings.Contains(out, "\texchange\trq\tqueue\trq\t[]\n") {
		t.Errorf("list_bindings: %q", out)
	}
	if out := ctl(t, base, "list_exchanges", "-q", "name", "type"); !strings.Contains(out, "name\ttype\n") || !strings.Contains(out, "amq.topic\ttopic\n") {
		t.Errorf("list_exchanges: %q", out)
	}
	if out := ctl(t, base, "list_connections", "-q", "user", "state"); out != "user\tstate\nguest\trunning\n" {
		t.Errorf("list_connections: %q", out)
	}
	ctl(t, base, "set_policy", "lim", "^rq$", `{"max-length":5}`, "--apply-to", "queues", "--priority", "1")
	if out := ctl(t, base, "list_policies", "-q"); out != "vhost\tname\tpattern\tapply-to\tdefinition\tpriority\n/\tlim\t^rq$\tqueues\t{\"max-length\":5}\t1\n" {
		t.Errorf("list_policies: %q", out)
	}
	ctl(t, base, "clear_policy", "lim")
	// A refused policy reads as rabbitmqctl prints it, not HTML-escaped.
	if _, err := ctlErr(base, "", "set_policy", "bad", "^rq$", `{"nosuch":1}`); err == nil ||
		!strings.HasPrefix(err.Error(), "400 bad_request: Validation failed\n\n[{<<\"nosuch\">>,1}] are not recognised policy settings\nWarren applies ") {
		t.Errorf("set_policy with an unknown key: %v", err)
	}
	if out := ctl(t, base, "purge_queue", "rq"); out != "Purging queue 'rq' in vhost '/' ...\n" {
		t.Errorf("purge_queue: %q", out)
	}
	if _, err := ctlErr(base, "", "purge_queue", "nosuch"); err == nil || err.Error() != "queue 'nosuch' in vhost '/' does not exist" {
		t.Errorf("purge_queue nosuch: %v", err)
	}
	if _, err := ctlErr(base, "", "delete_queue", "-p", "nosuch", "rq"); err == nil || err.Error() != "vhost 'nosuch' does not exist" {
		t.Errorf("delete_queue -p nosuch: %v", err)
	}
	ctl(t, base, "delete_queue", "rq")
	if out := ctl(t, base, "-q", "list_queues"); out != "" {
		t.Errorf("queues after delete_queue: %q", out)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStatus(t *testing.T) {
	base, _ := broker(t)
	out := ctl(t, base, "status")
	for _, want := range []string{"Status of node ", "\nRuntime\n\nOS PID: ", "Warren version: ", "\nAlarms\n\n(none)\n",
		"Total memory used: ", "Free disk space: ", "Queue count: 0", "\nListeners\n\nInterface: "} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// TestEnvironment: warrenctl environment lays the effective configuration
// out as rabbitmqctl environment lays out an application's: one Erlang
// term, snake-case keys, numbers and booleans bare, the password hidden,
// each value that is not the default followed by where it came from.
func TestEnvironment(t *testing.T) {
	base, _ := brokerWith(t, mgmt.Options{Environment: []mgmt.Setting{
		{Name: "channel-max", Value: "100", Origin: "WARREN_CHANNEL_MAX"},
		{Name: "default-pass", Value: "s3cret", Origin: "command line", Secret: true},
		{Name: "heartbeat", Value: "1m0s", Origin: "default"},
		{Name: "repair-message-log", Value: "false", Origin: "default"},
		{Name: "vm-memory-high-watermark", Value: "0.4", Origin: "warren.conf:3 (vm_memory_high_watermark.relative)"},
	}})
	out := ctl(t, base, "environment")
	want := "[{warren,[{channel_max,100}, % WARREN_CHANNEL_MAX\n" +
		"          {default_pass,\"********\"}, % command line\n" +
		"          {heartbeat,\"1m0s\"},\n" +
		"          {repair_message_log,false},\n" +
		"          {vm_memory_high_watermark,0.4}]}] % warren.conf:3 (vm_memory_high_watermark.relative)\n"
	if !strings.HasPrefix(out, "Application environment of node warren@") || !strings.HasSuffix(out, " ...\n"+want) {
		t.Errorf("environment:\n%s\nwant the banner, then\n%s", out, want)
	}
	if out := ctl(t, base, "-q", "environment"); out != want {
		t.Errorf("environment -q:\n%s", out)
	}
	out = ctl(t, base, "environment", "--formatter", "json")
	if strings.TrimSpace(out) != `{"warren":{"channel_max":100,"default_pass":"********","heartbeat":"1m0s","repair_message_log":false,"vm_memory_high_watermark":0.4}}` {
		t.Errorf("environment --formatter json: %s", out)
	}
	if strings.Contains(out, "s3cret") {
		t.Error("the password is shown")
	}
}
