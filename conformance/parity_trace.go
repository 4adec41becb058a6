package conformance

import (
	"fmt"
	"os/exec"
	"reflect"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The firehose (issue 16, point 3): amq.rabbitmq.trace exists in every
// vhost (topic, durable, internal); while tracing is on (rabbitmqctl
// trace_on) every publish is copied to it with routing key
// "publish.<exchange>" and every delivery with "deliver.<queue>", headers
// describing the original. RabbitMQ 3.10.8's headers, as observed:
//
//	publish: exchange_name, routing_keys (array), properties (table),
//	         node, vhost, connection, channel (int), user,
//	         routed_queues (array)
//	deliver: the same without routed_queues, with redelivered (int 0/1)

// RabbitmqctlTracing turns tracing of vhost on or off with rabbitmqctl.
func RabbitmqctlTracing(ctl, vhost string) func(on bool) error {
	return func(on bool) error {
		cmd := "trace_off"
		if on {
			cmd = "trace_on"
		}
		out, err := exec.Command(ctl, cmd, "-p", vhost).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v: %s", ctl, cmd, err, out)
		}
		return nil
	}
}

// SetTracing turns tracing of vhost on or off through the management API.
func (a HTTPAdmin) SetTracing(vhost string, on bool) error {
	return a.do("PUT", "/api/vhosts/"+esc(vhost), map[string]any{"tracing": on})
}

// trDrain reads every message of q (no-ack) until it stays empty for a
// moment and returns those whose routing_keys header holds key.
func trDrain(t T, ch *amqp.Channel, q, key string, want int) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	deadline := time.Now().Add(clWaitTimeout)
	for len(out) < want && time.Now().Before(deadline) {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", q, err)
		}
		if !ok {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if keys, _ := d.Headers["routing_keys"].([]any); len(keys) > 0 && keys[0] == key {
			out = append(out, d)
		}
	}
	return out
}

