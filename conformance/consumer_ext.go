package conformance

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitMQ's consumer extensions: consumer priorities (the x-priority
// consume argument) and single active consumer (x-single-active-consumer).

func extConsume(t T, ch *amqp.Channel, queue string, args amqp.Table) <-chan amqp.Delivery {
	t.Helper()
	d, err := ch.Consume(queue, clUniq("ctag"), false, false, false, false, args)
	if err != nil {
		t.Fatalf("basic.consume %s: %v", queue, err)
	}
	return d
}

func init() {
	register(
		Case{
			// x-priority takes any integer; anything else is a 406 that
			// names the queue and the type it got, in RabbitMQ's words.
			Name: "consumer/priority-argument-type",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "prio-arg", nil)
				for _, v := range []any{int64(1) << 40, int8(-3), int16(7)} {
					if _, err := ch.Consume(q, clUniq("ok"), false, false, false, false, amqp.Table{"x-priority": v}); err != nil {
						t.Fatalf("x-priority %T %v refused: %v", v, v, err)
					}
				}
				_, err := ch.Consume(q, clUniq("bad"), false, false, false, false, amqp.Table{"x-priority": "high"})
				ae := clExpectErr(t, conn, err, amqp.PreconditionFailed, clChanClose)
				want := fmt.Sprintf("PRECONDITION_FAILED - invalid arg 'x-priority' for queue '%s' in vhost '/': \"expected integer, got longstr\"", q)
				if ae.Reason != want {
					t.Fatalf("reply text %q, want %q", ae.Reason, want)
				}
			},
		},
		Case{
			// A higher-priority consumer gets messages while it has credit;
			// a lower one only when it has none.
			Name: "consumer/priority-higher-first",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "prio", nil)
				low := clOpenChan(t, conn)
				high := clOpenChan(t, conn)
				if err := high.Qos(1, 0, false); err != nil {
					t.Fatalf("basic.qos: %v", err)
				}
				lowD := extConsume(t, low, q, amqp.Table{"x-priority": int32(0)})
				highD := extConsume(t, high, q, amqp.Table{"x-priority": int32(10)})
				clSyncChan(t, low)
				clSyncChan(t, high)
				pub := clConfirmChan(t, conn)
				for i := 1; i <= 3; i++ {
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(i)))
				}
				h := clRecvDelivery(t, highD)
				if string(h.Body) != "1" {
					t.Fatalf("high-priority consumer got %q first, want 1", h.Body)
				}
				l := clRecvN(t, lowD, 2)
				if string(l[0].Body) != "2" || string(l[1].Body) != "3" {
					t.Fatalf("low-priority consumer got %v, want 2 and 3", clBodies(l))
				}
				clNoDelivery(t, highD)
			},
		},
		Case{
			// With x-single-active-consumer only the first consumer gets
			// messages; when it is cancelled the next one takes over.
			Name: "consumer/single-active-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "sac", amqp.Table{"x-single-active-consumer": true})
				cha, chb := clOpenChan(t, conn), clOpenChan(t, conn)
				tagA := clUniq("a")
				da, err := cha.Consume(q, tagA, true, false, false, false, nil)
				if err != nil {
					t.Fatalf("basic.consume: %v", err)
				}
				db, err := chb.Consume(q, clUniq("b"), true, false, false, false, nil)
				if err != nil {
					t.Fatalf("basic.consume: %v", err)
				}
				pub := clConfirmChan(t, conn)
				for i := 1; i <= 3; i++ {
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(i)))
				}
				if got := clBodies(clRecvN(t, da, 3)); got[0] != "1" || got[2] != "3" {
					t.Fatalf("active consumer got %v", got)
				}
				clNoDelivery(t, db)
				if err := cha.Cancel(tagA, false); err != nil {
					t.Fatalf("basic.cancel: %v", err)
				}
				clPublishConfirmed(t, pub, "", q, clBody("4"))
				if d := clRecvDelivery(t, db); string(d.Body) != "4" {
					t.Fatalf("next consumer got %q, want 4", d.Body)
				}
			},
		},
		Case{
			// x-single-active-consumer must be a boolean.
			Name: "consumer/single-active-consumer-bad-type-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clUniq("sac-bad")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-single-active-consumer": "yes"})
				clExpectErr(t, conn, err, 406, clChanClose)
			},
		},
	)
}

