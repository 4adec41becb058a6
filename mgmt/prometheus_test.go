package mgmt_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/mgmt"
)

// startProm is a broker with its management API and its Prometheus
// listener; it returns the Prometheus listener's base URL.
func startProm(t *testing.T) (*env, string) {
	t.Helper()
	e := startWith(t, mgmt.Options{PrometheusListen: "127.0.0.1:0"})
	return e, "http://" + e.m.PrometheusAddr().String()
}

// scrape GETs url without credentials and returns the status and body.
func scrape(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// families parses a scrape in Prometheus's text format.
func families(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, body)
	}
	return mfs
}

// labelsOf returns the label names of mf's first series.
func labelsOf(mf *dto.MetricFamily) map[string]string {
	out := map[string]string{}
	if len(mf.Metric) > 0 {
		for _, l := range mf.Metric[0].Label {
			out[l.GetName()] = l.GetValue()
		}
	}
	return out
}

// workload declares p.q (twice) and d.q (then deleted), publishes three
// messages to p.q and consumes one without acking it, on a connection
// left open.
func workload(t *testing.T, e *env) {
	t.Helper()
	_, ch := e.dial()
	for range 2 {
		if _, err := ch.QueueDeclare("p.q", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare("d.q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete("d.q", false, false, false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.Publish("", "p.q", false, false, amqp091.Publishing{Body: []byte("hello")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume("p.q", "c1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-msgs
	waitFor(t, "2 ready, 1 unacked", func() bool {
		q, err := e.broker.Queue("/", "p.q")
		return err == nil && q.Ready == 2 && q.Unacked == 1
	})
}

func TestPrometheusListenerAggregated(t *testing.T) {
	e, prom := startProm(t)
	workload(t, e)
	code, body := scrape(t, prom+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics on the Prometheus listener: %d %s", code, body)
	}
	for _, want := range []string{
		"rabbitmq_queue_messages_ready 2\n",
		"rabbitmq_queue_messages_unacked 1\n",
		"rabbitmq_queue_messages 3\n",
		"rabbitmq_queues 1\n",
		"rabbitmq_consumers 1\n",
		"rabbitmq_channel_consumers 1\n",
		"rabbitmq_channel_messages_unacked 1\n",
		"rabbitmq_consumer_prefetch 1\n",
		"rabbitmq_queues_declared_total 3\n",
		"rabbitmq_queues_created_total 2\n",
		"rabbitmq_queues_deleted_total 1\n",
		"rabbitmq_global_messages_received_total 3\n",
		"rabbitmq_global_messages_delivered_consume_manual_ack_total 1\n",
		"rabbitmq_connection_channels 1\n",
		"warren_store_commits_total",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "p.q") {
		t.Errorf("aggregated /metrics names a queue:\n%s", body)
	}
	mfs := families(t, body)
	id := labelsOf(mfs["rabbitmq_identity_info"])
	if id["rabbitmq_node"] != e.broker.NodeName() || id["rabbitmq_cluster"] != "warren" || id["rabbitmq_endpoint"] != "aggregated" ||
		!strings.HasPrefix(id["rabbitmq_cluster_permanent_id"], "warren-cluster-id-") {
		t.Errorf("rabbitmq_identity_info labels = %v", id)
	}
	if id["rabbitmq_cluster_permanent_id"] != e.broker.ClusterPermanentID() {
		t.Errorf("permanent id %q, broker says %q", id["rabbitmq_cluster_permanent_id"], e.broker.ClusterPermanentID())
	}
	bi := labelsOf(mfs["rabbitmq_build_info"])
	for _, l := range []string{"rabbitmq_version", "prometheus_plugin_version", "prometheus_client_version", "erlang_version", "product_name", "product_version"} {
		if bi[l] == "" {
			t.Errorf("rabbitmq_build_info has no %s: %v", l, bi)
		}
	}
	if bi["product_name"] != "Warren" || !strings.HasPrefix(bi["erlang_version"], "go") {
		t.Errorf("rabbitmq_build_info = %v: want Warren's product name and the Go version", bi)
	}
}

func TestPrometheusListenerPerObject(t *testing.T) {
	e, prom := startProm(t)
	workload(t, e)
	// No credentials on the Prometheus listener, as RabbitMQ's.
	code, body := scrape(t, prom+"/metrics/per-object")
	if code != 200 {
		t.Fatalf("/metrics/per-object: %d %s", code, body)
	}
	for _, want := range []string{
		`rabbitmq_queue_messages_ready{queue="p.q",vhost="/"} 2`,
		`rabbitmq_queue_messages_unacked{queue="p.q",vhost="/"} 1`,
		`rabbitmq_queue_consumers{queue="p.q",vhost="/"} 1`,
		`rabbitmq_channel_messages_delivered_ack_total{queue="p.q",vhost="/"} 1`,
		`rabbitmq_queue_messages_published_total{queue="p.q",queue_vhost="/"} 3`,
		"warren_metrics_per_object_truncated 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("per-object lacks %q", want)
		}
	}
	for _, re := range []string{
		`rabbitmq_channel_consumers\{channel="127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+ \(1\)"\} 1`,
		`rabbitmq_connection_channels\{connection="127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+"\} 1`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("per-object lacks a series matching %s", re)
		}
	}
	if id := labelsOf(families(t, body)["rabbitmq_identity_info"]); id["rabbitmq_endpoint"] != "per-object" {
		t.Errorf("identity on per-object: %v", id)
	}
	// The management listener still asks for a monitoring user.
	if code, _ := e.doAs("", "", "GET", "/metrics/per-object", nil); code != 401 {
		t.Errorf("/metrics/per-object on the management listener without credentials: %d, want 401", code)
	}
}

func TestPrometheusDetailed(t *testing.T) {
	e, prom := startProm(t)
	workload(t, e)
	e.expect("PUT", "/api/vhosts/other", nil, 201)
	e.expect("PUT", "/api/queues/other/o.q", map[string]any{}, 201)
	e.expect("PUT", "/api/exchanges/%2F/p.x", map[string]any{"type": "topic"}, 201)
	e.expect("POST", "/api/bindings/%2F/e/p.x/q/p.q", map[string]any{"routing_key": "a.#"}, 201)
	e.expect("POST", "/api/bindings/%2F/e/p.x/q/p.q", map[string]any{"routing_key": "b.#"}, 201)

	get := func(query string) string {
		t.Helper()
		code, body := scrape(t, prom+"/metrics/detailed"+query)
		if code != 200 {
			t.Fatalf("/metrics/detailed%s: %d %s", query, code, body)
		}
		return body
	}
	names := func(body string) []string {
		var out []string
		for n := range families(t, body) {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}

	// No family: the identity only, as RabbitMQ.
	if got := names(get("")); strings.Join(got, " ") != "rabbitmq_build_info rabbitmq_identity_info" {
		t.Errorf("detailed without family = %v", got)
	}
	body := get("?family=queue_coarse_metrics")
	for _, want := range []string{
		`rabbitmq_detailed_queue_messages_ready{queue="p.q",vhost="/"} 2`,
		`rabbitmq_detailed_queue_messages_ready{queue="o.q",vhost="other"} 0`,
		`rabbitmq_detailed_queue_messages{queue="p.q",vhost="/"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("detailed queue_coarse_metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "channel") || strings.Contains(body, "queue_consumers") {
		t.Errorf("detailed queue_coarse_metrics has other families:\n%s", body)
	}
	if id := labelsOf(families(t, body)["rabbitmq_identity_info"]); id["rabbitmq_endpoint"] != "detailed" {
		t.Errorf("identity on detailed: %v", id)
	}
	// vhost keeps the queue families to it; an unknown vhost is ignored.
	body = get("?family=queue_coarse_metrics&vhost=other&vhost=nosuch")
	if !strings.Contains(body, `vhost="other"`) || strings.Contains(body, "p.q") {
		t.Errorf("detailed for vhost other:\n%s", body)
	}
	// queue_consumer_count with queue_metrics, its superset: one
	// queue_consumers series per queue (a duplicate would fail the scrape).
	body = get("?family=queue_consumer_count&family=queue_metrics&family=nosuch_family")
	if n := strings.Count(body, `rabbitmq_detailed_queue_consumers{queue="p.q",vhost="/"} 1`); n != 1 {
		t.Errorf("queue_consumers for p.q %d times:\n%s", n, body)
	}
	body = get("?family=channel_metrics&family=connection_metrics")
	if !strings.Contains(body, "rabbitmq_detailed_consumer_prefetch{channel=") || !strings.Contains(body, "rabbitmq_detailed_connection_channels{connection=") {
		t.Errorf("detailed channel and connection metrics:\n%s", body)
	}
	body = get("?family=vhost_status&family=exchange_bindings&family=exchange_names")
	for _, want := range []string{
		`rabbitmq_cluster_vhost_status{vhost="/"} 1`,
		`rabbitmq_cluster_vhost_status{vhost="other"} 1`,
		`rabbitmq_cluster_exchange_bindings{exchange="p.x",type="topic",vhost="/"} 2`,
		`rabbitmq_cluster_exchange_bindings{exchange="amq.direct",type="direct",vhost="/"} 0`,
		`rabbitmq_cluster_exchange_name{exchange="p.x",type="topic",vhost="/"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("cluster families lack %q", want)
		}
	}
	if strings.Contains(body, `exchange=""`) {
		t.Errorf("the default exchange is listed:\n%s", body)
	}
	// The management listener's detailed endpoint needs a monitoring user.
	if code, _ := e.doAs("", "", "GET", "/metrics/detailed?family=queue_coarse_metrics", nil); code != 401 {
		t.Errorf("/metrics/detailed on the management listener without credentials: %d, want 401", code)
	}
	if code, body := e.do("GET", "/metrics/detailed?family=queue_coarse_metrics", nil); code != 200 || !strings.Contains(string(body), `rabbitmq_detailed_queue_messages_ready{queue="p.q",vhost="/"} 2`) {
		t.Errorf("/metrics/detailed on the management listener as guest: %d %s", code, body)
	}
}

func TestPrometheusListenerPaths(t *testing.T) {
	_, prom := startProm(t)
	if code, body := scrape(t, prom+"/metrics/nosuch"); code != 404 || !strings.Contains(body, "Unknown Registry") {
		t.Errorf("/metrics/nosuch: %d %q, want 404 Unknown Registry", code, body)
	}
	for _, p := range []string{"/", "/api/overview"} {
		if code, _ := scrape(t, prom+p); code != 404 {
			t.Errorf("%s on the Prometheus listener: %d, want 404", p, code)
		}
	}
	resp, err := http.Post(prom+"/metrics", "text/plain", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

// overviewDashboard lists the metrics RabbitMQ's Grafana dashboard 10991
// (RabbitMQ-Overview) queries: the union of its revisions in
// rabbitmq-server's deps/rabbitmq_prometheus/docker/grafana/dashboards/
// RabbitMQ-Overview.json at v3.10.8 and at main (2026), with the labels its
// queries join and filter on.
var overviewDashboard = struct {
	metrics []string
	labels  map[string][]string // metric -> labels the queries use
}{
	metrics: []string{
		"rabbitmq_build_info", "rabbitmq_identity_info",
		"rabbitmq_channels", "rabbitmq_channels_closed_total", "rabbitmq_channels_opened_total", "rabbitmq_channel_consumers",
		"rabbitmq_connections", "rabbitmq_connections_closed_total", "rabbitmq_connections_opened_total",
		"rabbitmq_consumers", "rabbitmq_queues", "rabbitmq_queues_created_total", "rabbitmq_queues_declared_total", "rabbitmq_queues_deleted_total",
		"rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked",
		"rabbitmq_disk_space_available_bytes", "rabbitmq_disk_space_available_limit_bytes",
		"rabbitmq_process_max_fds", "rabbitmq_process_open_fds", "rabbitmq_process_max_tcp_sockets", "rabbitmq_process_open_tcp_sockets",
		"rabbitmq_process_resident_memory_bytes", "rabbitmq_resident_memory_limit_bytes", "rabbitmq_erlang_uptime_seconds",
		"rabbitmq_global_consumers", "rabbitmq_global_publishers",
		"rabbitmq_global_messages_acknowledged_total", "rabbitmq_global_messages_confirmed_total",
		"rabbitmq_global_messages_delivered_consume_auto_ack_total", "rabbitmq_global_messages_delivered_consume_manual_ack_total",
		"rabbitmq_global_messages_delivered_get_auto_ack_total", "rabbitmq_global_messages_delivered_get_manual_ack_total",
		"rabbitmq_global_messages_delivered_total", "rabbitmq_global_messages_get_empty_total",
		"rabbitmq_global_messages_received_confirm_total", "rabbitmq_global_messages_received_total",
		"rabbitmq_global_messages_redelivered_total", "rabbitmq_global_messages_routed_total",
		"rabbitmq_global_messages_unroutable_dropped_total", "rabbitmq_global_messages_unroutable_returned_total",
		"rabbitmq_message_size_bytes",
	},
	labels: map[string][]string{
		"rabbitmq_identity_info": {"rabbitmq_cluster", "rabbitmq_node", "rabbitmq_endpoint"},
		"rabbitmq_build_info":    {"rabbitmq_version", "erlang_version"},
	},
}

// quorumDashboard lists the metrics of dashboard 11340
// (RabbitMQ-Quorum-Queues-Raft; the 11352 is Erlang-Distribution),
// both revisions.
var quorumDashboard = []string{
	"rabbitmq_raft_commit_index", "rabbitmq_raft_commit_latency_seconds", "rabbitmq_raft_last_written_index",
	"rabbitmq_raft_log_commit_index", "rabbitmq_raft_log_last_written_index", "rabbitmq_raft_log_snapshot_index",
	"rabbitmq_raft_snapshot_index", "rabbitmq_raft_term", "rabbitmq_raft_entry_commit_latency_seconds", "rabbitmq_raft_term_total",
}

// notExported are the dashboards' metrics Warren does not export, each
// with docs/metrics.md's reason; the test fails if one appears, so that
// the list stays true.
var notExported = map[string]string{
	"rabbitmq_message_size_bytes": "RabbitMQ 4's histogram; Warren does not histogram body sizes",
}

func TestOverviewDashboardMetrics(t *testing.T) {
	e, prom := startProm(t)
	workload(t, e)
	_, body := scrape(t, prom+"/metrics")
	mfs := families(t, body)
	for _, m := range overviewDashboard.metrics {
		_, have := mfs[m]
		_, excused := notExported[m]
		switch {
		case excused && have:
			t.Errorf("%s is exported now: take it off notExported and docs/metrics.md", m)
		case !excused && !have:
			t.Errorf("the Overview dashboard's %s is not exported", m)
		}
	}
	for m, labels := range overviewDashboard.labels {
		got := labelsOf(mfs[m])
		for _, l := range labels {
			if got[l] == "" {
				t.Errorf("%s has no %s label: %v", m, l, got)
			}
		}
	}
	// Raft's metrics cannot exist: Warren's quorum queues have no Raft
	// log (docs/metrics.md).
	for _, m := range quorumDashboard {
		if _, have := mfs[m]; have {
			t.Errorf("%s is exported: docs/metrics.md says it cannot be", m)
		}
	}
}

// TestEnvironmentEndpoint: /api/nodes/{node}/environment shows the
// settings, typed, to administrators only, passwords hidden.
func TestEnvironmentEndpoint(t *testing.T) {
	e := startWith(t, mgmt.Options{Environment: []mgmt.Setting{
		{Name: "frame-max", Value: "65536", Origin: "warren.conf:1 (frame_max)"},
		{Name: "default-pass", Value: "s3cret", Origin: "default", Secret: true},
		{Name: "vm-memory-high-watermark", Value: "0.4", Origin: "default"},
		{Name: "listen", Value: "0.0.0.0:5672", Origin: "default"},
	}})
	var got []map[string]any
	e.getJSON("/api/nodes/"+e.broker.NodeName()+"/environment", &got)
	want := []map[string]any{
		{"name": "frame-max", "key": "frame_max", "value": 65536.0, "origin": "warren.conf:1 (frame_max)"},
		{"name": "default-pass", "key": "default_pass", "value": "********", "origin": "default"},
		{"name": "vm-memory-high-watermark", "key": "vm_memory_high_watermark", "value": 0.4, "origin": "default"},
		{"name": "listen", "key": "listen", "value": "0.0.0.0:5672", "origin": "default"},
	}
	if len(got) != len(want) {
		t.Fatalf("environment = %v", got)
	}
	for i := range want {
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("setting %d %s = %v, want %v", i, k, got[i][k], v)
			}
		}
	}
	e.expect("GET", "/api/nodes/nosuch@host/environment", nil, 404)
	e.expect("PUT", "/api/users/mon", map[string]any{"password": "pw", "tags": "monitoring"}, 201)
	if code, _ := e.doAs("mon", "pw", "GET", "/api/nodes/"+e.broker.NodeName()+"/environment", nil); code != 401 {
		t.Errorf("a monitoring user reads the environment: %d, want 401", code)
	}
}

// TestPrometheusPerObjectLimit: per object, at most the limit of each
// kind, and the scrape says it was cut.
func TestPrometheusPerObjectLimit(t *testing.T) {
	e := startWith(t, mgmt.Options{PrometheusListen: "127.0.0.1:0", PerObjectMetricsLimit: 1})
	prom := "http://" + e.m.PrometheusAddr().String()
	e.expect("PUT", "/api/queues/%2F/lim.a", map[string]any{}, 201)
	e.expect("PUT", "/api/queues/%2F/lim.b", map[string]any{}, 201)
	for _, path := range []string{"/metrics/per-object", "/metrics/detailed?family=queue_coarse_metrics"} {
		_, body := scrape(t, prom+path)
		if n := strings.Count(body, "queue_messages_ready{"); n != 1 || !strings.Contains(body, "warren_metrics_per_object_truncated 1") {
			t.Errorf("%s with a limit of 1 and 2 queues: %d series\n%s", path, n, body)
		}
	}
	// Aggregated, every queue counts.
	if _, body := scrape(t, prom+"/metrics"); !strings.Contains(body, "rabbitmq_queues 2\n") || strings.Contains(body, "truncated") {
		t.Errorf("aggregated with a per-object limit:\n%s", body)
	}
}
