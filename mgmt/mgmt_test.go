package mgmt_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// env is a broker with its management API, both on 127.0.0.1:0.
type env struct {
	t      *testing.T
	broker *server.Server
	m      *mgmt.Server
	amqp   string // amqp:// URL
	base   string // http://host:port
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, mgmt.Options{})
}

// startWith starts a broker and a management API with opts (Listen is set).
func startWith(t *testing.T, opts mgmt.Options) *env {
	t.Helper()
	return startBroker(t, server.Config{}, opts)
}

// startBroker starts a broker configured by cfg and bopts and a management
// API with opts (Listen is set).
func startBroker(t *testing.T, cfg server.Config, opts mgmt.Options, bopts ...servertest.Option) *env {
	t.Helper()
	broker := servertest.StartBroker(t, cfg, bopts...)
	b := broker.Server()
	opts.Listen = "127.0.0.1:0"
	m := mgmt.New(b, opts)
	if err := m.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := m.ListenPrometheus(); err != nil { // when opts.PrometheusListen is set
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mgmt serve: %v", err)
		}
	})
	return &env{t: t, broker: b, m: m, amqp: broker.URL(), base: "http://" + m.Addr().String()}
}

// do sends a request as guest and returns the status and body.
func (e *env) do(method, path string, body any) (int, []byte) {
	e.t.Helper()
	return e.doAs("guest", "guest", method, path, body)
}