// With single active consumer, queue.declare-ok's consumer_count counts
// every consumer of a classic queue, waiting ones included, but only the
// active one of a quorum queue (rabbit_fifo's query_stat counts its
// consumers map; the waiting consumers are kept apart). Observed on
// RabbitMQ 3.10.8 with 2, then 3 consumers, then the active one, a
// waiting one and the last one cancelled: classic 2 3 2 1 0, quorum
// 1 1 1 1 0. (The management API's consumers counts the waiting ones of
// both.)
func init() {
	for _, qt := range []struct {
		typ  string
		want [5]int // 2 consumers, 3, active cancelled, a waiting one cancelled, none
	}{
		{"classic", [5]int{2, 3, 2, 1, 0}},
		{"quorum", [5]int{1, 1, 1, 1, 0}},
	} {
		register(Case{
			Name: "consumer/single-active-consumer-declare-count-" + qt.typ,
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("sac-count-" + qt.typ)
				clCleanupQueue(t, tg, q)
				args := amqp.Table{"x-single-active-consumer": true}
				if qt.typ == "quorum" {
					args["x-queue-type"] = "quorum"
				}
				if _, err := ch.QueueDeclare(q, qt.typ == "quorum", false, false, false, args); err != nil {
					t.Fatalf("queue.declare %s: %v", q, err)
				}
				count := func(step int, what string) {
					t.Helper()
					st, err := ch.QueueDeclarePassive(q, qt.typ == "quorum", false, false, false, nil)
					if err != nil {
						t.Fatalf("passive queue.declare %s: %v", q, err)
					}
					if st.Consumers != qt.want[step] {
						t.Fatalf("%s: consumer_count %d, want %d", what, st.Consumers, qt.want[step])
					}
				}
				var chans [3]*amqp.Channel
				var ds [3]<-chan amqp.Delivery
				tags := [3]string{clUniq("c0"), clUniq("c1"), clUniq("c2")}
				for i := range chans {
					chans[i] = clOpenChan(t, conn)
					d, err := chans[i].Consume(q, tags[i], true, false, false, false, nil)
					if err != nil {
						t.Fatalf("basic.consume %d: %v", i, err)
					}
					ds[i] = d
					if i > 0 {
						count(i-1, fmt.Sprintf("%d consumers", i+1))
					}
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("1"))
				if d := clRecvDelivery(t, ds[0]); string(d.Body) != "1" {
					t.Fatalf("first consumer got %q, want 1", d.Body)
				}
				if err := chans[0].Cancel(tags[0], false); err != nil {
					t.Fatalf("basic.cancel: %v", err)
				}
				count(2, "the active consumer cancelled")
				clPublishConfirmed(t, pub, "", q, clBody("2"))
				if d := clRecvDelivery(t, ds[1]); string(d.Body) != "2" {
					t.Fatalf("second consumer got %q, want 2", d.Body)
				}
				if err := chans[2].Cancel(tags[2], false); err != nil {
					t.Fatalf("basic.cancel: %v", err)
				}
				count(3, "a waiting consumer cancelled")
				if err := chans[1].Cancel(tags[1], false); err != nil {
					t.Fatalf("basic.cancel: %v", err)
				}
				count(4, "every consumer cancelled")
			},
		})
	}
}

