package conformance

import (
	"slices"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clFill publishes bodies "1".."n" to queue q through a confirm channel.
func clFill(t T, conn *amqp.Connection, q string, n int) {
	t.Helper()
	pub := clConfirmChan(t, conn)
	for i := 1; i <= n; i++ {
		clPublishConfirmed(t, pub, "", q, clBody(strconv.Itoa(i)))
	}
}

// clGetN does n unacked basic.gets and returns the deliveries.
func clGetN(t T, ch *amqp.Channel, q string, n int) []amqp.Delivery {
	t.Helper()
	out := make([]amqp.Delivery, n)
	for i := range out {
		out[i] = clGetWait(t, ch, q, false)
	}
	return out
}

// clExpectGet asserts that the next basic.get returns body with the given
// redelivered flag.
func clExpectGet(t T, ch *amqp.Channel, q, body string, redelivered bool) amqp.Delivery {
	t.Helper()
	d := clGetWait(t, ch, q, false)
	if string(d.Body) != body || d.Redelivered != redelivered {
		t.Fatalf("basic.get: got %q redelivered=%v, want %q redelivered=%v", d.Body, d.Redelivered, body, redelivered)
	}
	return d
}

func init() {
	register(
		Case{
			// basic.get-ok carries the count of messages remaining; an empty queue answers get-empty.
			Name: "basic/get-and-get-empty",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 3)
				for i, wantLeft := range []uint32{2, 1, 0} {
					d := clGetWait(t, ch, q, true)
					if string(d.Body) != strconv.Itoa(i+1) || d.MessageCount != wantLeft {
						t.Fatalf("get %d: body %q message-count %d, want %d", i, d.Body, d.MessageCount, wantLeft)
					}
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// basic.get on a missing queue: channel.close 404 NOT_FOUND.
			Name: "basic/get-missing-queue-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, _, err := ch.Get(clUniq("missing"), false)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// basic.ack removes the message for good: it is not requeued when the channel closes.
			Name: "basic/ack",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 2)
				c := clOpenChan(t, conn)
				ds := clGetN(t, c, q, 2)
				if err := ds[0].Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, c)
				if err := c.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clExpectGet(t, ch, q, "2", true)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// ack multiple=true acks every outstanding tag up to and including the given one.
			Name: "basic/ack-multiple",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 4)
				c := clOpenChan(t, conn)
				ds := clGetN(t, c, q, 4)
				if err := c.Ack(ds[2].DeliveryTag, true); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, c)
				if err := c.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clExpectGet(t, ch, q, "4", true)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// ack with delivery-tag 0 and multiple=true acks all outstanding messages.
			Name: "basic/ack-multiple-zero-acks-all",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 3)
				c := clOpenChan(t, conn)
				clGetN(t, c, q, 3)
				if err := c.Ack(0, true); err != nil {
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
			// nack multiple=true requeue=true with tag 0 requeues all outstanding messages in original order.
			Name: "basic/nack-multiple-zero-requeues-all",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 3)
				clGetN(t, ch, q, 3)
				if err := ch.Nack(0, true, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				for _, b := range []string{"1", "2", "3"} {
					clExpectGet(t, ch, q, b, true)
				}
			},
		},
		Case{
			// ack of a delivery tag never issued: channel.close 406 PRECONDITION_FAILED ("unknown delivery tag").
			Name: "basic/ack-unknown-tag-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				closes := clNotifyClose(ch)
				if err := ch.Ack(42, false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Acking the same tag twice: channel.close 406 PRECONDITION_FAILED.
			Name: "basic/double-ack-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				d := clGetWait(t, ch, q, false)
				closes := clNotifyClose(ch)
				_ = d.Ack(false)
				_ = d.Ack(false)
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Acking a message received with no-ack (auto-ack get): channel.close 406 PRECONDITION_FAILED.
			Name: "basic/ack-after-auto-ack-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				d := clGetWait(t, ch, q, true)
				closes := clNotifyClose(ch)
				_ = ch.Ack(d.DeliveryTag, false)
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Delivery tags are per channel: acking channel A's tag on channel B is an unknown tag, 406.
			Name: "basic/ack-on-other-channel-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				d := clGetWait(t, ch, q, false)
				other := clOpenChan(t, conn)
				closes := clNotifyClose(other)
				_ = other.Ack(d.DeliveryTag, false)
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// nack requeue of tags 2 and 4 of 1..5: the next gets are 2, 4 (Redelivered=true, original order) then 6.
			Name: "basic/nack-requeue-original-order",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 6)
				ds := clGetN(t, ch, q, 5)
				if err := ds[3].Nack(false, true); err != nil {
					t.Fatalf("nack 4: %v", err)
				}
				if err := ds[1].Nack(false, true); err != nil {
					t.Fatalf("nack 2: %v", err)
				}
				clExpectGet(t, ch, q, "2", true)
				clExpectGet(t, ch, q, "4", true)
				clExpectGet(t, ch, q, "6", false)
			},
		},
		Case{
			// nack multiple=true requeue=true requeues every outstanding tag up to the given one, ahead of ready messages.
			Name: "basic/nack-multiple-requeue",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 5)
				ds := clGetN(t, ch, q, 4)
				if err := ch.Nack(ds[2].DeliveryTag, true, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				clExpectGet(t, ch, q, "1", true)
				clExpectGet(t, ch, q, "2", true)
				clExpectGet(t, ch, q, "3", true)
				clExpectGet(t, ch, q, "5", false)
			},
		},
		Case{
			// nack requeue=false drops the message (no dead-letter exchange configured).
			Name: "basic/nack-no-requeue-drops",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 2)
				ds := clGetN(t, ch, q, 2)
				if err := ch.Nack(ds[1].DeliveryTag, true, false); err != nil {
					t.Fatalf("nack: %v", err)
				}
				clSyncChan(t, ch)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// reject requeue=true puts the message back at its original position with Redelivered=true.
			Name: "basic/reject-requeue",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 2)
				d := clGetWait(t, ch, q, false)
				if err := d.Reject(true); err != nil {
					t.Fatalf("reject: %v", err)
				}
				clExpectGet(t, ch, q, "1", true)
				clExpectGet(t, ch, q, "2", false)
			},
		},
		Case{
			// reject requeue=false drops the message.
			Name: "basic/reject-no-requeue-drops",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 1)
				d := clGetWait(t, ch, q, false)
				if err := d.Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				clSyncChan(t, ch)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// Reject of an unknown tag: channel.close 406 PRECONDITION_FAILED.
			Name: "basic/reject-unknown-tag-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				closes := clNotifyClose(ch)
				_ = ch.Reject(7, true)
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// A requeued message goes back to a consumer with Redelivered=true.
			Name: "basic/reject-requeue-redelivered-to-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				ds := clConsume(t, ch, q, "", false)
				clFill(t, conn, q, 1)
				d := clRecvDelivery(t, ds)
				if d.Redelivered {
					t.Fatalf("first delivery already redelivered")
				}
				if err := d.Reject(true); err != nil {
					t.Fatalf("reject: %v", err)
				}
				d2 := clRecvDelivery(t, ds)
				if string(d2.Body) != "1" || !d2.Redelivered || d2.DeliveryTag == d.DeliveryTag {
					t.Fatalf("redelivery %q redelivered=%v tag %d (first tag %d)", d2.Body, d2.Redelivered, d2.DeliveryTag, d.DeliveryTag)
				}
			},
		},
		Case{
			// basic.recover requeue=true requeues all unacked messages of the channel (Redelivered=true, original order).
			Name: "basic/recover-requeue",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clFill(t, conn, q, 3)
				ds := clGetN(t, ch, q, 2)
				if err := ds[0].Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				if err := ch.Recover(true); err != nil {
					t.Fatalf("recover: %v", err)
				}
				clExpectGet(t, ch, q, "2", true)
				clExpectGet(t, ch, q, "3", false)
			},
		},
		Case{
			// basic.recover requeue=true redelivers to consumers with Redelivered=true.
			Name: "basic/recover-requeue-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				ds := clConsume(t, ch, q, "", false)
				clFill(t, conn, q, 2)
				first := clRecvN(t, ds, 2)
				if err := ch.Recover(true); err != nil {
					t.Fatalf("recover: %v", err)
				}
				again := clRecvN(t, ds, 2)
				if b := clBodies(again); !slices.Equal(b, clBodies(first)) {
					t.Fatalf("redelivered %q, want %q", b, clBodies(first))
				}
				for _, d := range again {
					if !d.Redelivered {
						t.Errorf("recovered %q has Redelivered=false", d.Body)
					}
				}
			},
		},
	)
}
