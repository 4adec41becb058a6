package conformance

import (
	"slices"
	"time"
)

func init() {
	register(
		Case{
			// basic.consume with a client-chosen tag: deliveries carry that tag.
			Name: "basic/consume-client-tag",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				tag := clUniq("ctag")
				ds := clConsume(t, ch, q, tag, true)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				d := clRecvDelivery(t, ds)
				if d.ConsumerTag != tag || string(d.Body) != "m" || d.Redelivered {
					t.Fatalf("delivery tag %q body %q redelivered %v", d.ConsumerTag, d.Body, d.Redelivered)
				}
			},
		},
		Case{
			// Reusing a consumer tag on the same channel: connection.close 530 NOT_ALLOWED.
			Name: "basic/consume-duplicate-tag-530",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clConsume(t, ch, q, "dup", false)
				_, err := ch.Consume(q, "dup", false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeNotAllowed, clConnClose)
			},
		},
		Case{
			// The same consumer tag on two different channels is fine.
			Name: "basic/consume-same-tag-other-channel-ok",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clConsume(t, ch, q, "same", false)
				ch2 := clOpenChan(t, conn)
				clConsume(t, ch2, q, "same", false)
			},
		},
		Case{
			// Exclusive consume on a queue that already has a consumer: channel.close 403 ACCESS_REFUSED.
			Name: "basic/consume-exclusive-with-existing-consumer-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clConsume(t, ch, q, "", false)
				ch2 := clOpenChan(t, conn)
				_, err := ch2.Consume(q, clUniq("ctag"), false, true, false, false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// Consume on a queue that has an exclusive consumer: channel.close 403 ACCESS_REFUSED.
			Name: "basic/consume-on-exclusive-consumer-queue-403",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				if _, err := ch.Consume(q, clUniq("ctag"), false, true, false, false, nil); err != nil {
					t.Fatalf("exclusive consume: %v", err)
				}
				other := clDial(t, tg)
				ch2 := clOpenChan(t, other)
				_, err := ch2.Consume(q, clUniq("ctag"), false, false, false, false, nil)
				clExpectErr(t, other, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// basic.consume on a missing queue: channel.close 404 NOT_FOUND.
			Name: "basic/consume-missing-queue-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, err := ch.Consume(clUniq("missing"), clUniq("ctag"), false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// no-ack consume: messages are settled on delivery and not requeued when the channel closes.
			Name: "basic/consume-no-ack",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("1"))
				clPublishConfirmed(t, pub, "", q, clBody("2"))
				cch := clOpenChan(t, conn)
				ds := clConsume(t, cch, q, "", true)
				clRecvN(t, ds, 2)
				if err := cch.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// basic.cancel stops deliveries (the client's delivery channel closes) and leaves remaining messages queued.
			Name: "basic/cancel",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				ds := clConsume(t, ch, q, "c", true)
				if err := ch.Cancel("c", false); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				select {
				case _, ok := <-ds:
					if ok {
						t.Fatalf("delivery after cancel")
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("delivery channel not closed after cancel")
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				if d := clGetWait(t, ch, q, true); string(d.Body) != "m" {
					t.Fatalf("got %q", d.Body)
				}
			},
		},
		Case{
			// basic.cancel with an unknown consumer tag is answered with cancel-ok.
			Name: "basic/cancel-unknown-tag-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				if err := ch.Cancel(clUniq("nobody"), false); err != nil {
					t.Fatalf("cancel unknown tag: %v", err)
				}
				clSyncChan(t, ch)
			},
		},
		Case{
			// Deleting a consumed queue makes the server send basic.cancel to the consumer (consumer_cancel_notify).
			Name: "basic/server-cancel-on-queue-delete",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				cancels := ch.NotifyCancel(make(chan string, 1))
				ds := clConsume(t, ch, q, "victim", false)
				admin := clOpenChan(t, conn)
				if _, err := admin.QueueDelete(q, false, false, false); err != nil {
					t.Fatalf("delete: %v", err)
				}
				select {
				case tag := <-cancels:
					if tag != "victim" {
						t.Fatalf("cancel for tag %q", tag)
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("no server basic.cancel")
				}
				select {
				case _, ok := <-ds:
					if ok {
						t.Fatalf("delivery after server cancel")
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("delivery channel not closed after server cancel")
				}
				clSyncChan(t, ch) // the channel stays open
			},
		},
		Case{
			// Two consumers on one queue receive messages round-robin.
			Name: "basic/consume-round-robin",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				a := clConsume(t, ch, q, "a", true)
				b := clConsume(t, ch, q, "b", true)
				pub := clConfirmChan(t, conn)
				for _, m := range []string{"1", "2", "3", "4"} {
					clPublishConfirmed(t, pub, "", q, clBody(m))
				}
				ga := clBodies(clRecvN(t, a, 2))
				gb := clBodies(clRecvN(t, b, 2))
				if !(slices.Equal(ga, []string{"1", "3"}) && slices.Equal(gb, []string{"2", "4"})) &&
					!(slices.Equal(ga, []string{"2", "4"}) && slices.Equal(gb, []string{"1", "3"})) {
					t.Fatalf("not round-robin: a=%q b=%q", ga, gb)
				}
			},
		},
		Case{
			// A consumer receives the messages already in the queue when it starts, in order.
			Name: "basic/consume-backlog",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for _, m := range []string{"1", "2", "3"} {
					clPublishConfirmed(t, pub, "", q, clBody(m))
				}
				ds := clConsume(t, ch, q, "", true)
				if got := clBodies(clRecvN(t, ds, 3)); !slices.Equal(got, []string{"1", "2", "3"}) {
					t.Fatalf("got %q", got)
				}
				clNoDelivery(t, ds)
			},
		},
		Case{
			// qos prefetch-count=2 (per consumer): with 2 unacked the 3rd is held until an ack.
			Name: "basic/qos-prefetch-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for _, m := range []string{"1", "2", "3", "4"} {
					clPublishConfirmed(t, pub, "", q, clBody(m))
				}
				if err := ch.Qos(2, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				ds := clConsume(t, ch, q, "", false)
				got := clRecvN(t, ds, 2)
				clNoDelivery(t, ds)
				if err := got[0].Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				d := clRecvDelivery(t, ds)
				if string(d.Body) != "3" {
					t.Fatalf("after one ack got %q, want 3", d.Body)
				}
				clNoDelivery(t, ds)
			},
		},
		Case{
			// qos global=false limits each consumer separately: two consumers with prefetch 1 hold 2 messages.
			Name: "basic/qos-per-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q1 := clDeclareQueue(t, tg, ch, "q1", nil)
				q2 := clDeclareQueue(t, tg, ch, "q2", nil)
				pub := clConfirmChan(t, conn)
				for i := 0; i < 3; i++ {
					clPublishConfirmed(t, pub, "", q1, clBody("a"))
					clPublishConfirmed(t, pub, "", q2, clBody("b"))
				}
				if err := ch.Qos(1, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				d1 := clConsume(t, ch, q1, "", false)
				d2 := clConsume(t, ch, q2, "", false)
				clRecvDelivery(t, d1)
				clRecvDelivery(t, d2)
				if n := len(clDrain(d1)) + len(clDrain(d2)); n != 0 {
					t.Fatalf("per-consumer prefetch 1: %d deliveries beyond one per consumer", n)
				}
			},
		},
		Case{
			// qos global=true (RabbitMQ) is one limit shared by all consumers of the channel.
			Name: "basic/qos-global-per-channel",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q1 := clDeclareQueue(t, tg, ch, "q1", nil)
				q2 := clDeclareQueue(t, tg, ch, "q2", nil)
				pub := clConfirmChan(t, conn)
				for i := 0; i < 3; i++ {
					clPublishConfirmed(t, pub, "", q1, clBody("a"))
					clPublishConfirmed(t, pub, "", q2, clBody("b"))
				}
				if err := ch.Qos(2, 0, true); err != nil {
					t.Fatalf("qos: %v", err)
				}
				d1 := clConsume(t, ch, q1, "", false)
				d2 := clConsume(t, ch, q2, "", false)
				got := clRecvFrom(t, 2, d1, d2)
				if n := len(clDrain(d1)) + len(clDrain(d2)); n != 0 {
					t.Fatalf("global prefetch 2: %d deliveries beyond 2 unacked on the channel", n)
				}
				if err := ch.Ack(max(got[0].DeliveryTag, got[1].DeliveryTag), true); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clRecvFrom(t, 2, d1, d2)
				if n := len(clDrain(d1)) + len(clDrain(d2)); n != 0 {
					t.Fatalf("after acking both: %d deliveries beyond 2 more", n)
				}
			},
		},
		Case{
			// Closing a channel requeues its unacked messages in original order; the next consumer sees Redelivered=true.
			Name: "basic/channel-close-requeues-unacked",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				for _, m := range []string{"1", "2", "3"} {
					clPublishConfirmed(t, pub, "", q, clBody(m))
				}
				c1 := clOpenChan(t, conn)
				got := clRecvN(t, clConsume(t, c1, q, "", false), 3)
				if err := got[1].Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, c1)
				if err := c1.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				other := clDial(t, tg)
				c2 := clOpenChan(t, other)
				ds := clRecvN(t, clConsume(t, c2, q, "", true), 2)
				if b := clBodies(ds); !slices.Equal(b, []string{"1", "3"}) {
					t.Fatalf("requeued %q, want [1 3]", b)
				}
				for _, d := range ds {
					if !d.Redelivered {
						t.Errorf("requeued %q has Redelivered=false", d.Body)
					}
				}
			},
		},
		Case{
			// Closing the connection requeues the unacked messages of all its channels.
			Name: "basic/connection-close-requeues-unacked",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				holder, hch := clDialChan(t, tg)
				clGetWait(t, hch, q, false)
				clGetEmpty(t, ch, q)
				if err := holder.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				d := clGetWait(t, ch, q, true)
				if string(d.Body) != "m" || !d.Redelivered {
					t.Fatalf("got %q redelivered=%v", d.Body, d.Redelivered)
				}
			},
		},
		Case{
			// Deliveries for a consumer are redelivered to a remaining consumer when its channel closes.
			Name: "basic/requeue-goes-to-other-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				c1 := clOpenChan(t, conn)
				if err := c1.Qos(1, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				d1 := clConsume(t, c1, q, "", false)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("m"))
				clRecvDelivery(t, d1)
				c2 := clOpenChan(t, conn)
				d2 := clConsume(t, c2, q, "", false)
				clNoDelivery(t, d2)
				if err := c1.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				d := clRecvDelivery(t, d2)
				if string(d.Body) != "m" || !d.Redelivered {
					t.Fatalf("got %q redelivered=%v", d.Body, d.Redelivered)
				}
			},
		},
	)
}