// A consumer that cancels while it holds an unacknowledged message can
// still acknowledge it: the ack settles the message, which is not
// delivered again. A quorum queue goes on counting the cancelled consumer
// in declare-ok's consumer_count until what it holds is settled; a classic
// queue stops counting it at the cancel. Observed on RabbitMQ 3.10.8:
// classic 1 0 0, quorum 1 1 0.
func init() {
	for _, qt := range []struct {
		typ  string
		want [3]int // holding, cancelled while holding, settled
	}{
		{"classic", [3]int{1, 0, 0}},
		{"quorum", [3]int{1, 1, 0}},
	} {
		register(Case{
			Name: "consumer/cancel-then-ack-" + qt.typ,
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clUniq("cancel-ack-" + qt.typ)
				clCleanupQueue(t, tg, q)
				var args amqp.Table
				if qt.typ == "quorum" {
					args = amqp.Table{"x-queue-type": "quorum"}
				}
				if _, err := ch.QueueDeclare(q, qt.typ == "quorum", false, false, false, args); err != nil {
					t.Fatalf("queue.declare %s: %v", q, err)
				}
				stat := func() amqp.Queue {
					t.Helper()
					st, err := ch.QueueDeclarePassive(q, qt.typ == "quorum", false, false, false, nil)
					if err != nil {
						t.Fatalf("passive queue.declare %s: %v", q, err)
					}
					return st
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("held"))
				cch := clOpenChan(t, conn)
				tag := clUniq("holder")
				ds := clConsume(t, cch, q, tag, false)
				d := clRecvDelivery(t, ds)
				if got := stat().Consumers; got != qt.want[0] {
					t.Fatalf("holding: consumer_count %d, want %d", got, qt.want[0])
				}
				if err := cch.Cancel(tag, false); err != nil {
					t.Fatalf("basic.cancel: %v", err)
				}
				if got := stat().Consumers; got != qt.want[1] {
					t.Fatalf("cancelled while holding: consumer_count %d, want %d", got, qt.want[1])
				}
				if err := d.Ack(false); err != nil {
					t.Fatalf("basic.ack after the cancel: %v", err)
				}
				// The ack has no reply; wait for it to be applied.
				clEventually(t, "the ack to settle the message", func() bool {
					st := stat()
					return st.Consumers == qt.want[2] && st.Messages == 0
				})
				// Closing the channel must not give the acked message back:
				// after it, the queue holds only what is published next.
				if err := cch.Close(); err != nil {
					t.Fatalf("channel.close: %v", err)
				}
				clPublishConfirmed(t, pub, "", q, clBody("next"))
				if got := clGetAll(t, ch, q); len(got) != 1 || got[0] != "next" {
					t.Fatalf("after the channel closed the queue held %q, want [next]", got)
				}
			},
		})
	}
}

// One publisher and one consumer with a prefetch see a queue's messages
// in the order they were published, also when the consumer's connection
// is full: the consumer's client reads nothing until every message is
// confirmed, 300 messages of 64 KB (19 MB, far past what the broker
// buffers for a connection) with 100 of them in flight to it. Warren's
// quorum queue gave back what a full connection refused and delivered
// later messages ahead of it. Observed on RabbitMQ 3.10.8: in order,
// none redelivered, for both types.
func init() {
	for _, typ := range []string{"classic", "quorum"} {
		register(Case{
			Name: "consumer/order-with-a-full-connection-" + typ,
			Run: func(t T, tg Target) {
				pconn, pch := clDialChan(t, tg)
				q := clUniq("full-order-" + typ)
				clCleanupQueue(t, tg, q)
				args := amqp.Table{"x-queue-type": typ}
				if _, err := pch.QueueDeclare(q, true, false, false, false, args); err != nil {
					t.Fatalf("queue.declare %s: %v", q, err)
				}
				_, cch := clDialChan(t, tg)
				if err := cch.Qos(100, 0, false); err != nil {
					t.Fatalf("basic.qos: %v", err)
				}
				ds := clConsume(t, cch, q, "", false)
				pub := clConfirmChan(t, pconn)
				confirms := pub.NotifyPublish(make(chan amqp.Confirmation, 300))
				const n = 300
				body := make([]byte, 64<<10)
				for i := range n {
					copy(body, fmt.Sprintf("%06d", i))
					if err := pub.Publish("", q, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body}); err != nil {
						t.Fatalf("basic.publish %d: %v", i, err)
					}
				}
				clWaitConfirms(t, confirms, n)
				for i := range n {
					d := clRecvDelivery(t, ds)
					if got := string(d.Body[:6]); got != fmt.Sprintf("%06d", i) || d.Redelivered {
						t.Fatalf("delivery %d is message %s (redelivered %v)", i, got, d.Redelivered)
					}
					if err := d.Ack(false); err != nil {
						t.Fatalf("basic.ack: %v", err)
					}
				}
			},
		})
	}
}
