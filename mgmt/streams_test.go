package mgmt_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// declareStream declares stream name with args and publishes n confirmed
// messages to it, the i-th keyed "k<i>".
func declareStream(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table, n int) {
	t.Helper()
	a := amqp091.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{
			Body: []byte(fmt.Sprintf("m%d", i)), Headers: amqp091.Table{"x-stream-partition-key": fmt.Sprintf("k%d", i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("nacked")
		}
	}
}

// TestStreamQueueJSON: a stream's GET has RabbitMQ 3.10's stream fields
// (no classic paging fields) and Warren's partitions and groups.
func TestStreamQueueJSON(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	declareStream(t, ch, "st", nil, 5)
	if _, err := ch.QueueDeclare("cq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var q map[string]any
	e.getJSON("/api/queues/%2F/st", &q)
	node, _ := q["node"].(string)
	if q["type"] != "stream" || q["leader"] != node || node == "" {
		t.Fatalf("type %v, leader %v, node %v; want stream led by the node", q["type"], q["leader"], q["node"])
	}
	for _, k := range []string{"members", "online"} {
		if l, _ := q[k].([]any); len(l) != 1 || l[0] != node {
			t.Errorf("%s = %v, want [%s]", k, q[k], node)
		}
	}
	if q["committed_offset"] != 4.0 {
		t.Errorf("committed_offset = %v, want 4 (the last of offsets 0..4)", q["committed_offset"])
	}
	for _, k := range []string{"messages_ram", "messages_paged_out", "message_bytes_ready", "exclusive_consumer_tag"} {
		if _, ok := q[k]; ok {
			t.Errorf("a stream has %s; RabbitMQ 3.10 has none", k)
		}
	}
	parts, _ := q["partitions"].([]any)
	if len(parts) != 1 {
		t.Fatalf("partitions = %v, want one", q["partitions"])
	}
	p := parts[0].(map[string]any)
	if p["partition"] != 0.0 || p["first_offset"] != 0.0 || p["next_offset"] != 5.0 || p["messages"] != 5.0 ||
		p["segments"].(float64) < 1 || p["bytes"].(float64) <= 0 {
		t.Errorf("partition = %v, want offsets 0..5 in a non-empty segment", p)
	}
	if g, ok := q["groups"].([]any); !ok || len(g) != 0 {
		t.Errorf("groups = %v, want []", q["groups"])
	}

	var cq map[string]any
	e.getJSON("/api/queues/%2F/cq", &cq)
	if cq["type"] != "classic" || cq["partitions"] != nil || cq["leader"] != nil {
		t.Errorf("classic queue: type %v, partitions %v, leader %v", cq["type"], cq["partitions"], cq["leader"])
	}
	if _, ok := cq["messages_ram"]; !ok {
		t.Error("a classic queue lost messages_ram")
	}
	// Lists carry the type and RabbitMQ's stream fields, not the groups.
	var list []map[string]any
	e.getJSON("/api/queues/%2F", &list)
	for _, it := range list {
		if it["name"] == "st" && (it["type"] != "stream" || it["leader"] != node || it["partitions"] != nil) {
			t.Errorf("list item %v", it)
		}
	}
}

// TestStreamGroupErrors: 404 for an unknown vhost, stream or group (and
// for a queue that is not a stream), 400 for a bad reset body, 401 without
// the permission.
func TestStreamGroupErrors(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	declareStream(t, ch, "st", nil, 1)
	if _, err := ch.QueueDeclare("cq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.expect("GET", "/api/stream-groups/%2F/st", nil, 200); strings.TrimSpace(string(got)) != "[]" {
		t.Errorf("groups of a stream without any: %s", got)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/stream-groups/%2F/nope"},
		{"GET", "/api/stream-groups/nope/st"},
		{"GET", "/api/stream-groups/%2F/st/g"},
		{"DELETE", "/api/stream-groups/%2F/st/g"},
		{"DELETE", "/api/stream-groups/%2F/nope/g"},
	} {
		errorIs(t, e.expect(c.method, c.path, nil, 404), "Object Not Found", "Not Found")
	}
	errorIs(t, e.expect("POST", "/api/stream-groups/%2F/st/g/reset", map[string]any{"offset": "first"}, 404), "Object Not Found", "Not Found")
	errorIs(t, e.expect("GET", "/api/stream-groups/%2F/cq", nil, 404), "Object Not Found", "queue 'cq' in vhost '/' is not a stream")
	for _, body := range []any{
		map[string]any{},
		map[string]any{"offset": "earliest"},
		map[string]any{"offset": -1},
		map[string]any{"offset": 1.5},
		map[string]any{"offset": true},
		map[string]any{"offset": "2026-13-01T00:00:00Z"},
		[]int{1},
	} {
		code, out := e.do("POST", "/api/stream-groups/%2F/st/g/reset", body)
		if code != 400 {
			t.Errorf("reset %v: %d %s, want 400", body, code, out)
			continue
		}
		errorIs(t, out, "bad_request", "")
	}

	// read for GET, configure for DELETE and reset.
	e.expect("PUT", "/api/users/reader", map[string]any{"password": "pw", "tags": "management"}, 201)
	e.expect("PUT", "/api/permissions/%2F/reader", map[string]any{"configure": "", "write": "", "read": ".*"}, 201)
	e.expect("PUT", "/api/users/none", map[string]any{"password": "pw", "tags": "management"}, 201)
	e.expect("PUT", "/api/permissions/%2F/none", map[string]any{"configure": "", "write": ".*", "read": ""}, 201)
	e.expectAs("reader", "pw", "GET", "/api/stream-groups/%2F/st", nil, 200)
	errorIs(t, e.expectAs("none", "pw", "GET", "/api/stream-groups/%2F/st", nil, 401), "not_authorised", "")
	errorIs(t, e.expectAs("reader", "pw", "DELETE", "/api/stream-groups/%2F/st/g", nil, 401), "not_authorised", "")
	errorIs(t, e.expectAs("reader", "pw", "POST", "/api/stream-groups/%2F/st/g/reset", map[string]any{"offset": "first"}, 401), "not_authorised", "")
	e.expect("PUT", "/api/users/stranger", map[string]any{"password": "pw", "tags": "management"}, 201)
	errorIs(t, e.expectAs("stranger", "pw", "GET", "/api/stream-groups/%2F/st", nil, 401), "not_authorised", "User not authorised to access virtual host")
}

// TestStreamMetrics scrapes the partition gauges (and the group ones when
// a group exists: TestStreamGroups).
func TestStreamMetrics(t *testing.T) {
	e, prom := startProm(t)
	_, ch := e.dial()
	declareStream(t, ch, "st", nil, 3)
	for _, url := range []string{prom + "/metrics", prom + "/metrics/per-object", e.base + "/metrics"} {
		code, body := scrape(t, url)
		if code != 200 {
			t.Fatalf("%s: %d", url, code)
		}
		mfs := families(t, body)
		for name, want := range map[string]float64{"warren_stream_partition_first_offset": 0, "warren_stream_partition_next_offset": 3} {
			mf := mfs[name]
			if mf == nil || len(mf.Metric) != 1 {
				t.Fatalf("%s: %s = %v, want one series", url, name, mf)
			}
			l := labelsOf(mf)
			if l["vhost"] != "/" || l["stream"] != "st" || l["partition"] != "0" || mf.Metric[0].GetGauge().GetValue() != want {
				t.Errorf("%s: %s = %v, want %v for vhost / stream st partition 0", url, name, mf.Metric[0], want)
			}
		}
	}
}

// streamGroupsOn reports whether the broker has consumer groups (the
// stream queue type of issue 13, section 3): it consumes with
// x-stream-group and looks for the group.
func streamGroupsOn(t *testing.T, e *env, ch *amqp091.Channel, stream string) bool {
	t.Helper()
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(stream, "probe", false, false, false, false, amqp091.Table{"x-stream-group": "probe"}); err != nil {
		return false
	}
	var groups []map[string]any
	e.getJSON("/api/stream-groups/%2F/"+stream, &groups)
	if err := ch.Cancel("probe", false); err != nil {
		t.Fatal(err)
	}
	return len(groups) > 0
}

func TestStreamGroups(t *testing.T) {
	e, prom := startProm(t)
	conn, ch := e.dial()
	declareStream(t, ch, "sg", amqp091.Table{"x-stream-partitions": int32(3)}, 9)
	c2, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if !streamGroupsOn(t, e, c2, "sg") {
		t.Skip("no consumer groups in this broker's streams yet")
	}
	e.expect("DELETE", "/api/stream-groups/%2F/sg/probe", nil, 204)

	// One member takes every partition; it acks all 9 messages.
	mc, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	dels, err := mc.Consume("sg", "w1", false, false, false, false, amqp091.Table{"x-stream-group": "g", "x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		d := <-dels
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	var g map[string]any
	waitFor(t, "group g has caught up", func() bool {
		e.getJSON("/api/stream-groups/%2F/sg/g", &g)
		return g["lag"] == 0.0
	})
	if g["name"] != "g" || g["vhost"] != "/" || g["stream"] != "sg" {
		t.Errorf("group = %v", g)
	}
	members, _ := g["members"].([]any)
	if len(members) != 1 {
		t.Fatalf("members = %v, want w1", g["members"])
	}
	m := members[0].(map[string]any)
	cd, _ := m["channel_details"].(map[string]any)
	var cons []map[string]any
	e.getJSON("/api/consumers/%2F", &cons)
	var want map[string]any
	for _, c := range cons {
		if c["consumer_tag"] == "w1" {
			want, _ = c["channel_details"].(map[string]any)
		}
	}
	if m["consumer_tag"] != "w1" || cd == nil || want == nil || cd["connection_name"] != want["connection_name"] ||
		cd["number"] != want["number"] || cd["name"] != want["name"] {
		t.Errorf("member %v, want the channel /api/consumers gives w1: %v", m, want)
	}
	if ps, _ := m["partitions"].([]any); len(ps) != 3 {
		t.Errorf("w1 owns %v, want all 3 partitions", m["partitions"])
	}
	parts, _ := g["partitions"].([]any)
	if len(parts) != 3 {
		t.Fatalf("partitions = %v", g["partitions"])
	}
	committed := 0.0
	for _, p := range parts {
		p := p.(map[string]any)
		if p["owner"] != "w1" || p["lag"] != 0.0 {
			t.Errorf("partition %v, want owned by w1 with lag 0", p)
		}
		committed += p["committed_offset"].(float64)
	}
	if committed != 9 {
		t.Errorf("committed offsets sum to %v, want 9", committed)
	}

	// While it has a member the group is neither reset nor deleted.
	errorIs(t, e.expect("DELETE", "/api/stream-groups/%2F/sg/g", nil, 409), "conflict",
		"consumer group 'g' of stream 'sg' in vhost '/' has members: its offsets are reset and it is deleted only while it has none")
	errorIs(t, e.expect("POST", "/api/stream-groups/%2F/sg/g/reset", map[string]any{"offset": "first"}, 409), "conflict", "")

	if err := mc.Cancel("w1", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "w1 left g", func() bool {
		e.getJSON("/api/stream-groups/%2F/sg/g", &g)
		ms, _ := g["members"].([]any)
		return len(ms) == 0
	})
	e.expect("POST", "/api/stream-groups/%2F/sg/g/reset", map[string]any{"offset": "first"}, 204)
	e.getJSON("/api/stream-groups/%2F/sg/g", &g)
	if g["lag"] != 9.0 {
		t.Errorf("after a reset to first: lag %v, want 9", g["lag"])
	}
	e.expect("POST", "/api/stream-groups/%2F/sg/g/reset", map[string]any{"offset": 1}, 204)
	e.expect("POST", "/api/stream-groups/%2F/sg/g/reset", map[string]any{"offset": "2000-01-01T00:00:00Z"}, 204)
	e.getJSON("/api/stream-groups/%2F/sg/g", &g)
	if g["lag"] != 9.0 {
		t.Errorf("after a reset to 2000-01-01: lag %v, want 9", g["lag"])
	}

	// The queue's GET shows the group; Prometheus its lags.
	var q map[string]any
	e.getJSON("/api/queues/%2F/sg", &q)
	if gs, _ := q["groups"].([]any); len(gs) != 1 || gs[0].(map[string]any)["name"] != "g" {
		t.Errorf("queue groups = %v", q["groups"])
	}
	if ps, _ := q["partitions"].([]any); len(ps) != 3 {
		t.Errorf("queue partitions = %v", q["partitions"])
	}
	_, body := scrape(t, prom+"/metrics")
	mfs := families(t, body)
	if mf := mfs["warren_stream_group_lag"]; mf == nil || len(mf.Metric) != 1 || mf.Metric[0].GetGauge().GetValue() != 9 ||
		labelsOf(mf)["group"] != "g" || labelsOf(mf)["stream"] != "sg" {
		t.Errorf("warren_stream_group_lag = %v, want 9 for group g of sg", mf)
	}
	sum := 0.0
	if mf := mfs["warren_stream_group_partition_lag"]; mf == nil || len(mf.Metric) != 3 {
		t.Errorf("warren_stream_group_partition_lag = %v, want 3 series", mf)
	} else {
		for _, m := range mf.Metric {
			sum += m.GetGauge().GetValue()
		}
	}
	if sum != 9 {
		t.Errorf("partition lags sum to %v, want 9", sum)
	}

	e.expect("DELETE", "/api/stream-groups/%2F/sg/g", nil, 204)
	e.expect("GET", "/api/stream-groups/%2F/sg/g", nil, 404)
	var left []json.RawMessage
	e.getJSON("/api/stream-groups/%2F/sg", &left)
	if len(left) != 0 {
		t.Errorf("groups after the delete: %s", left)
	}
}