func init() {
	register(Case{Name: "parity/trace-exchange-exists", Run: func(t T, tg Target) {
		conn, ch := clDialChan(t, tg)
		if err := ch.ExchangeDeclarePassive("amq.rabbitmq.trace", "topic", true, false, true, false, nil); err != nil {
			t.Fatalf("passive declare of amq.rabbitmq.trace: %v", err)
		}
		// An equivalent declare succeeds too.
		if err := ch.ExchangeDeclare("amq.rabbitmq.trace", "topic", true, false, true, false, nil); err != nil {
			t.Fatalf("declare of amq.rabbitmq.trace: %v", err)
		}
		// It is internal: clients cannot publish to it.
		closes := clNotifyClose(ch)
		clPublish(t, ch, "amq.rabbitmq.trace", "publish.x", clBody("x"))
		clExpectAsyncClose(t, conn, closes, clCodeAccessRefused, clChanClose)
	}})

	register(Case{Name: "parity/trace-firehose-publish-and-deliver", Run: func(t T, tg Target) {
		if tg.SetTracing == nil {
			t.Logf("skipped: the target cannot turn tracing on")
			return
		}
		conn, ch := clDialChan(t, tg)
		tq := clDeclareQueue(t, tg, ch, "trace", nil)
		clBindQueue(t, ch, tq, "#", "amq.rabbitmq.trace", nil)
		q := clDeclareQueue(t, tg, ch, "traced", nil)
		if err := tg.SetTracing(true); err != nil {
			t.Fatalf("tracing on: %v", err)
		}
		t.Cleanup(func() { _ = tg.SetTracing(false) })
		pub := amqp.Publishing{Body: []byte("hello"), ContentType: "text/plain", DeliveryMode: 2, Priority: 3,
			Headers: amqp.Table{"h": "v"}}
		clPublish(t, ch, "", q, pub)
		clSyncChan(t, ch)
		c2 := clOpenChan(t, conn)
		clGetWait(t, c2, q, true)

		got := trDrain(t, ch, tq, q, 2)
		if len(got) != 2 {
			t.Fatalf("got %d trace copies naming %s, want 2 (publish and deliver)", len(got), q)
		}
		props := amqp.Table{"content_type": "text/plain", "delivery_mode": int32(2), "priority": int32(3), "headers": amqp.Table{"h": "v"}}
		for i, d := range got {
			kind := []string{"publish", "deliver"}[i]
			wantKey := map[string]string{"publish": "publish.", "deliver": "deliver." + q}[kind]
			if d.RoutingKey != wantKey || d.Exchange != "amq.rabbitmq.trace" || string(d.Body) != "hello" {
				t.Fatalf("%s copy: exchange %q key %q body %q, want amq.rabbitmq.trace %q hello", kind, d.Exchange, d.RoutingKey, d.Body, wantKey)
			}
			h := d.Headers
			t.Logf("%s copy headers: %v", kind, h)
			if h["exchange_name"] != "" || !reflect.DeepEqual(h["routing_keys"], []any{q}) {
				t.Errorf("%s copy: exchange_name %#v routing_keys %#v", kind, h["exchange_name"], h["routing_keys"])
			}
			if !reflect.DeepEqual(h["properties"], props) {
				t.Errorf("%s copy: properties %#v, want %#v", kind, h["properties"], props)
			}
			if h["user"] != clUrlUser(tg) {
				t.Errorf("%s copy: user %#v, want %q", kind, h["user"], clUrlUser(tg))
			}
			for _, k := range []string{"node", "vhost", "connection"} {
				if s, ok := h[k].(string); !ok || s == "" {
					t.Errorf("%s copy: %s = %#v, want a non-empty string", kind, k, h[k])
				}
			}
			wantCh := int32(1)
			if kind == "deliver" {
				wantCh = 2
			}
			if h["channel"] != wantCh {
				t.Errorf("%s copy: channel %#v, want %d", kind, h["channel"], wantCh)
			}
			if kind == "publish" {
				if !reflect.DeepEqual(h["routed_queues"], []any{q}) {
					t.Errorf("publish copy: routed_queues %#v, want [%s]", h["routed_queues"], q)
				}
				if _, ok := h["redelivered"]; ok {
					t.Errorf("publish copy has redelivered")
				}
			} else {
				if h["redelivered"] != int32(0) {
					t.Errorf("deliver copy: redelivered %#v, want 0", h["redelivered"])
				}
				if _, ok := h["routed_queues"]; ok {
					t.Errorf("deliver copy has routed_queues")
				}
			}
		}

		// A delivery to a consumer, redelivered after a reject: two
		// deliver copies, redelivered 0 then 1.
		clPublish(t, ch, "", q, clBody("again"))
		clSyncChan(t, ch)
		ds := clConsume(t, c2, q, "tracer-test", false)
		d := clRecvDelivery(t, ds)
		if err := d.Reject(true); err != nil {
			t.Fatalf("reject: %v", err)
		}
		if d := clRecvDelivery(t, ds); !d.Redelivered {
			t.Fatalf("second delivery not redelivered")
		} else if err := d.Ack(false); err != nil {
			t.Fatalf("ack: %v", err)
		}
		var re []any
		for _, d := range trDrain(t, ch, tq, q, 3) {
			if string(d.Body) == "again" && d.RoutingKey == "deliver."+q {
				re = append(re, d.Headers["redelivered"])
			}
		}
		if !reflect.DeepEqual(re, []any{int32(0), int32(1)}) {
			t.Fatalf("deliver copies of a consumer's deliveries: redelivered %v, want [0 1]", re)
		}
		if err := c2.Cancel("tracer-test", false); err != nil {
			t.Fatalf("cancel: %v", err)
		}

		// Off again: no more copies.
		if err := tg.SetTracing(false); err != nil {
			t.Fatalf("tracing off: %v", err)
		}
		clPublish(t, ch, "", q, clBody("quiet"))
		clSyncChan(t, ch)
		clGetWait(t, c2, q, true)
		time.Sleep(100 * time.Millisecond)
		for {
			d, ok, err := ch.Get(tq, true)
			if err != nil {
				t.Fatalf("basic.get: %v", err)
			}
			if !ok {
				break
			}
			if string(d.Body) == "quiet" {
				t.Fatalf("a copy (%s) after tracing was turned off", d.RoutingKey)
			}
		}
	}})
}
