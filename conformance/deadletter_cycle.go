package conformance

import (
	amqp "github.com/rabbitmq/amqp091-go"
)

// Dead-letter cycles: a message that expires in a queue whose dead-letter
// exchange routes it back to the same queue is dropped, not looped; a
// message rejected by a client goes round again (a client's rejection
// breaks no cycle rule).

func dlCycleQueue(t T, tg Target, ch *amqp.Channel, args amqp.Table) string {
	t.Helper()
	x := clDeclareExchange(t, tg, ch, "fanout", nil)
	args["x-dead-letter-exchange"] = x
	q := clDeclareQueue(t, tg, ch, "dl-cycle", args)
	clBindQueue(t, ch, q, "", x, nil)
	return q
}

func init() {
	register(
		Case{
			Name: "deadletter/expired-cycle-dropped",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := dlCycleQueue(t, tg, ch, amqp.Table{"x-message-ttl": int32(20)})
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				clEventually(t, "the expired message is dropped, not looped", func() bool {
					qq, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
					return err == nil && qq.Messages == 0
				})
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			Name: "deadletter/rejected-goes-round-again",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := dlCycleQueue(t, tg, ch, amqp.Table{})
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				d := clGetWait(t, ch, q, false)
				if err := d.Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				d = clGetWait(t, ch, q, true)
				deaths, _ := d.Headers["x-death"].([]any)
				if len(deaths) != 1 {
					t.Fatalf("x-death %v, want one entry", d.Headers["x-death"])
				}
				entry, _ := deaths[0].(amqp.Table)
				if entry["reason"] != "rejected" || entry["queue"] != q || entry["count"] != int64(1) {
					t.Fatalf("x-death entry %v", entry)
				}
				if d.Headers["x-first-death-reason"] != "rejected" || d.Headers["x-first-death-queue"] != q {
					t.Fatalf("x-first-death headers %v", d.Headers)
				}
			},
		},
	)
}
