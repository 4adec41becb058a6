package conformance

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Restart cases: what survives a graceful broker restart, as RabbitMQ
// defines it. Durable exchanges, queues and bindings survive; persistent
// messages in durable queues survive in order, and those delivered but not
// acknowledged come back with redelivered set; transient messages,
// non-durable queues and exclusive queues do not.

func rsRestart(t T, tg Target) {
	t.Helper()
	if tg.Restart == nil {
		t.Logf("SKIP: the target cannot be restarted")
		return
	}
	if err := tg.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

func init() {
	register(
		Case{
			Name: "restart/durable-definitions-survive",
			Run: func(t T, tg Target) {
				if tg.Restart == nil {
					return
				}
				_, ch := clDialChan(t, tg)
				ex := clUniq("rs-x")
				dq, tq, xq := clUniq("rs-durable"), clUniq("rs-transient"), clUniq("rs-exclusive")
				clCleanupExchange(t, tg, ex)
				for _, q := range []string{dq, tq, xq} {
					clCleanupQueue(t, tg, q)
				}
				if err := ch.ExchangeDeclare(ex, "topic", true, false, false, false, nil); err != nil {
					t.Fatalf("exchange.declare: %v", err)
				}
				if _, err := ch.QueueDeclare(dq, true, false, false, false, amqp.Table{"x-max-length": int32(100)}); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				if _, err := ch.QueueDeclare(tq, false, false, false, false, nil); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				if _, err := ch.QueueDeclare(xq, true, false, true, false, nil); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				clBindQueue(t, ch, dq, "a.#", ex, nil)

				rsRestart(t, tg)

				conn, ch := clDialChan(t, tg)
				if !clExchangeExists(t, conn, ex) {
					t.Fatalf("durable exchange %s is gone after restart", ex)
				}
				if !clQueueExists(t, conn, dq) {
					t.Fatalf("durable queue %s is gone after restart", dq)
				}
				if clQueueExists(t, conn, tq) {
					t.Errorf("transient queue %s survived the restart", tq)
				}
				if clQueueExists(t, conn, xq) {
					t.Errorf("exclusive queue %s survived the restart", xq)
				}
				// The binding survived: a.b routes to the durable queue.
				clPublish(t, ch, ex, "a.b", clBody("routed"))
				if d := clGetWait(t, ch, dq, true); string(d.Body) != "routed" {
					t.Fatalf("got %q through the recovered binding", d.Body)
				}
				// Its arguments survived: re-declaring without them is refused.
				_, err := ch.QueueDeclare(dq, true, false, false, false, nil)
				clExpectErr(t, conn, err, 406, clChanClose)
			},
		},
		Case{
			Name: "restart/persistent-messages-survive-in-order",
			Run: func(t T, tg Target) {
				if tg.Restart == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				q := clUniq("rs-msgs")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				cch := clConfirmChan(t, conn)
				for i := 0; i < 50; i++ {
					clPublishConfirmed(t, cch, "", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprint("p", i))})
					if i%10 == 0 {
						clPublishConfirmed(t, cch, "", q, amqp.Publishing{DeliveryMode: amqp.Transient, Body: []byte(fmt.Sprint("t", i))})
					}
				}
				rsRestart(t, tg)
				_, ch = clDialChan(t, tg)
				got := clGetAll(t, ch, q)
				if len(got) != 50 {
					t.Fatalf("after restart %d messages, want the 50 persistent ones: %v", len(got), got)
				}
				for i, b := range got {
					if b != fmt.Sprint("p", i) {
						t.Fatalf("message %d is %q, want %q (order or content lost)", i, b, fmt.Sprint("p", i))
					}
				}
			},
		},
		Case{
			Name: "restart/unacked-persistent-redelivered",
			Run: func(t T, tg Target) {
				if tg.Restart == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				q := clUniq("rs-unacked")
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				cch := clConfirmChan(t, conn)
				for _, b := range []string{"m1", "m2", "m3"} {
					clPublishConfirmed(t, cch, "", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(b)})
				}
				d1 := clGetWait(t, ch, q, false)
				clGetWait(t, ch, q, false) // m2 stays unacked
				if err := d1.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, ch)
				rsRestart(t, tg)
				_, ch = clDialChan(t, tg)
				d := clGetWait(t, ch, q, true)
				if string(d.Body) != "m2" || !d.Redelivered {
					t.Fatalf("first after restart: %q redelivered=%v, want m2 redelivered", d.Body, d.Redelivered)
				}
				d = clGetWait(t, ch, q, true)
				if string(d.Body) != "m3" || d.Redelivered {
					t.Fatalf("second after restart: %q redelivered=%v, want m3 not redelivered", d.Body, d.Redelivered)
				}
				clGetEmpty(t, ch, q)
			},
		},
	)
}

func init() {
	register(Case{
		// A durable priority queue recovers its messages in priority order.
		Name: "restart/priority-order-survives",
		Run: func(t T, tg Target) {
			if tg.Restart == nil {
				return
			}
			conn, ch := clDialChan(t, tg)
			q := clUniq("rs-prio")
			clCleanupQueue(t, tg, q)
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-max-priority": int32(10)}); err != nil {
				t.Fatalf("queue.declare: %v", err)
			}
			cch := clConfirmChan(t, conn)
			for i, p := range []uint8{1, 5, 9, 5, 0} {
				clPublishConfirmed(t, cch, "", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Priority: p, Body: []byte(fmt.Sprint(i))})
			}
			rsRestart(t, tg)
			_, ch = clDialChan(t, tg)
			if got := fmt.Sprint(clGetAll(t, ch, q)); got != "[2 1 3 0 4]" {
				t.Fatalf("after restart %s, want [2 1 3 0 4] (by priority, FIFO within one)", got)
			}
		},
	})
}

func init() {
	register(Case{
		// A message's TTL keeps its deadline across a restart: it is not
		// restarted by the recovery.
		Name: "restart/ttl-keeps-deadline",
		Run: func(t T, tg Target) {
			if tg.Restart == nil {
				return
			}
			conn, ch := clDialChan(t, tg)
			q := clUniq("rs-ttl")
			clCleanupQueue(t, tg, q)
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-message-ttl": int32(3000)}); err != nil {
				t.Fatalf("queue.declare: %v", err)
			}
			published := time.Now()
			clPublishConfirmed(t, clConfirmChan(t, conn), "", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("m")})
			// Part of the scenario, not a wait for a result: two of the
			// three seconds pass before the restart.
			time.Sleep(2 * time.Second)
			rsRestart(t, tg)
			_, ch = clDialChan(t, tg)
			for {
				qq, err := ch.QueueDeclarePassive(q, true, false, false, false, amqp.Table{"x-message-ttl": int32(3000)})
				if err != nil {
					t.Fatalf("passive declare: %v", err)
				}
				if qq.Messages == 0 {
					return
				}
				if time.Since(published) > 4500*time.Millisecond {
					t.Fatalf("the message outlived its 3 s TTL by more than 1.5 s: the restart reset its deadline")
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
	})
}
