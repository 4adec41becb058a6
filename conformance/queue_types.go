package conformance

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Queue types (x-queue-type): each refuses some arguments and flags with
// 406, in RabbitMQ's words. Arguments are checked before flags, and the
// values of the arguments a type takes before the arguments it refuses.

func init() {
	const (
		prop = "PRECONDITION_FAILED - invalid property '%[3]s' for queue '%[1]s' in vhost '%[2]s'"
		typ  = "PRECONDITION_FAILED - invalid arg '%[3]s' for queue '%[1]s' in vhost '%[2]s' of queue type %[4]s"
		arg  = "PRECONDITION_FAILED - invalid arg '%[3]s' for queue '%[1]s' in vhost '%[2]s': %[4]s"
	)
	type typeCase struct {
		name          string
		durable, excl bool
		autoDel       bool
		args          amqp.Table
		format        string // "" = accepted
		what, detail  string
	}
	quorum := func(extra amqp.Table) amqp.Table {
		t := amqp.Table{"x-queue-type": "quorum"}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	for _, c := range []typeCase{
		{"queue-type/quorum-non-durable-406", false, false, false, quorum(nil), prop, "non-durable", ""},
		{"queue-type/quorum-exclusive-406", true, true, false, quorum(nil), prop, "exclusive-owner", ""},
		{"queue-type/quorum-auto-delete-406", true, false, true, quorum(nil), prop, "auto-delete", ""},
		{"queue-type/stream-non-durable-406", false, false, false, amqp.Table{"x-queue-type": "stream"}, prop, "non-durable", ""},
		{"queue-type/quorum-max-priority-406", true, false, false, quorum(amqp.Table{"x-max-priority": int32(5)}), typ, "x-max-priority", "rabbit_quorum_queue"},
		{"queue-type/quorum-refused-arg-before-durability", false, false, false, quorum(amqp.Table{"x-queue-mode": "lazy"}), typ, "x-queue-mode", "rabbit_quorum_queue"},
		{"queue-type/stream-max-length-406", true, false, false, amqp.Table{"x-queue-type": "stream", "x-max-length": int32(5)}, typ, "x-max-length", "rabbit_stream_queue"},
		{"queue-type/classic-delivery-limit-406", true, false, false, amqp.Table{"x-delivery-limit": int32(5)}, typ, "x-delivery-limit", "rabbit_classic_queue"},
		{"queue-type/unknown-type-406", true, false, false, amqp.Table{"x-queue-type": "bogus"}, arg, "x-queue-type", "\"unsupported queue type 'bogus'\""},
		{"queue-type/non-string-type-406", true, false, false, amqp.Table{"x-queue-type": int32(1)}, arg, "x-queue-type", "{unacceptable_type,signedint}"},
		{"queue-type/value-checked-before-refused-args", true, false, false, amqp.Table{"x-delivery-limit": int32(3), "x-max-length": "abc"}, arg, "x-max-length", "\"expected integer, got longstr\""},
		{"queue-type/dead-letter-key-without-exchange-406", true, false, false, amqp.Table{"x-dead-letter-routing-key": "k"}, arg, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"},
		{"queue-args/expires-string-406", false, false, false, amqp.Table{"x-expires": "abc"}, arg, "x-expires", "\"expected integer, got longstr\""},
		{"queue-args/expires-zero-406", false, false, false, amqp.Table{"x-expires": int32(0)}, arg, "x-expires", "{value_zero,0}"},
		{"queue-args/expires-negative-406", false, false, false, amqp.Table{"x-expires": int32(-1)}, arg, "x-expires", "{value_negative,-1}"},
		{"queue-args/message-ttl-double-406", false, false, false, amqp.Table{"x-message-ttl": 3.5}, arg, "x-message-ttl", "\"expected integer, got double\""},
		{"queue-args/max-length-negative-406", false, false, false, amqp.Table{"x-max-length": int32(-1)}, arg, "x-max-length", "{value_negative,-1}"},
		{"queue-args/max-priority-300-406", false, false, false, amqp.Table{"x-max-priority": int32(300)}, arg, "x-max-priority", "{max_value_exceeded,300}"},
		{"queue-args/single-active-consumer-string-406", false, false, false, amqp.Table{"x-single-active-consumer": "abc"}, arg, "x-single-active-consumer", "{unacceptable_type,longstr}"},
		{"queue-args/overflow-int-406", false, false, false, amqp.Table{"x-overflow": int32(1)}, arg, "x-overflow", "{unacceptable_type,signedint}"},
		{"queue-args/dead-letter-exchange-int-406", false, false, false, amqp.Table{"x-dead-letter-exchange": int32(1)},
			"PRECONDITION_FAILED - invalid type '%[4]s' for arg '%[3]s' in queue '%[1]s' in vhost '%[2]s'", "x-dead-letter-exchange", "signedint"},
		{"queue-type/quorum-accepted", true, false, false, quorum(amqp.Table{"x-delivery-limit": int32(3), "x-overflow": "reject-publish"}), "", "", ""},
		{"queue-type/classic-explicit-accepted", true, false, false, amqp.Table{"x-queue-type": "classic", "x-max-priority": int32(3)}, "", "", ""},
	} {
		register(Case{Name: c.name, Run: func(t T, tg Target) {
			conn, ch := clDialChan(t, tg)
			name := clUniq("qt")
			clCleanupQueue(t, tg, name)
			_, err := ch.QueueDeclare(name, c.durable, c.autoDel, c.excl, false, c.args)
			if c.format == "" {
				if err != nil {
					t.Fatalf("declare: %v", err)
				}
				return
			}
			ae := clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			if want := fmt.Sprintf(c.format, name, acVHost(tg), c.what, c.detail); ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}})
	}
}

func init() {
	register(
		Case{
			// Quorum queues count returns in the x-delivery-count header,
			// from 0 on the first delivery.
			Name: "queue-type/quorum-delivery-count-header",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clUniq("qq")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
					t.Fatalf("declare: %v", err)
				}
				clPublish(t, ch, "", q, amqp.Publishing{Body: []byte("m"), Headers: amqp.Table{"own": "kept"}})
				for want := int64(0); want < 3; want++ {
					d := clGetWait(t, ch, q, false)
					if got, ok := d.Headers["x-delivery-count"]; !ok || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("delivery %d: x-delivery-count %v (%T), want %d", want, got, got, want)
					}
					if d.Headers["own"] != "kept" || d.Redelivered != (want > 0) {
						t.Fatalf("delivery %d: headers %v redelivered %v", want, d.Headers, d.Redelivered)
					}
					if err := d.Nack(false, true); err != nil {
						t.Fatalf("nack: %v", err)
					}
				}
			},
		},
		Case{
			// A message returned more often than x-delivery-limit is
			// dead-lettered with reason delivery_limit, without the count.
			Name: "queue-type/quorum-delivery-limit-dead-letters",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				q := clUniq("qq")
				clCleanupQueue(t, tg, q)
				args := amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(1),
					"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
				if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
					t.Fatalf("declare: %v", err)
				}
				clPublish(t, ch, "", q, clBody("m"))
				for range 2 {
					d := clGetWait(t, ch, q, false)
					if err := d.Nack(false, true); err != nil {
						t.Fatalf("nack: %v", err)
					}
				}
				d := clGetWait(t, ch, dlq, true)
				if _, has := d.Headers["x-delivery-count"]; has {
					t.Errorf("dead-lettered message kept x-delivery-count: %v", d.Headers)
				}
				if d.Headers["x-first-death-reason"] != "delivery_limit" {
					t.Fatalf("x-first-death-reason %v, want delivery_limit", d.Headers["x-first-death-reason"])
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// A consumer's first delivery from a quorum queue carries no
			// x-delivery-count (basic.get's carries 0); a message the
			// client requeues (nack, reject) goes to the back of the
			// queue, its count raised; a closed channel's unacknowledged
			// messages go back ahead of the others.
			Name: "queue-type/quorum-requeue-order-and-first-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("qq")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
					t.Fatalf("declare: %v", err)
				}
				for _, b := range []string{"a", "b", "c"} {
					clPublish(t, ch, "", q, clBody(b))
				}
				if err := ch.Qos(1, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				ds := clConsume(t, ch, q, "c1", false)
				first := clRecvDelivery(t, ds)
				if string(first.Body) != "a" || first.Redelivered {
					t.Fatalf("first delivery %q redelivered=%v", first.Body, first.Redelivered)
				}
				if n, has := first.Headers["x-delivery-count"]; has {
					t.Fatalf("first delivery to a consumer has x-delivery-count %v", n)
				}
				if err := first.Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				var got []string
				for range 3 {
					d := clRecvDelivery(t, ds)
					got = append(got, fmt.Sprintf("%s/%v/%v", d.Body, d.Redelivered, d.Headers["x-delivery-count"]))
					if err := d.Ack(false); err != nil {
						t.Fatalf("ack: %v", err)
					}
				}
				if want := []string{"b/false/<nil>", "c/false/<nil>", "a/true/1"}; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after a nack with requeue: %v, want %v", got, want)
				}
				if err := ch.Cancel("c1", false); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				// A closed channel's: back ahead, in order.
				for _, b := range []string{"x", "y", "z"} {
					clPublish(t, ch, "", q, clBody(b))
				}
				ch2 := clOpenChan(t, conn)
				if err := ch2.Qos(2, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				held := clRecvN(t, clConsume(t, ch2, q, "c2", false), 2)
				if fmt.Sprint(clBodies(held)) != "[x y]" {
					t.Fatalf("held %v", clBodies(held))
				}
				ch2.Close()
				// The returns are applied after close-ok (RabbitMQ too):
				// wait until all three are ready.
				deadline := time.Now().Add(10 * time.Second)
				for {
					st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
					if err != nil {
						t.Fatalf("passive: %v", err)
					}
					if st.Messages == 3 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%d ready 10s after the channel closed, want 3", st.Messages)
					}
					time.Sleep(20 * time.Millisecond)
				}
				for _, want := range []string{"x", "y", "z"} {
					clExpectGet(t, ch, q, want, want != "z")
				}
			},
		},
		Case{
			// queue.delete of a quorum queue with if-unused or if-empty is
			// 540 (a connection error), if-unused named first; the queue
			// stays.
			Name: "queue-type/quorum-delete-conditions-540",
			Run: func(t T, tg Target) {
				q := clUniq("qq")
				clCleanupQueue(t, tg, q)
				_, ch := clDialChan(t, tg)
				if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
					t.Fatalf("declare: %v", err)
				}
				for _, c := range []struct {
					unused, empty bool
					flag          string
				}{{true, false, "if-unused"}, {false, true, "if-empty"}, {true, true, "if-unused"}} {
					conn, ch := clDialChan(t, tg)
					_, err := ch.QueueDelete(q, c.unused, c.empty, false)
					ae := clExpectErr(t, conn, err, 540, clConnClose)
					want := fmt.Sprintf("NOT_IMPLEMENTED - cannot delete queue '%s' in vhost '/'. queue.delete operations with %s flag set are not supported by quorum queues", q, c.flag)
					if ae.Reason != want {
						t.Fatalf("reply %q, want %q", ae.Reason, want)
					}
				}
				_, ch = clDialChan(t, tg)
				if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
					t.Fatalf("the queue is gone: %v", err)
				}
			},
		},
	)
}
