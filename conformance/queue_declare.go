package conformance

import (
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clRedeclareQueue406 declares a queue with (durable, autoDelete, args),
// redeclares it with the second set, and expects channel.close 406.
func clRedeclareQueue406(t T, tg Target, d1, a1 bool, args1 amqp.Table, d2, a2 bool, args2 amqp.Table) {
	t.Helper()
	conn, ch := clDialChan(t, tg)
	name := clUniq("q")
	clCleanupQueue(t, tg, name)
	if _, err := ch.QueueDeclare(name, d1, a1, false, false, args1); err != nil {
		t.Fatalf("first declare: %v", err)
	}
	_, err := ch.QueueDeclare(name, d2, a2, false, false, args2)
	clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
}

func init() {
	register(
		Case{
			// queue.declare with an empty name: the server picks "amq.gen-..." and returns it in declare-ok.
			Name: "queue/declare-server-named",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q, err := ch.QueueDeclare("", false, true, true, false, nil)
				if err != nil {
					t.Fatalf("declare: %v", err)
				}
				clCleanupQueue(t, tg, q.Name)
				if !strings.HasPrefix(q.Name, "amq.gen-") {
					t.Fatalf("server-named queue %q lacks the amq.gen- prefix", q.Name)
				}
				if q.Messages != 0 || q.Consumers != 0 {
					t.Fatalf("fresh queue counts %d/%d", q.Messages, q.Consumers)
				}
				if !clQueueExists(t, conn, q.Name) {
					t.Fatalf("server-named queue not found by passive declare")
				}
			},
		},
		Case{
			// Two server-named declares give two different names.
			Name: "queue/declare-server-named-unique",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				a, err := ch.QueueDeclare("", false, true, true, false, nil)
				if err != nil {
					t.Fatalf("declare: %v", err)
				}
				b, err := ch.QueueDeclare("", false, true, true, false, nil)
				if err != nil {
					t.Fatalf("declare: %v", err)
				}
				if a.Name == b.Name {
					t.Fatalf("same server-generated name %q twice", a.Name)
				}
			},
		},
		Case{
			// An empty queue name in queue.bind/basic.get means the channel's last declared queue.
			Name: "queue/empty-name-means-last-declared",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q, err := ch.QueueDeclare("", false, true, true, false, nil)
				if err != nil {
					t.Fatalf("declare: %v", err)
				}
				key := clUniq("k")
				if err := ch.QueueBind("", key, "amq.direct", false, nil); err != nil {
					t.Fatalf("queue.bind with empty queue name: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "amq.direct", key, clBody("m"))
				d := clGetWait(t, ch, "", true)
				if string(d.Body) != "m" {
					t.Fatalf("got %q", d.Body)
				}
				_ = q
			},
		},
		Case{
			// An empty queue name on a channel that never declared a queue: channel.close 404 NOT_FOUND.
			Name: "queue/empty-name-without-declare-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, _, err := ch.Get("", false)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// Passive declare of a missing queue: channel.close 404 NOT_FOUND.
			Name: "queue/declare-passive-missing-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, err := ch.QueueDeclarePassive(clUniq("missing"), false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// Passive declare of an existing queue ignores durable/auto-delete/args it carries.
			Name: "queue/declare-passive-ignores-flags",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				if _, err := ch.QueueDeclarePassive(q, true, true, false, false, amqp.Table{"x-message-ttl": int32(5)}); err != nil {
					t.Fatalf("passive declare: %v", err)
				}
			},
		},
		Case{
			// declare-ok carries the ready message count (unacked excluded) and the consumer count.
			Name: "queue/declare-returns-counts",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for i := 0; i < 3; i++ {
					clPublishConfirmed(t, pub, "", q, clBody("m"))
				}
				info, err := ch.QueueDeclare(q, false, false, false, false, nil)
				if err != nil {
					t.Fatalf("redeclare: %v", err)
				}
				if info.Messages != 3 || info.Consumers != 0 {
					t.Fatalf("counts messages=%d consumers=%d, want 3/0", info.Messages, info.Consumers)
				}
				cch := clOpenChan(t, conn)
				if err := cch.Qos(1, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				ds := clConsume(t, cch, q, "", false)
				clRecvDelivery(t, ds)
				info, err = ch.QueueDeclarePassive(q, false, false, false, false, nil)
				if err != nil {
					t.Fatalf("passive declare: %v", err)
				}
				if info.Messages != 2 || info.Consumers != 1 {
					t.Fatalf("counts messages=%d consumers=%d, want 2/1 (unacked not counted)", info.Messages, info.Consumers)
				}
			},
		},
		Case{
			// Redeclare with another durable flag: channel.close 406 PRECONDITION_FAILED.
			Name: "queue/redeclare-different-durable-406",
			Run: func(t T, tg Target) {
				clRedeclareQueue406(t, tg, false, false, nil, true, false, nil)
			},
		},
		Case{
			// Redeclare with another auto-delete flag: channel.close 406 PRECONDITION_FAILED.
			Name: "queue/redeclare-different-auto-delete-406",
			Run: func(t T, tg Target) {
				clRedeclareQueue406(t, tg, false, false, nil, false, true, nil)
			},
		},
		Case{
			// Redeclare with another x-message-ttl: channel.close 406 ("inequivalent arg 'x-message-ttl'").
			Name: "queue/redeclare-different-ttl-arg-406",
			Run: func(t T, tg Target) {
				clRedeclareQueue406(t, tg, false, false, amqp.Table{"x-message-ttl": int32(1000)}, false, false, amqp.Table{"x-message-ttl": int32(2000)})
			},
		},
		Case{
			// Redeclare adding x-max-length that was absent: channel.close 406.
			Name: "queue/redeclare-added-max-length-arg-406",
			Run: func(t T, tg Target) {
				clRedeclareQueue406(t, tg, false, false, nil, false, false, amqp.Table{"x-max-length": int32(10)})
			},
		},
		Case{
			// Unknown (non-x-validated) arguments are not compared on redeclare: success.
			Name: "queue/redeclare-unknown-arg-ignored",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-foo": "a"})
				if _, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-foo": "b", "bar": int32(1)}); err != nil {
					t.Fatalf("redeclare with other unknown args: %v", err)
				}
			},
		},
		Case{
			// Redeclaring an existing non-exclusive queue as exclusive (same connection): channel.close 405 RESOURCE_LOCKED.
			Name: "queue/redeclare-as-exclusive-405",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				_, err := ch.QueueDeclare(q, false, false, true, false, nil)
				clExpectErr(t, conn, err, clCodeResourceLocked, clChanClose)
			},
		},
		Case{
			// Redeclaring the own exclusive queue as non-exclusive (same connection): channel.close 405 RESOURCE_LOCKED.
			Name: "queue/redeclare-exclusive-as-non-exclusive-405",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("q-excl")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, false, false, true, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				_, err := ch.QueueDeclare(q, false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeResourceLocked, clChanClose)
			},
		},
		Case{
			// Declaring a queue named "amq.*": channel.close 403 ACCESS_REFUSED.
			Name: "queue/declare-amq-prefix-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := "amq." + clUniq("q")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// Passive declare of a missing "amq.*" queue is a plain 404 NOT_FOUND, not 403.
			Name: "queue/declare-passive-amq-prefix-missing-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, err := ch.QueueDeclarePassive("amq."+clUniq("q"), false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// x-message-ttl of the wrong type (a string): channel.close 406 PRECONDITION_FAILED ("invalid arg").
			Name: "queue/declare-ttl-wrong-type-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clUniq("q")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-message-ttl": "1000"})
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Negative x-message-ttl: channel.close 406 PRECONDITION_FAILED.
			Name: "queue/declare-negative-ttl-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clUniq("q")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-message-ttl": int32(-1)})
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// x-expires of 0: channel.close 406 PRECONDITION_FAILED (must be positive).
			Name: "queue/declare-zero-expires-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clUniq("q")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-expires": int32(0)})
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Integer queue arguments are compared by value, not wire type: int32 vs int64 of the same TTL is equivalent.
			Name: "queue/redeclare-ttl-other-int-type-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-message-ttl": int32(1000)})
				if _, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-message-ttl": int64(1000)}); err != nil {
					t.Fatalf("redeclare with int64 ttl: %v", err)
				}
			},
		},
	)
}
