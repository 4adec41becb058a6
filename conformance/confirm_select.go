package conformance

import (
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clWaitConfirms reads n confirmations and checks they are acks for tags
// 1..n in order.
func clWaitConfirms(t T, confirms <-chan amqp.Confirmation, n int) {
	t.Helper()
	for want := uint64(1); want <= uint64(n); want++ {
		select {
		case c := <-confirms:
			if c.DeliveryTag != want || !c.Ack {
				t.Fatalf("confirmation %+v, want ack of tag %d", c, want)
			}
		case <-time.After(clWaitTimeout):
			t.Fatalf("no confirmation for tag %d", want)
		}
	}
}

func init() {
	register(
		Case{
			// After confirm.select, N publishes are acked with delivery tags 1..N (possibly via multiple=true).
			Name: "confirm/acks-in-order",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				if err := ch.Confirm(false); err != nil {
					t.Fatalf("confirm.select: %v", err)
				}
				const n = 200
				confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
				for i := 0; i < n; i++ {
					clPublish(t, ch, "", q, clBody(strconv.Itoa(i)))
				}
				clWaitConfirms(t, confirms, n)
			},
		},
		Case{
			// Unroutable messages (to an existing exchange) are acked too and use up a delivery tag.
			Name: "confirm/unroutable-acked",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				if err := ch.Confirm(false); err != nil {
					t.Fatalf("confirm.select: %v", err)
				}
				confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 3))
				clPublish(t, ch, "", q, clBody("1"))
				clPublish(t, ch, x, "nowhere", clBody("2"))
				clPublish(t, ch, "", q, clBody("3"))
				clWaitConfirms(t, confirms, 3)
			},
		},
		Case{
			// mandatory + unroutable on a confirm channel: basic.return arrives before the basic.ack for it.
			Name: "confirm/return-before-ack",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				if err := ch.Confirm(false); err != nil {
					t.Fatalf("confirm.select: %v", err)
				}
				returns := ch.NotifyReturn(make(chan amqp.Return, 1))
				confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
				clPublishOpts(t, ch, x, "nowhere", true, clBody("m"))
				select {
				case c := <-confirms:
					if !c.Ack || c.DeliveryTag != 1 {
						t.Fatalf("confirmation %+v", c)
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("no confirmation")
				}
				// amqp091-go dispatches frames in order, so the return must
				// already be buffered when the ack has been seen.
				select {
				case r := <-returns:
					if r.ReplyCode != clCodeNoRoute {
						t.Fatalf("return code %d", r.ReplyCode)
					}
				default:
					t.Fatalf("basic.ack arrived before the basic.return (or no return)")
				}
			},
		},
		Case{
			// confirm.select twice on a channel is fine.
			Name: "confirm/select-twice-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				for i := 0; i < 2; i++ {
					if err := ch.Confirm(false); err != nil {
						t.Fatalf("confirm.select #%d: %v", i+1, err)
					}
				}
			},
		},
		Case{
			// Delivery-tag sequences for confirms are per channel: each channel starts at 1.
			Name: "confirm/tags-per-channel",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				for i := 0; i < 2; i++ {
					c := clOpenChan(t, conn)
					if err := c.Confirm(false); err != nil {
						t.Fatalf("confirm.select: %v", err)
					}
					confirms := c.NotifyPublish(make(chan amqp.Confirmation, 2))
					clPublish(t, c, "", q, clBody("a"))
					clPublish(t, c, "", q, clBody("b"))
					clWaitConfirms(t, confirms, 2)
				}
			},
		},
		Case{
			// tx.select on a channel in confirm mode: channel.close 406 PRECONDITION_FAILED.
			Name: "confirm/tx-select-on-confirm-channel-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if err := ch.Confirm(false); err != nil {
					t.Fatalf("confirm.select: %v", err)
				}
				clExpectErr(t, conn, ch.Tx(), clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// confirm.select on a transactional channel: channel.close 406 PRECONDITION_FAILED.
			Name: "confirm/select-on-tx-channel-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if err := ch.Tx(); err != nil {
					t.Fatalf("tx.select: %v", err)
				}
				clExpectErr(t, conn, ch.Confirm(false), clCodePreconditionFailed, clChanClose)
			},
		},
	)
}
