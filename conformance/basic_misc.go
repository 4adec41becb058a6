package conformance

import (
	"slices"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	register(
		Case{
			// basic.qos with prefetch-size != 0 is not supported: connection.close 540 NOT_IMPLEMENTED.
			Name: "basic/qos-prefetch-size-540",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				clExpectErr(t, conn, ch.Qos(0, 1000, false), clCodeNotImplemented, clConnClose)
			},
		},
		Case{
			// Cancelling a consumer does not requeue its unacked deliveries; they stay ackable on the channel.
			Name: "basic/cancel-keeps-unacked",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				c := clOpenChan(t, conn)
				d := clRecvDelivery(t, clConsume(t, c, q, "c", false))
				if err := c.Cancel("c", false); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				clGetEmpty(t, ch, q)
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, c)
				if err := c.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// basic.get no-ack=true removes the message at once (nothing to requeue on close).
			Name: "basic/get-no-ack-removes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				c := clOpenChan(t, conn)
				clGetWait(t, c, q, true)
				if err := c.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// "amq.default" is not an alias of the default exchange in basic.publish: channel.close 404 NOT_FOUND.
			Name: "basic/publish-amq-default-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				closes := clNotifyClose(ch)
				clPublish(t, ch, "amq.default", q, clBody("m"))
				clExpectAsyncClose(t, conn, closes, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// x-max-priority queues deliver higher-priority messages first, FIFO within a priority.
			Name: "basic/priority-queue-order",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-max-priority": int32(5)})
				pub := clConfirmChan(t, conn)
				for i, p := range []uint8{1, 5, 0, 5, 3, 9} {
					clPublishConfirmed(t, pub, "", q, amqp.Publishing{Priority: p, Body: []byte(strconv.Itoa(i))})
				}
				// priority 9 is capped to x-max-priority 5 and keeps FIFO among the 5s
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"1", "3", "5", "4", "0", "2"}) {
					t.Fatalf("got %q", got)
				}
			},
		},
		Case{
			// A message expiring via x-message-ttl is dead-lettered with x-death reason "expired".
			Name: "queue/dead-letter-on-expiry",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{
					"x-message-ttl":             int32(20),
					"x-dead-letter-exchange":    "",
					"x-dead-letter-routing-key": dlq,
				})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				d := clGetWait(t, ch, dlq, true)
				xd, _ := d.Headers["x-death"].([]any)
				if len(xd) != 1 {
					t.Fatalf("x-death %#v", d.Headers["x-death"])
				}
				e, _ := xd[0].(amqp.Table)
				if e["reason"] != "expired" || e["queue"] != q || d.RoutingKey != dlq {
					t.Fatalf("x-death %#v, routing key %q", e, d.RoutingKey)
				}
			},
		},
		Case{
			// x-overflow=reject-publish on a full queue: the publish is nacked on a confirm channel.
			Name: "confirm/nack-on-reject-publish-overflow",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
				if err := ch.Confirm(false); err != nil {
					t.Fatalf("confirm.select: %v", err)
				}
				confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 2))
				clPublish(t, ch, "", q, clBody("1"))
				clPublish(t, ch, "", q, clBody("2"))
				for _, wantAck := range []bool{true, false} {
					select {
					case c := <-confirms:
						if c.Ack != wantAck {
							t.Fatalf("confirmation %+v, want ack=%v", c, wantAck)
						}
					case <-time.After(clWaitTimeout):
						t.Fatalf("missing confirmation")
					}
				}
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"1"}) {
					t.Fatalf("queue holds %q", got)
				}
			},
		},
	)
}
