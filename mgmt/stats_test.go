package mgmt_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/mgmt"
)

// stat reads message_stats.name (a count) or message_stats.name_details.rate.
func stat(t *testing.T, obj map[string]any, name string) float64 {
	t.Helper()
	ms, ok := obj["message_stats"].(map[string]any)
	if !ok {
		t.Fatalf("no message_stats in %v", obj)
	}
	if rate, ok := strings.CutSuffix(name, ".rate"); ok {
		return ms[rate+"_details"].(map[string]any)["rate"].(float64)
	}
	v, ok := ms[name].(float64)
	if !ok {
		t.Fatalf("message_stats.%s missing: %v", name, ms)
	}
	return v
}

func TestMessageStats(t *testing.T) {
	e := startWith(t, mgmt.Options{StatsInterval: 50 * time.Millisecond})
	_, ch := e.dial()
	if _, err := ch.QueueDeclare("stats-q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 100))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	for range 10 {
		if err := ch.Publish("", "stats-q", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	ch.Publish("amq.direct", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")})  // returned
	ch.Publish("amq.direct", "nowhere", false, false, amqp091.Publishing{Body: []byte("d")}) // dropped
	for range 12 {
		<-confirms
	}
	<-returns
	// 2 by basic.get with ack (acked), 1 without, then a consumer takes the
	// other 7 with ack and acks them; one is requeued and redelivered first.
	for range 2 {
		m, ok, err := ch.Get("stats-q", false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		m.Ack(false)
	}
	if _, ok, err := ch.Get("stats-q", true); err != nil || !ok {
		t.Fatalf("get no-ack: %v %v", ok, err)
	}
	m, _, _ := ch.Get("stats-q", false)
	m.Nack(false, true) // requeued: the consumer gets it redelivered
	msgs, err := ch.Consume("stats-q", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		d := <-msgs
		d.Ack(false)
	}
	if _, ok, _ := ch.Get("stats-q", false); ok {
		t.Fatal("queue not empty")
	}

	var q map[string]any
	waitFor(t, "acks counted", func() bool {
		e.getJSON("/api/queues/%2F/stats-q", &q)
		return stat(t, q, "ack") == 9
	})
	want := map[string]float64{
		"publish": 10, "get": 3, "get_no_ack": 1, "get_empty": 1, "deliver": 7, "deliver_no_ack": 0,
		"deliver_get": 11, "redeliver": 1, "ack": 9,
	}
	for k, v := range want {
		if got := stat(t, q, k); got != v {
			t.Errorf("queue message_stats.%s = %v, want %v", k, got, v)
		}
	}
	var o map[string]any
	e.getJSON("/api/overview", &o)
	for k, v := range map[string]float64{"publish": 12, "confirm": 12, "return_unroutable": 1, "drop_unroutable": 1, "deliver_get": 11, "ack": 9} {
		if got := stat(t, o, k); got != v {
			t.Errorf("overview message_stats.%s = %v, want %v", k, got, v)
		}
	}
	var vs []map[string]any
	e.getJSON("/api/vhosts", &vs)
	if got := stat(t, vs[0], "publish"); got != 12 {
		t.Errorf("vhost publish = %v", got)
	}

	// Rates: publish steadily and watch publish_details.rate rise.
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
			ch.Publish("", "stats-q", false, false, amqp091.Publishing{Body: []byte("x")})
			<-confirms
		}
	}()
	waitFor(t, "publish rates", func() bool {
		e.getJSON("/api/overview", &o)
		e.getJSON("/api/queues/%2F/stats-q", &q)
		return stat(t, o, "publish.rate") > 0 && stat(t, q, "publish.rate") > 0 && stat(t, q, "deliver_get.rate") > 0
	})
	close(stop)
	<-done
	if err := ch.Cancel("", false); err != nil {
		t.Fatal(err)
	}

	// Deleting the queue keeps its counts in the totals.
	e.getJSON("/api/overview", &o)
	before := stat(t, o, "ack")
	time.Sleep(120 * time.Millisecond) // a sample sees the queue first
	e.expect("DELETE", "/api/queues/%2F/stats-q", nil, 204)
	e.getJSON("/api/overview", &o)
	if got := stat(t, o, "ack"); got != before {
		t.Errorf("overview ack after deleting the queue = %v, want %v", got, before)
	}

	// Prometheus counters and the fsync histogram.
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	e.getJSON("/api/overview", &o)
	for _, want := range []string{
		fmt.Sprintf("rabbitmq_global_messages_received_total %v\n", stat(t, o, "publish")),
		fmt.Sprintf("rabbitmq_global_messages_confirmed_total %v\n", stat(t, o, "confirm")),
		fmt.Sprintf("rabbitmq_global_messages_delivered_total %v\n", stat(t, o, "deliver_get")),
		"rabbitmq_global_messages_acknowledged_total 9\n",
		"rabbitmq_global_messages_unroutable_returned_total 1\n",
		`warren_store_fsync_duration_seconds_bucket{le="0.001"}`, "warren_store_fsync_duration_seconds_count",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// details reads obj's path (dotted) as a {name}_details object.
func details(t *testing.T, obj map[string]any, path string) map[string]any {
	t.Helper()
	var v any = obj
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: no %s in %v", path, p, v)
		}
		v = m[p]
	}
	d, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %v", path, v)
	}
	return d
}

// samples reads a details object's samples, newest first.
func samples(t *testing.T, d map[string]any) (vals []float64, times []float64) {
	t.Helper()
	l, ok := d["samples"].([]any)
	if !ok {
		t.Fatalf("no samples in %v", d)
	}
	for _, s := range l {
		m := s.(map[string]any)
		vals = append(vals, m["sample"].(float64))
		times = append(times, m["timestamp"].(float64))
	}
	return vals, times
}

// TestHistoryAPI publishes in two bursts a second and more apart and reads
// the samples back as RabbitMQ serves them for lengths_age/_incr and
// msg_rates_age/_incr.
func TestHistoryAPI(t *testing.T) {
	e := startWith(t, mgmt.Options{StatsInterval: 50 * time.Millisecond})
	_, ch := e.dial()
	if _, err := ch.QueueDeclare("hist-q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		for range n {
			if err := ch.Publish("", "hist-q", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var q map[string]any
	publish(4)
	waitFor(t, "4 messages", func() bool {
		e.getJSON("/api/queues/%2F/hist-q", &q)
		return q["messages"] == 4.0
	})
	time.Sleep(1100 * time.Millisecond) // a whole second with 4
	publish(6)
	const query = "?lengths_age=4&lengths_incr=1&msg_rates_age=4&msg_rates_incr=1"
	waitFor(t, "samples with 10", func() bool {
		e.getJSON("/api/queues/%2F/hist-q"+query, &q)
		v, _ := samples(t, details(t, q, "messages_details"))
		return len(v) > 0 && v[0] == 10
	})
	time.Sleep(1100 * time.Millisecond) // the second after is whole too
	e.getJSON("/api/queues/%2F/hist-q"+query, &q)
	for _, path := range []string{"messages_details", "messages_ready_details", "message_stats.publish_details"} {
		vals, times := samples(t, details(t, q, path))
		// Age 4 and incr 1 make 5 steps; those before the queue's
		// first sample (some 3 s ago) are left out.
		if len(vals) < 3 || len(vals) > 5 {
			t.Errorf("%s: %d samples, want 3 to 5: %v", path, len(vals), vals)
			continue
		}
		for i := range vals {
			if int64(times[i])%1000 != 0 || i > 0 && times[i-1]-times[i] != 1000 {
				t.Errorf("%s: timestamps %v are not whole seconds, newest first", path, times)
				break
			}
		}
		// The newest samples are 10; one of the older ones 4.
		if vals[0] != 10 || !slices.Contains(vals, 4) || slices.ContainsFunc(vals, func(v float64) bool { return v != 4 && v != 10 && v != 0 }) {
			t.Errorf("%s: samples %v, want 10 first and 4 before", path, vals)
		}
	}
	d := details(t, q, "messages_details")
	if _, ok := d["avg"].(float64); !ok {
		t.Errorf("messages_details has no avg: %v", d)
	}
	if _, ok := d["avg_rate"].(float64); !ok {
		t.Errorf("messages_details has no avg_rate: %v", d)
	}
	unacked, _ := samples(t, details(t, q, "messages_unacknowledged_details"))
	if slices.ContainsFunc(unacked, func(v float64) bool { return v != 0 }) {
		t.Errorf("unacked samples %v, want zeros", unacked)
	}

	// The overview's totals and rates, and the list's items, have them too.
	var o map[string]any
	e.getJSON("/api/overview"+query, &o)
	if v, _ := samples(t, details(t, o, "queue_totals.messages_details")); len(v) == 0 || v[0] != 10 {
		t.Errorf("overview messages samples = %v", v)
	}
	if v, _ := samples(t, details(t, o, "message_stats.publish_details")); len(v) == 0 || v[0] != 10 {
		t.Errorf("overview publish samples = %v", v)
	}
	var page struct{ Items []map[string]any }
	e.getJSON("/api/queues?page=1&page_size=10&"+query[1:], &page)
	if len(page.Items) != 1 {
		t.Fatalf("page = %v", page)
	}
	if v, _ := samples(t, details(t, page.Items[0], "message_stats.deliver_get_details")); len(v) < 3 || v[0] != 0 {
		t.Errorf("deliver_get samples = %v", v)
	}

	// Without a range: rates only, as RabbitMQ answers.
	e.getJSON("/api/queues/%2F/hist-q", &q)
	if d := details(t, q, "messages_details"); len(d) != 1 || d["rate"] == nil {
		t.Errorf("messages_details without a range = %v", d)
	}
	if d := details(t, q, "message_stats.publish_details"); len(d) != 1 {
		t.Errorf("publish_details without a range = %v", d)
	}
	// A bad range is refused with RabbitMQ's words.
	if b := e.expect("GET", "/api/overview?lengths_age=10&lengths_incr=0", nil, 400); !strings.Contains(string(b), "Invalid range parameters: age 10, incr 0") {
		t.Errorf("bad range: %s", b)
	}
	if b := e.expect("GET", "/api/queues/%2F/hist-q?msg_rates_age=6000&msg_rates_incr=5", nil, 400); !strings.Contains(string(b), "Invalid range parameters: age 6000, incr 5") {
		t.Errorf("too many samples: %s", b)
	}
}

// TestConnectionTraffic checks recv_oct and send_oct, their rates, and a
// vhost's totals, which keep the bytes of closed connections.
func TestConnectionTraffic(t *testing.T) {
	e := startWith(t, mgmt.Options{StatsInterval: 50 * time.Millisecond})
	c, ch := e.dial()
	if _, err := ch.QueueDeclare("traffic-q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 4096)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			ch.Publish("", "traffic-q", false, false, amqp091.Publishing{Body: body})
		}
	}()
	var conns []map[string]any
	waitFor(t, "a receive rate", func() bool {
		e.getJSON("/api/connections", &conns)
		return len(conns) == 1 && details(t, conns[0], "recv_oct_details")["rate"].(float64) > 4096
	})
	close(stop)
	<-done
	conn := conns[0]
	for _, k := range []string{"recv_oct", "recv_cnt", "send_oct", "send_cnt"} {
		if v, _ := conn[k].(float64); v <= 0 {
			t.Errorf("%s = %v", k, conn[k])
		}
	}
	if conn["send_pend"] != 0.0 {
		t.Errorf("send_pend = %v", conn["send_pend"])
	}
	var one map[string]any
	e.getJSON("/api/connections/"+url.PathEscape(conn["name"].(string)), &one)
	if one["recv_oct"].(float64) < conn["recv_oct"].(float64) {
		t.Errorf("recv_oct went down: %v then %v", conn["recv_oct"], one["recv_oct"])
	}
	var v map[string]any
	e.getJSON("/api/vhosts/%2F", &v)
	if v["recv_oct"].(float64) < one["recv_oct"].(float64) {
		t.Errorf("vhost recv_oct %v < its connection's %v", v["recv_oct"], one["recv_oct"])
	}
	time.Sleep(120 * time.Millisecond) // a sample sees the last bytes
	e.getJSON("/api/connections", &conns)
	last := conns[0]["recv_oct"].(float64)
	c.Close()
	waitFor(t, "no connections", func() bool {
		e.getJSON("/api/connections", &conns)
		return len(conns) == 0
	})
	e.getJSON("/api/vhosts/%2F", &v)
	if v["recv_oct"].(float64) < last {
		t.Errorf("vhost recv_oct %v after the connection closed, was %v", v["recv_oct"], last)
	}
}
