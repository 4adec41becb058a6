package conformance

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Length limits with dead-lettering, and consume arguments RabbitMQ
// accepts.

func init() {
	register(
		Case{
			// drop-head dead-letters the dropped message with reason maxlen.
			Name: "limits/drop-head-dead-letters-maxlen",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlx := clDeclareExchange(t, tg, ch, "fanout", nil)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				clBindQueue(t, ch, dlq, "", dlx, nil)
				q := clDeclareQueue(t, tg, ch, "ml", amqp.Table{"x-max-length": int32(1), "x-dead-letter-exchange": dlx})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("old"))
				clPublishConfirmed(t, pub, "", q, clBody("new"))
				d := clGetWait(t, ch, dlq, true)
				deaths, _ := d.Headers["x-death"].([]any)
				entry, _ := first(deaths).(amqp.Table)
				if string(d.Body) != "old" || entry["reason"] != "maxlen" {
					t.Fatalf("dead letter %q with x-death %v, want old with reason maxlen", d.Body, d.Headers["x-death"])
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[new]" {
					t.Fatalf("queue holds %v", got)
				}
			},
		},
		Case{
			// reject-publish-dlx refuses the new message (nack) and
			// dead-letters it.
			Name: "limits/reject-publish-dlx",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlx := clDeclareExchange(t, tg, ch, "fanout", nil)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				clBindQueue(t, ch, dlq, "", dlx, nil)
				q := clDeclareQueue(t, tg, ch, "rp", amqp.Table{
					"x-max-length": int32(1), "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": dlx,
				})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("kept"))
				dc, err := pub.PublishWithDeferredConfirm("", q, false, false, clBody("refused"))
				if err != nil {
					t.Fatalf("publish: %v", err)
				}
				if dc.Wait() {
					t.Fatalf("a publish over the limit was acked, want a nack")
				}
				d := clGetWait(t, ch, dlq, true)
				if string(d.Body) != "refused" {
					t.Fatalf("dead letter %q, want refused", d.Body)
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[kept]" {
					t.Fatalf("queue holds %v", got)
				}
			},
		},
		Case{
			// x-cancel-on-ha-failover is accepted on basic.consume.
			Name: "limits/consume-cancel-on-ha-failover-accepted",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "cha", nil)
				if _, err := ch.Consume(q, "", true, false, false, false, amqp.Table{"x-cancel-on-ha-failover": true}); err != nil {
					t.Fatalf("consume: %v", err)
				}
				clSyncChan(t, ch)
			},
		},
	)
}

func first(xs []any) any {
	if len(xs) == 0 {
		return nil
	}
	return xs[0]
}

func init() {
	register(Case{
		// A message over max_message_size closes its channel with 406; the
		// connection stays up and a message at the limit goes through.
		Name: "limits/max-message-size-406",
		Run: func(t T, tg Target) {
			if tg.SetMaxMessageSize == nil {
				return
			}
			if err := tg.SetMaxMessageSize(4096); err != nil {
				t.Fatalf("set max message size: %v", err)
			}
			t.Cleanup(func() { tg.SetMaxMessageSize(0) })
			conn, ch := clDialChan(t, tg)
			q := clDeclareQueue(t, tg, ch, "mms", nil)
			clPublishConfirmed(t, clConfirmChan(t, conn), "", q, amqp.Publishing{Body: make([]byte, 4096)})
			big := clOpenChan(t, conn)
			closes := clNotifyClose(big)
			if err := big.Publish("", q, false, false, amqp.Publishing{Body: make([]byte, 5000)}); err != nil {
				t.Fatalf("publish: %v", err)
			}
			clExpectAsyncClose(t, conn, closes, 406, clChanClose)
			if got := len(clGetAll(t, ch, q)); got != 1 {
				t.Fatalf("queue holds %d messages, want 1", got)
			}
		},
	})
}