func (e *env) doAs(user, pass, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// getJSON GETs path, expecting 200, and decodes the body.
func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	code, body := e.do("GET", path, nil)
	if code != 200 {
		e.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

func (e *env) expect(method, path string, body any, want int) []byte {
	e.t.Helper()
	code, out := e.do(method, path, body)
	if code != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

func (e *env) dial() (*amqp091.Connection, *amqp091.Channel) {
	e.t.Helper()
	c, err := amqp091.Dial(e.amqp)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	return c, ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuth(t *testing.T) {
	e := start(t)
	code, body := e.doAs("guest", "wrong", "GET", "/api/overview", nil)
	if code != 401 || !strings.Contains(string(body), `"error":"not_authorized"`) {
		t.Fatalf("bad password: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", e.base+"/api/overview", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("no credentials: %d %v", resp.StatusCode, resp.Header)
	}
	var who map[string]any
	e.getJSON("/api/whoami", &who)
	if who["name"] != "guest" {
		t.Fatalf("whoami = %v", who)
	}
	var users []map[string]any
	e.getJSON("/api/users", &users)
	if len(users) != 1 || users[0]["name"] != "guest" || users[0]["tags"].([]any)[0] != "administrator" {
		t.Fatalf("users = %v", users)
	}
	if code, body := e.do("GET", "/api/nope", nil); code != 404 || !strings.Contains(string(body), "Object Not Found") {
		t.Fatalf("unknown path: %d %s", code, body)
	}
	if code, _ := e.do("PATCH", "/api/overview", nil); code != 405 {
		t.Fatalf("bad method: %d", code)
	}
}

func TestQueueLifecycle(t *testing.T) {
	e := start(t)
	e.expect("PUT", "/api/queues/%2F/orders", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 100}}, 201)
	e.expect("PUT", "/api/queues/%2F/orders", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 100}}, 204)
	out := e.expect("PUT", "/api/queues/%2F/orders", map[string]any{"durable": false}, 400)
	if !strings.Contains(string(out), "inequivalent arg 'durable'") {
		t.Fatalf("inequivalent: %s", out)
	}
	out = e.expect("PUT", "/api/queues/%2F/bad", map[string]any{"arguments": map[string]any{"x-max-length": "x"}}, 400)
	if !strings.Contains(string(out), "x-max-length") {
		t.Fatalf("bad arg: %s", out)
	}
	// rabbitmqadmin sends booleans as strings.
	e.expect("PUT", "/api/queues/%2F/strbool", map[string]any{"durable": "false", "auto_delete": "true"}, 201)
	var sb map[string]any
	e.getJSON("/api/queues/%2F/strbool", &sb)
	if sb["durable"] != false || sb["auto_delete"] != true {
		t.Fatalf("string booleans: %v", sb)
	}
	e.expect("PUT", "/api/queues/%2F/strbool2", map[string]any{"durable": "maybe"}, 400)
	// A queue name holding a slash.
	e.expect("PUT", "/api/queues/%2F/"+url.PathEscape("a/b"), map[string]any{"durable": false}, 201)
	var q map[string]any
	e.getJSON("/api/queues/%2F/"+url.PathEscape("a/b"), &q)
	if q["name"] != "a/b" || q["durable"] != false {
		t.Fatalf("queue a/b = %v", q)
	}

	e.expect("PUT", "/api/exchanges/%2F/ex", map[string]any{"type": "direct", "durable": true}, 201)
	out = e.expect("PUT", "/api/exchanges/%2F/ex2", map[string]any{"type": "bogus"}, 400)
	if !strings.Contains(string(out), "exchange type 'bogus'") {
		t.Fatalf("bad type: %s", out)
	}
	e.expect("POST", "/api/bindings/%2F/e/ex/q/orders", map[string]any{"routing_key": "new", "arguments": map[string]any{"x": 1}}, 201)
	var bs []map[string]any
	e.getJSON("/api/queues/%2F/orders/bindings", &bs)
	if len(bs) != 2 || bs[1]["source"] != "ex" || bs[1]["routing_key"] != "new" {
		t.Fatalf("bindings = %v", bs)
	}
	props := bs[1]["properties_key"].(string)
	e.expect("GET", "/api/bindings/%2F/e/ex/q/orders/"+url.PathEscape(props), nil, 200)

	for i := range 3 {
		var res map[string]bool
		body := map[string]any{
			"routing_key": "new", "payload": "order " + string(rune('1'+i)), "payload_encoding": "string",
			"properties": map[string]any{"delivery_mode": 2, "headers": map[string]any{"n": i}, "content_type": "text/plain"},
		}
		if err := json.Unmarshal(e.expect("POST", "/api/exchanges/%2F/ex/publish", body, 200), &res); err != nil || !res["routed"] {
			t.Fatalf("publish: %v %v", res, err)
		}
	}
	var res map[string]bool
	json.Unmarshal(e.expect("POST", "/api/exchanges/%2F/amq.default/publish",
		map[string]any{"routing_key": "nowhere", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}}, 200), &res)
	if res["routed"] {
		t.Fatal("unroutable message routed")
	}
	e.expect("POST", "/api/exchanges/%2F/missing/publish", map[string]any{"routing_key": "", "payload": "x", "properties": map[string]any{}}, 404)

	e.getJSON("/api/queues/%2F/orders", &q)
	if q["messages"] != 3.0 || q["messages_ready"] != 3.0 || q["arguments"].(map[string]any)["x-max-length"] != 100.0 {
		t.Fatalf("queue = %v", q)
	}

	var msgs []map[string]any
	json.Unmarshal(e.expect("POST", "/api/queues/%2F/orders/get", map[string]any{"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"}, 200), &msgs)
	if len(msgs) != 2 || msgs[0]["payload"] != "order 1" || msgs[0]["message_count"] != 2.0 || msgs[0]["payload_encoding"] != "string" {
		t.Fatalf("get = %v", msgs)
	}
	p := msgs[0]["properties"].(map[string]any)
	if p["delivery_mode"] != 2.0 || p["content_type"] != "text/plain" || p["headers"].(map[string]any)["n"] != 0.0 {
		t.Fatalf("properties = %v", p)
	}
	json.Unmarshal(e.expect("POST", "/api/queues/%2F/orders/get", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "base64"}, 200), &msgs)
	if len(msgs) != 1 || msgs[0]["redelivered"] != true || msgs[0]["payload_encoding"] != "base64" {
		t.Fatalf("get ack = %v", msgs)
	}
	e.getJSON("/api/queues/%2F/orders", &q)
	if q["messages"] != 2.0 {
		t.Fatalf("after ack: %v", q)
	}
	e.expect("POST", "/api/queues/%2F/orders/get", map[string]any{"count": 1, "ackmode": "bogus"}, 400)

	e.expect("DELETE", "/api/queues/%2F/orders/contents", nil, 204)
	e.getJSON("/api/queues/%2F/orders", &q)
	if q["messages"] != 0.0 {
		t.Fatalf("after purge: %v", q)
	}
	e.expect("DELETE", "/api/bindings/%2F/e/ex/q/orders/"+url.PathEscape(props), nil, 204)
	e.expect("DELETE", "/api/bindings/%2F/e/ex/q/orders/"+url.PathEscape(props), nil, 404)
	e.expect("DELETE", "/api/exchanges/%2F/amq.direct", nil, 403)
	e.expect("DELETE", "/api/exchanges/%2F/ex", nil, 204)
	e.expect("DELETE", "/api/exchanges/%2F/ex", nil, 404)
	e.expect("DELETE", "/api/queues/%2F/orders", nil, 204)
	e.expect("GET", "/api/queues/%2F/orders", nil, 404)
	e.expect("DELETE", "/api/queues/%2F/orders", nil, 404)
	e.expect("GET", "/api/queues/nohost", nil, 404)
}

