package conformance

import (
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clExclusiveQueue declares an exclusive queue on conn and returns its name.
func clExclusiveQueue(t T, tg Target, ch *amqp.Channel) string {
	t.Helper()
	q := clUniq("q-excl")
	clCleanupQueue(t, tg, q)
	if _, err := ch.QueueDeclare(q, false, false, true, false, nil); err != nil {
		t.Fatalf("declare exclusive: %v", err)
	}
	return q
}

func init() {
	register(
		Case{
			// Any use of another connection's exclusive queue (declare, passive declare, consume, get, purge, bind, delete): channel.close 405 RESOURCE_LOCKED.
			Name: "queue/exclusive-other-connection-405",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clExclusiveQueue(t, tg, ch)
				other := clDial(t, tg)
				ops := map[string]func(c *amqp.Channel) error{
					"declare": func(c *amqp.Channel) error {
						_, err := c.QueueDeclare(q, false, false, true, false, nil)
						return err
					},
					"declare-non-exclusive": func(c *amqp.Channel) error {
						_, err := c.QueueDeclare(q, false, false, false, false, nil)
						return err
					},
					"passive": func(c *amqp.Channel) error {
						_, err := c.QueueDeclarePassive(q, false, false, false, false, nil)
						return err
					},
					"consume": func(c *amqp.Channel) error {
						_, err := c.Consume(q, "", false, false, false, false, nil)
						return err
					},
					"get": func(c *amqp.Channel) error {
						_, _, err := c.Get(q, false)
						return err
					},
					"purge": func(c *amqp.Channel) error {
						_, err := c.QueuePurge(q, false)
						return err
					},
					"bind": func(c *amqp.Channel) error {
						return c.QueueBind(q, "k", "amq.direct", false, nil)
					},
					"delete": func(c *amqp.Channel) error {
						_, err := c.QueueDelete(q, false, false, false)
						return err
					},
				}
				for name, op := range ops {
					c := clOpenChan(t, other)
					err := op(c)
					if err == nil {
						t.Fatalf("%s on another connection's exclusive queue succeeded", name)
					}
					clExpectErr(t, other, err, clCodeResourceLocked, clChanClose)
				}
			},
		},
		Case{
			// An exclusive queue is usable from every channel of its own connection.
			Name: "queue/exclusive-same-connection-other-channel-ok",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clExclusiveQueue(t, tg, ch)
				ch2 := clOpenChan(t, conn)
				clPublish(t, ch2, "", q, clBody("m"))
				if d := clGetWait(t, ch2, q, true); string(d.Body) != "m" {
					t.Fatalf("got %q", d.Body)
				}
			},
		},
		Case{
			// An exclusive queue is deleted when its declaring connection closes.
			Name: "queue/exclusive-deleted-on-connection-close",
			Run: func(t T, tg Target) {
				owner, ch := clDialChan(t, tg)
				q := clExclusiveQueue(t, tg, ch)
				observer := clDial(t, tg)
				if err := owner.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clEventually(t, "exclusive queue deletion", func() bool { return !clQueueExists(t, observer, q) })
			},
		},
		Case{
			// An exclusive queue survives the closing of the channel that declared it.
			Name: "queue/exclusive-survives-channel-close",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clExclusiveQueue(t, tg, ch)
				if err := ch.Close(); err != nil {
					t.Fatalf("channel close: %v", err)
				}
				if !clQueueExists(t, conn, q) {
					t.Fatalf("exclusive queue gone after its channel closed")
				}
			},
		},
		Case{
			// An auto-delete queue is deleted when its last consumer cancels, but not while one remains.
			Name: "queue/auto-delete-after-last-consumer-cancel",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("q-ad")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				clConsume(t, ch, q, "c1", false)
				clConsume(t, ch, q, "c2", false)
				if err := ch.Cancel("c1", false); err != nil {
					t.Fatalf("cancel c1: %v", err)
				}
				if !clQueueExists(t, conn, q) {
					t.Fatalf("auto-delete queue deleted while a consumer remains")
				}
				if err := ch.Cancel("c2", false); err != nil {
					t.Fatalf("cancel c2: %v", err)
				}
				clEventually(t, "auto-delete queue deletion", func() bool { return !clQueueExists(t, conn, q) })
			},
		},
		Case{
			// An auto-delete queue that never had a consumer is not deleted (messages can accumulate).
			Name: "queue/auto-delete-not-before-first-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("q-ad")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				time.Sleep(clQuietPeriod)
				if !clQueueExists(t, conn, q) {
					t.Fatalf("auto-delete queue deleted before any consumer")
				}
				if d := clGetWait(t, ch, q, true); string(d.Body) != "m" {
					t.Fatalf("got %q", d.Body)
				}
			},
		},
		Case{
			// An auto-delete queue is deleted when the channel of its last consumer closes.
			Name: "queue/auto-delete-on-consumer-channel-close",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("q-ad")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				cch := clOpenChan(t, conn)
				clConsume(t, cch, q, "", false)
				if err := cch.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clEventually(t, "auto-delete queue deletion", func() bool { return !clQueueExists(t, conn, q) })
			},
		},
		Case{
			// queue.unbind stops routing through that binding; other bindings stay.
			Name: "queue/bind-unbind",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "a", x, nil)
				clBindQueue(t, ch, q, "b", x, nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "a", clBody("a1"))
				if err := ch.QueueUnbind(q, "a", x, nil); err != nil {
					t.Fatalf("unbind: %v", err)
				}
				clPublishConfirmed(t, pub, x, "a", clBody("a2"))
				clPublishConfirmed(t, pub, x, "b", clBody("b1"))
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"a1", "b1"}) {
					t.Fatalf("got %q, want [a1 b1]", got)
				}
			},
		},
		Case{
			// queue.purge returns the number of ready messages removed; unacked messages survive and are requeued later.
			Name: "queue/purge-returns-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for _, b := range []string{"1", "2", "3", "4"} {
					clPublishConfirmed(t, pub, "", q, clBody(b))
				}
				held := clOpenChan(t, conn)
				clGetWait(t, held, q, false) // "1" stays unacked
				n, err := ch.QueuePurge(q, false)
				if err != nil {
					t.Fatalf("purge: %v", err)
				}
				if n != 3 {
					t.Fatalf("purge count %d, want 3", n)
				}
				if err := held.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				d := clGetWait(t, ch, q, true)
				if string(d.Body) != "1" || !d.Redelivered {
					t.Fatalf("after purge got %q redelivered=%v, want the unacked 1 requeued", d.Body, d.Redelivered)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// queue.delete returns the number of ready messages in the queue.
			Name: "queue/delete-returns-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for i := 0; i < 5; i++ {
					clPublishConfirmed(t, pub, "", q, clBody("m"))
				}
				n, err := ch.QueueDelete(q, false, false, false)
				if err != nil {
					t.Fatalf("delete: %v", err)
				}
				if n != 5 {
					t.Fatalf("delete count %d, want 5", n)
				}
				if clQueueExists(t, conn, q) {
					t.Fatalf("queue still exists")
				}
			},
		},
		Case{
			// if-empty delete of a queue holding messages: channel.close 406 PRECONDITION_FAILED; the queue stays.
			Name: "queue/delete-if-empty-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				_, err := ch.QueueDelete(q, false, true, false)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
				if !clQueueExists(t, conn, q) {
					t.Fatalf("queue deleted despite the 406")
				}
			},
		},
		Case{
			// if-unused delete of a queue with a consumer: channel.close 406 PRECONDITION_FAILED.
			Name: "queue/delete-if-unused-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				cch := clOpenChan(t, conn)
				clConsume(t, cch, q, "", false)
				_, err := ch.QueueDelete(q, true, false, false)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// if-empty and if-unused deletes of an empty, unused queue succeed.
			Name: "queue/delete-if-empty-if-unused-ok",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				if _, err := ch.QueueDelete(q, true, true, false); err != nil {
					t.Fatalf("delete: %v", err)
				}
				if clQueueExists(t, conn, q) {
					t.Fatalf("queue still exists")
				}
			},
		},
		Case{
			// Deleting a missing queue succeeds with message count 0 (RabbitMQ 3.10).
			Name: "queue/delete-missing-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				n, err := ch.QueueDelete(clUniq("missing"), false, false, false)
				if err != nil || n != 0 {
					t.Fatalf("delete missing: n=%d err=%v", n, err)
				}
			},
		},
		Case{
			// Purging a missing queue: channel.close 404 NOT_FOUND.
			Name: "queue/purge-missing-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, err := ch.QueuePurge(clUniq("missing"), false)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// x-message-ttl: a message older than the TTL is dropped and never delivered.
			Name: "queue/message-ttl-expires",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-message-ttl": int32(50)})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				time.Sleep(200 * time.Millisecond)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// Per-message expiration property: the message is dropped after it expires.
			Name: "queue/per-message-expiration",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Expiration: "50", Body: []byte("short")})
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Expiration: "60000", Body: []byte("long")})
				time.Sleep(200 * time.Millisecond)
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"long"}) {
					t.Fatalf("got %q, want [long]", got)
				}
			},
		},
		Case{
			// x-max-length with the default overflow drops from the head: the oldest messages go.
			Name: "queue/max-length-drops-head",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-max-length": int32(2)})
				pub := clConfirmChan(t, conn)
				for _, b := range []string{"1", "2", "3"} {
					clPublishConfirmed(t, pub, "", q, clBody(b))
				}
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"2", "3"}) {
					t.Fatalf("got %q, want [2 3]", got)
				}
			},
		},
		Case{
			// Dead-lettering on reject(requeue=false): the message goes to x-dead-letter-exchange with an x-death header (reason rejected, count 1).
			Name: "queue/dead-letter-on-reject",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlx := clDeclareExchange(t, tg, ch, "fanout", nil)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				clBindQueue(t, ch, dlq, "", dlx, nil)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-dead-letter-exchange": dlx})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				d := clGetWait(t, ch, q, false)
				if err := d.Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				dd := clGetWait(t, ch, dlq, true)
				if string(dd.Body) != "m" || dd.RoutingKey != q {
					t.Fatalf("dead letter %q key %q, want m with the original key %q", dd.Body, dd.RoutingKey, q)
				}
				xd, ok := dd.Headers["x-death"].([]any)
				if !ok || len(xd) != 1 {
					t.Fatalf("x-death header %#v", dd.Headers["x-death"])
				}
				entry, _ := xd[0].(amqp.Table)
				if entry["reason"] != "rejected" || entry["queue"] != q || entry["count"] != int64(1) || entry["exchange"] != "" {
					t.Fatalf("x-death entry %#v", entry)
				}
			},
		},
		Case{
			// x-expires: an unused queue is deleted after the expiry.
			Name: "queue/expires-unused",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-expires": int32(200)})
				// Do not poll: a (passive) declare counts as use and restarts the expiry timer.
				time.Sleep(700 * time.Millisecond)
				if clQueueExists(t, conn, q) {
					t.Fatalf("queue with x-expires=200 still exists after 700ms unused")
				}
			},
		},
	)
}
