package mgmt_test

import (
	"fmt"
	"io"
	"net/http"
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