func TestConnectionsAndConsumers(t *testing.T) {
	e := start(t)
	c, ch := e.dial()
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("work", "worker-1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var conns []map[string]any
	e.getJSON("/api/connections", &conns)
	if len(conns) != 1 || conns[0]["user"] != "guest" || conns[0]["vhost"] != "/" || conns[0]["channels"] != 1.0 {
		t.Fatalf("connections = %v", conns)
	}
	name := conns[0]["name"].(string)
	var cons []map[string]any
	e.getJSON("/api/consumers", &cons)
	if len(cons) != 1 || cons[0]["consumer_tag"] != "worker-1" || cons[0]["prefetch_count"] != 5.0 {
		t.Fatalf("consumers = %v", cons)
	}
	if cd := cons[0]["channel_details"].(map[string]any); cd["connection_name"] != name || cd["number"] != 1.0 {
		t.Fatalf("channel_details = %v", cd)
	}
	var chans []map[string]any
	e.getJSON("/api/channels", &chans)
	if len(chans) != 1 || chans[0]["name"] != name+" (1)" || chans[0]["consumer_count"] != 1.0 {
		t.Fatalf("channels = %v", chans)
	}
	var q map[string]any
	e.getJSON("/api/queues/%2F/work", &q)
	if d := q["consumer_details"].([]any); len(d) != 1 {
		t.Fatalf("consumer_details = %v", d)
	}
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	req, _ := http.NewRequest("DELETE", e.base+"/api/connections/"+url.PathEscape(name), nil)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("X-Reason", "maintenance")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("close connection: %d", resp.StatusCode)
	}
	select {
	case err := <-closed:
		if err == nil || err.Code != 320 || !strings.Contains(err.Reason, "maintenance") {
			t.Fatalf("close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}
	waitFor(t, "connection gone", func() bool {
		var cs []any
		e.getJSON("/api/connections", &cs)
		return len(cs) == 0
	})
	e.expect("DELETE", "/api/connections/"+url.PathEscape(name), nil, 404)
}

func TestDefinitionsRoundTrip(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	ch.ExchangeDeclare("defs.x", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"})
	ch.QueueDeclare("defs.q", true, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
	ch.QueueBind("defs.q", "a.*", "defs.x", false, nil)
	ch.QueueDeclare("", false, true, true, false, nil) // exclusive: not exported
	var defs map[string]any
	e.getJSON("/api/definitions", &defs)
	if n := len(defs["queues"].([]any)); n != 1 {
		t.Fatalf("queues = %v", defs["queues"])
	}
	if n := len(defs["exchanges"].([]any)); n != 1 {
		t.Fatalf("exchanges = %v", defs["exchanges"])
	}
	if n := len(defs["bindings"].([]any)); n != 1 {
		t.Fatalf("bindings = %v", defs["bindings"])
	}

	f := start(t)
	f.expect("POST", "/api/definitions", defs, 204)
	var again map[string]any
	f.getJSON("/api/definitions", &again)
	for _, k := range []string{"queues", "exchanges", "bindings"} {
		a, _ := json.Marshal(defs[k])
		b, _ := json.Marshal(again[k])
		if !bytes.Equal(a, b) {
			t.Errorf("%s: exported %s, re-exported %s", k, a, b)
		}
	}
	// The imported queue's arguments kept their meaning.
	var q map[string]any
	f.getJSON("/api/queues/%2F/defs.q", &q)
	if q["arguments"].(map[string]any)["x-message-ttl"] != 1000.0 {
		t.Fatalf("imported queue = %v", q)
	}
}

func TestMetrics(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	ch.QueueDeclare("m.q", true, false, false, false, nil)
	ch.Publish("", "m.q", false, false, amqp091.Publishing{Body: []byte("x"), DeliveryMode: 2})
	waitFor(t, "message in queue", func() bool {
		q, err := e.broker.Queue("/", "m.q")
		return err == nil && q.Ready == 1
	})
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"rabbitmq_connections 1",
		"rabbitmq_connections_opened_total 1",
		"rabbitmq_connections_closed_total 0",
		"rabbitmq_channels_opened_total 1",
		"rabbitmq_queues 1",
		"rabbitmq_queue_messages_ready 1",
		"warren_store_commits_total",
		"warren_store_fsync_seconds_total",
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Without credentials, no queue is named (rabbitmq_prometheus's
	// default: aggregated metrics only).
	if strings.Contains(string(body), "m.q") {
		t.Errorf("unauthenticated /metrics names a queue:\n%s", body)
	}
	if code, _ := e.doAs("", "", "GET", "/metrics/per-object", nil); code != 401 {
		t.Errorf("/metrics/per-object without credentials: %d, want 401", code)
	}
	code, per := e.do("GET", "/metrics/per-object", nil)
	if code != 200 {
		t.Fatalf("/metrics/per-object: %d %s", code, per)
	}
	for _, want := range []string{
		`rabbitmq_queue_messages_ready{queue="m.q",vhost="/"} 1`,
		`rabbitmq_queue_consumers{queue="m.q",vhost="/"} 0`,
		"warren_metrics_per_object_truncated 0",
	} {
		if !strings.Contains(string(per), want) {
			t.Errorf("per-object metrics lack %q", want)
		}
	}
}

// TestRaftLogMetrics: /metrics carries the Raft log's counters, and a
// confirmed publish to a quorum queue shows in them.
func TestRaftLogMetrics(t *testing.T) {
	e := start(t)
	scrape := func() string {
		resp, err := http.Get(e.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	_, ch := e.dial()
	if _, err := ch.QueueDeclare("m.qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "m.qq", false, false,
		amqp091.Publishing{Body: []byte("x"), DeliveryMode: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("publish not confirmed: %v %v", ok, err)
	}
	body := scrape()
	for _, name := range []string{"warren_raft_log_syncs_total", "warren_raft_log_entries_total", "warren_raft_log_written_bytes_total", "warren_raft_log_segments"} {
		v := metricValue(t, body, name)
		if v <= 0 {
			t.Errorf("%s = %v after a confirmed publish, want > 0", name, v)
		}
	}
	for _, name := range []string{"warren_raft_log_rolls_total", "warren_raft_log_zero_filled_segments_total", "warren_raft_log_roll_seconds_total"} {
		metricValue(t, body, name)
	}
}

// metricValue is the value of the unlabelled sample name in a scrape.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("metrics lack %s", name)
	return 0
}

func TestLargeMessage(t *testing.T) {
	e := start(t)
	e.expect("PUT", "/api/queues/%2F/big", map[string]any{"durable": true}, 201)
	body := bytes.Repeat([]byte{0, 1, 2, 250, 'x'}, 100_000) // not UTF-8, several frames
	enc := base64.StdEncoding.EncodeToString(body)
	e.expect("POST", "/api/exchanges/%2F/amq.default/publish",
		map[string]any{"routing_key": "big", "payload": enc, "payload_encoding": "base64", "properties": map[string]any{"delivery_mode": "2"}}, 200)
	var msgs []map[string]any
	json.Unmarshal(e.expect("POST", "/api/queues/%2F/big/get", map[string]any{"count": "1", "ackmode": "ack_requeue_false", "encoding": "auto"}, 200), &msgs)
	if len(msgs) != 1 || msgs[0]["payload_encoding"] != "base64" || msgs[0]["payload"] != enc || msgs[0]["payload_bytes"] != float64(len(body)) {
		t.Fatalf("got %d messages, encoding %v, %v bytes", len(msgs), msgs[0]["payload_encoding"], msgs[0]["payload_bytes"])
	}
	json.Unmarshal(e.expect("POST", "/api/queues/%2F/big/get", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}, 200), &msgs)
	if len(msgs) != 0 {
		t.Fatalf("queue not empty after ack: %d", len(msgs))
	}
}

func TestPaging(t *testing.T) {
	e := start(t)
	for _, n := range []string{"p1", "p2", "p3", "other"} {
		e.expect("PUT", "/api/queues/%2F/"+n, map[string]any{}, 201)
	}
	var p struct {
		Items         []map[string]any
		FilteredCount int `json:"filtered_count"`
		TotalCount    int `json:"total_count"`
		PageCount     int `json:"page_count"`
		ItemCount     int `json:"item_count"`
	}
	e.getJSON("/api/queues/%2F?page=2&page_size=2&name=p&sort=name&sort_reverse=true", &p)
	if p.TotalCount != 4 || p.FilteredCount != 3 || p.PageCount != 2 || p.ItemCount != 1 || p.Items[0]["name"] != "p1" {
		t.Fatalf("page = %+v", p)
	}
	e.getJSON("/api/queues?page=1&name=^o&use_regex=true", &p)
	if p.FilteredCount != 1 || p.Items[0]["name"] != "other" {
		t.Fatalf("regex page = %+v", p)
	}
	e.expect("GET", "/api/queues?page=9", nil, 400)
}

func TestAlarms(t *testing.T) {
	e := start(t)
	e.expect("GET", "/api/health/checks/alarms", nil, 200)
	e.broker.SetMemoryHighWatermark(1) // any use is above it
	waitFor(t, "memory alarm", func() bool { return e.broker.Alarms().Memory })
	out := e.expect("GET", "/api/health/checks/alarms", nil, 503)
	if !strings.Contains(string(out), `"resource":"memory"`) {
		t.Fatalf("alarms: %s", out)
	}
	var nodes []map[string]any
	e.getJSON("/api/nodes", &nodes)
	if nodes[0]["mem_alarm"] != true || nodes[0]["mem_limit"] != 1.0 {
		t.Fatalf("node: mem_alarm %v mem_limit %v", nodes[0]["mem_alarm"], nodes[0]["mem_limit"])
	}
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "rabbitmq_alarms_memory_used_watermark 1") {
		t.Error("metrics lack the raised memory alarm")
	}
	e.broker.SetMemoryHighWatermark(1 << 50)
	waitFor(t, "alarm cleared", func() bool { return !e.broker.Alarms().Memory })
	e.expect("GET", "/api/health/checks/alarms", nil, 200)
}

func TestPolicies(t *testing.T) {
	e := start(t)
	e.expect("PUT", "/api/policies/%2F/limit", map[string]any{"pattern": "^pol\\.", "definition": map[string]any{"max-length": 2}, "apply-to": "queues", "priority": 1}, 201)
	e.expect("PUT", "/api/policies/%2F/limit", map[string]any{"pattern": "^pol\\.", "definition": map[string]any{"max-length": 2}, "apply-to": "queues", "priority": 1}, 204)
	e.expect("PUT", "/api/policies/%2F/bad", map[string]any{"pattern": "(", "definition": map[string]any{"max-length": 2}}, 400)
	e.expect("PUT", "/api/policies/%2F/bad", map[string]any{"pattern": "x", "definition": map[string]any{"max-length": "two"}}, 400)
	e.expect("PUT", "/api/queues/%2F/pol.q", map[string]any{"durable": true}, 201)
	for range 5 {
		e.expect("POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "pol.q", "payload": "x", "properties": map[string]any{}}, 200)
	}
	var q map[string]any
	e.getJSON("/api/queues/%2F/pol.q", &q)
	if q["messages"] != 2.0 || q["policy"] != "limit" || q["effective_policy_definition"].(map[string]any)["max-length"] != 2.0 {
		t.Fatalf("queue under policy: messages %v policy %v definition %v", q["messages"], q["policy"], q["effective_policy_definition"])
	}
	var ps []map[string]any
	e.getJSON("/api/policies", &ps)
	if len(ps) != 1 || ps[0]["name"] != "limit" || ps[0]["vhost"] != "/" || ps[0]["apply-to"] != "queues" || ps[0]["priority"] != 1.0 {
		t.Fatalf("policies = %v", ps)
	}
	var p map[string]any
	e.getJSON("/api/policies/%2F/limit", &p)
	if p["pattern"] != "^pol\\." {
		t.Fatalf("policy = %v", p)
	}

	var defs map[string]any
	e.getJSON("/api/definitions", &defs)
	f := start(t)
	f.expect("POST", "/api/definitions", defs, 204)
	f.getJSON("/api/policies", &ps)
	if len(ps) != 1 || ps[0]["name"] != "limit" {
		t.Fatalf("imported policies = %v", ps)
	}
	f.getJSON("/api/queues/%2F/pol.q", &q)
	if q["policy"] != "limit" {
		t.Fatalf("imported queue policy = %v", q["policy"])
	}

	e.expect("DELETE", "/api/policies/%2F/limit", nil, 204)
	e.expect("DELETE", "/api/policies/%2F/limit", nil, 404)
	e.getJSON("/api/queues/%2F/pol.q", &q)
	if q["policy"] != nil {
		t.Fatalf("policy after delete = %v", q["policy"])
	}
	e.expect("GET", "/api/policies/nohost", nil, 404)
}
