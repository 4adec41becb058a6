package conformance

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Quorum queues (x-queue-type=quorum, one node) beyond their declare
// checks: limits, TTL, dead-lettering, gets, requeues, consumers and
// policies, as RabbitMQ 3.10.8's rabbit_fifo does them.

// qqDeclare declares a fresh durable quorum queue with extra arguments and
// schedules its deletion.
func qqDeclare(t T, tg Target, ch *amqp.Channel, what string, extra amqp.Table) string {
	t.Helper()
	name := clUniq("qq-" + what)
	clCleanupQueue(t, tg, name)
	args := amqp.Table{"x-queue-type": "quorum"}
	for k, v := range extra {
		args[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("queue.declare %s: %v", name, err)
	}
	return name
}

// qqDLQ declares a classic queue and returns it with the arguments that
// dead-letter into it through the default exchange.
func qqDLQ(t T, tg Target, ch *amqp.Channel) (string, amqp.Table) {
	t.Helper()
	dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
	return dlq, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
}

// qqPublishOutcome publishes on a confirm channel and returns "ack" or
// "nack".
func qqPublishOutcome(t T, ch *amqp.Channel, q string, msg amqp.Publishing) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clWaitTimeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, msg)
	if err != nil {
		t.Fatalf("basic.publish to %q: %v", q, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("waiting for the confirm: %v", err)
	}
	if ok {
		return "ack"
	}
	return "nack"
}

// qqStat is a passive declare of q.
func qqStat(t T, ch *amqp.Channel, q string) amqp.Queue {
	t.Helper()
	st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive queue.declare %s: %v", q, err)
	}
	return st
}

// qqWaitReady waits until q holds n ready messages.
func qqWaitReady(t T, ch *amqp.Channel, q string, n int) {
	t.Helper()
	clEventually(t, fmt.Sprintf("%d ready in %s", n, q), func() bool { return qqStat(t, ch, q).Messages == n })
}

// qqDeath returns the single x-death entry of d, checking the fields every
// entry carries and the x-first-death-* headers.
func qqDeath(t T, d amqp.Delivery, q, reason string) amqp.Table {
	t.Helper()
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) != 1 {
		t.Fatalf("x-death %v, want one entry", d.Headers["x-death"])
	}
	e, _ := deaths[0].(amqp.Table)
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := "count,exchange,queue,reason,routing-keys,time"
	if _, has := e["original-expiration"]; has {
		want = "count,exchange,original-expiration,queue,reason,routing-keys,time"
	}
	if got := strings.Join(keys, ","); got != want {
		t.Fatalf("x-death fields %s, want %s", got, want)
	}
	if e["reason"] != reason || e["queue"] != q || e["count"] != int64(1) || e["exchange"] != "" {
		t.Fatalf("x-death entry %v, want reason %s queue %s count 1 exchange \"\"", e, reason, q)
	}
	if rks, _ := e["routing-keys"].([]any); len(rks) != 1 || rks[0] != q {
		t.Fatalf("x-death routing-keys %v, want [%s]", e["routing-keys"], q)
	}
	if _, ok := e["time"].(time.Time); !ok {
		t.Fatalf("x-death time %v (%T), want a timestamp", e["time"], e["time"])
	}
	if d.Headers["x-first-death-reason"] != reason || d.Headers["x-first-death-queue"] != q || d.Headers["x-first-death-exchange"] != "" {
		t.Fatalf("x-first-death headers %v", d.Headers)
	}
	return e
}

// qqPolicy sets a policy for exactly q and removes it when the case ends.
func qqPolicy(t T, tg Target, q string, def map[string]any) {
	t.Helper()
	pname := "conf-policy-" + q
	if err := tg.SetPolicy(pname, "^"+regexp.QuoteMeta(q)+"$", "queues", 10, def); err != nil {
		t.Fatalf("set policy: %v", err)
	}
	t.Cleanup(func() { tg.ClearPolicy(pname) })
}

func init() {
	register(
		Case{
			// x-overflow reject-publish: rabbit_fifo tells its publishers
			// to reject once the queue is over x-max-length, so the
			// message that takes it over is still confirmed; the next is
			// nacked. Publishing resumes below 80% of the limit.
			Name: "quorum/reject-publish-nacks-when-full",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "rp", amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
				pub := clConfirmChan(t, conn)
				var got []string
				for i := 1; i <= 5; i++ {
					got = append(got, qqPublishOutcome(t, pub, q, clBody(fmt.Sprint(i))))
				}
				if want := "[ack ack ack nack nack]"; fmt.Sprint(got) != want {
					t.Fatalf("confirms %v, want %s", got, want)
				}
				if n := qqStat(t, ch, q).Messages; n != 3 {
					t.Fatalf("%d ready, want 3", n)
				}
				// 2 left: still over 80% of 2.
				clExpectGet(t, ch, q, "1", false).Ack(false)
				clSyncChan(t, ch)
				if o := qqPublishOutcome(t, pub, q, clBody("6")); o != "nack" {
					t.Fatalf("with 2 ready: %s, want nack", o)
				}
				clExpectGet(t, ch, q, "2", false).Ack(false)
				clSyncChan(t, ch)
				if o := qqPublishOutcome(t, pub, q, clBody("7")); o != "ack" {
					t.Fatalf("with 1 ready: %s, want ack", o)
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[3 7]" {
					t.Fatalf("queue holds %v, want [3 7]", got)
				}
			},
		},
		Case{
			// x-overflow drop-head with x-max-length keeps the newest and
			// dead-letters the dropped ones with reason maxlen.
			Name: "quorum/drop-head-max-length-dead-letters",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				args["x-max-length"] = int32(2)
				q := qqDeclare(t, tg, ch, "dh", args)
				pub := clConfirmChan(t, conn)
				for i := 1; i <= 5; i++ {
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(i)))
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[4 5]" {
					t.Fatalf("queue holds %v, want [4 5]", got)
				}
				for _, want := range []string{"1", "2", "3"} {
					d := clGetWait(t, ch, dlq, true)
					if string(d.Body) != want {
						t.Fatalf("dead letter %q, want %s", d.Body, want)
					}
					qqDeath(t, d, q, "maxlen")
				}
			},
		},
		Case{
			// x-max-length-bytes counts the bodies of ready messages; the
			// head goes once they are over it.
			Name: "quorum/drop-head-max-length-bytes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "dhb", amqp.Table{"x-max-length-bytes": int32(10)})
				pub := clConfirmChan(t, conn)
				for _, b := range []string{"aaaa", "bbbb", "cccc", "dd", "e"} {
					clPublishConfirmed(t, pub, "", q, clBody(b))
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[cccc dd e]" {
					t.Fatalf("queue holds %v, want [cccc dd e]", got)
				}
			},
		},
		Case{
			// Quorum queues do not have reject-publish-dlx: RabbitMQ logs a
			// warning and keeps the default, drop-head.
			Name: "quorum/reject-publish-dlx-is-drop-head",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "rpdlx", amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx"})
				pub := clConfirmChan(t, conn)
				var got []string
				for i := 1; i <= 3; i++ {
					got = append(got, qqPublishOutcome(t, pub, q, clBody(fmt.Sprint(i))))
				}
				if fmt.Sprint(got) != "[ack ack ack]" {
					t.Fatalf("confirms %v, want all acks", got)
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[3]" {
					t.Fatalf("queue holds %v, want [3]", got)
				}
			},
		},
		Case{
			// x-max-length counts ready messages only: what consumers hold
			// is not counted, and a requeue that takes the queue over the
			// limit drops the head.
			Name: "quorum/max-length-counts-ready-and-requeue-drops",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "mlr", amqp.Table{"x-max-length": int32(1)})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("1"))
				held := clGetWait(t, ch, q, false)
				clPublishConfirmed(t, pub, "", q, clBody("2"))
				if n := qqStat(t, ch, q).Messages; n != 1 {
					t.Fatalf("%d ready with one held, want 1", n)
				}
				if err := held.Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				clSyncChan(t, ch)
				time.Sleep(clQuietPeriod)
				got := clGetAll(t, ch, q)
				if fmt.Sprint(got) != "[1]" {
					t.Fatalf("after the requeue the queue holds %v, want [1]", got)
				}
			},
		},
		Case{
			// x-message-ttl on a quorum queue: a message past it is
			// dead-lettered with reason expired, without a client asking.
			Name: "quorum/message-ttl-dead-letters-expired",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				args["x-message-ttl"] = int32(100)
				q := qqDeclare(t, tg, ch, "ttl", args)
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				d := clGetWait(t, ch, dlq, true)
				if string(d.Body) != "m" {
					t.Fatalf("dead letter %q", d.Body)
				}
				e := qqDeath(t, d, q, "expired")
				if _, has := e["original-expiration"]; has {
					t.Fatalf("x-death has original-expiration with a queue TTL: %v", e)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// Per-message expiration on a quorum queue: the expired message
			// is dead-lettered with its expiration moved into x-death's
			// original-expiration; one without stays.
			Name: "quorum/per-message-expiration",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				q := qqDeclare(t, tg, ch, "pmttl", args)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: []byte("short"), Expiration: "50"})
				clPublishConfirmed(t, pub, "", q, clBody("kept"))
				d := clGetWait(t, ch, dlq, true)
				if string(d.Body) != "short" || d.Expiration != "" {
					t.Fatalf("dead letter %q expiration %q", d.Body, d.Expiration)
				}
				e := qqDeath(t, d, q, "expired")
				if e["original-expiration"] != "50" {
					t.Fatalf("original-expiration %v, want 50", e["original-expiration"])
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[kept]" {
					t.Fatalf("queue holds %v, want [kept]", got)
				}
			},
		},
		Case{
			// A message with an expiration behind one without waits: only
			// the head expires.
			Name: "quorum/expiration-only-at-head",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "head", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("first"))
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: []byte("second"), Expiration: "20"})
				time.Sleep(200 * time.Millisecond)
				if n := qqStat(t, ch, q).Messages; n != 2 {
					t.Fatalf("%d ready, want 2: the expired message is not at the head", n)
				}
				clExpectGet(t, ch, q, "first", false).Ack(false)
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// basic.reject and basic.nack with requeue=false dead-letter
			// with reason rejected, nack's multiple taking every earlier one.
			Name: "quorum/reject-nack-dead-letter-rejected",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				q := qqDeclare(t, tg, ch, "rej", args)
				clFill(t, conn, q, 4)
				ds := clGetN(t, ch, q, 4)
				if err := ds[0].Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				if err := ds[2].Nack(true, false); err != nil {
					t.Fatalf("nack: %v", err)
				}
				for _, want := range []string{"1", "2", "3"} {
					d := clGetWait(t, ch, dlq, true)
					if string(d.Body) != want {
						t.Fatalf("dead letter %q, want %s", d.Body, want)
					}
					qqDeath(t, d, q, "rejected")
					if _, has := d.Headers["x-delivery-count"]; has {
						t.Fatalf("dead letter keeps x-delivery-count: %v", d.Headers)
					}
				}
				st := qqStat(t, ch, q)
				if st.Messages != 0 {
					t.Fatalf("%d ready, want 0 (4 held)", st.Messages)
				}
				if err := ds[3].Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				d := clExpectGet(t, ch, q, "4", true)
				if fmt.Sprint(d.Headers["x-delivery-count"]) != "1" {
					t.Fatalf("x-delivery-count %v, want 1", d.Headers["x-delivery-count"])
				}
			},
		},
		Case{
			// x-delivery-limit's dead letter: x-death says delivery_limit,
			// count 1.
			Name: "quorum/delivery-limit-x-death",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				args["x-delivery-limit"] = int32(0)
				q := qqDeclare(t, tg, ch, "dlim", args)
				clPublish(t, ch, "", q, clBody("m"))
				d := clGetWait(t, ch, q, false)
				if err := d.Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				dd := clGetWait(t, ch, dlq, true)
				qqDeath(t, dd, q, "delivery_limit")
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// basic.get-ok's message-count is what is left ready; what a
			// get holds unacknowledged is not counted; get-empty at the end.
			Name: "quorum/get-message-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "get", nil)
				clFill(t, conn, q, 3)
				var got []string
				for range 3 {
					d := clGetWait(t, ch, q, false)
					got = append(got, fmt.Sprintf("%s/%d/%v", d.Body, d.MessageCount, d.Redelivered))
				}
				if fmt.Sprint(got) != "[1/2/false 2/1/false 3/0/false]" {
					t.Fatalf("gets %v", got)
				}
				clGetEmpty(t, ch, q)
				if err := ch.Nack(0, true, true); err != nil {
					t.Fatalf("nack all: %v", err)
				}
				got = got[:0]
				for range 3 {
					d := clGetWait(t, ch, q, true)
					got = append(got, fmt.Sprintf("%s/%d/%v/%v", d.Body, d.MessageCount, d.Redelivered, d.Headers["x-delivery-count"]))
				}
				if fmt.Sprint(got) != "[1/2/true/1 2/1/true/1 3/0/true/1]" {
					t.Fatalf("gets after the requeue %v", got)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// What basic.get holds comes back when its channel closes,
			// redelivered, ahead of the rest.
			Name: "quorum/get-held-returned-on-close",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "getclose", nil)
				clFill(t, conn, q, 3)
				gch := clOpenChan(t, conn)
				clGetWait(t, gch, q, false)
				clGetWait(t, gch, q, false)
				if err := gch.Close(); err != nil {
					t.Fatalf("channel.close: %v", err)
				}
				qqWaitReady(t, ch, q, 3)
				var got []string
				for range 3 {
					d := clGetWait(t, ch, q, true)
					got = append(got, fmt.Sprintf("%s/%v/%v", d.Body, d.Redelivered, d.Headers["x-delivery-count"]))
				}
				if fmt.Sprint(got) != "[1/true/1 2/true/1 3/false/0]" {
					t.Fatalf("after the close %v", got)
				}
			},
		},
		Case{
			// basic.qos with global=true and a prefetch of 0 is no limit:
			// a quorum consumer is accepted. (With a global prefetch above 0
			// RabbitMQ refuses the consume: 540 NOT_IMPLEMENTED "queue 'q'
			// in vhost '/' does not support global qos", a connection
			// error; Warren does not refuse it yet.)
			Name: "quorum/global-qos-zero-accepted",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "gqos0", nil)
				cch := clOpenChan(t, conn)
				if err := cch.Qos(0, 0, true); err != nil {
					t.Fatalf("basic.qos global: %v", err)
				}
				ds, err := cch.Consume(q, "c", false, false, false, false, nil)
				if err != nil {
					t.Fatalf("consume: %v", err)
				}
				clPublish(t, ch, "", q, clBody("m"))
				clRecvDelivery(t, ds)
			},
		},
		Case{
			// Single active consumer: cancelling the active consumer while
			// it holds a message makes the next one active at once; closing
			// that one's channel gives its message to the third,
			// redelivered.
			Name: "quorum/single-active-consumer-hand-over",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "sac", amqp.Table{"x-single-active-consumer": true})
				var chans [3]*amqp.Channel
				var ds [3]<-chan amqp.Delivery
				for i := range chans {
					chans[i] = clOpenChan(t, conn)
					if err := chans[i].Qos(1, 0, false); err != nil {
						t.Fatalf("qos: %v", err)
					}
					ds[i] = clConsume(t, chans[i], q, fmt.Sprint("c", i), false)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("1"))
				d1 := clRecvDelivery(t, ds[0])
				if err := chans[0].Cancel("c0", false); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				clPublishConfirmed(t, pub, "", q, clBody("2"))
				got := clRecvFrom(t, 1, ds[1], ds[2])
				if string(got[0].Body) != "2" {
					t.Fatalf("after the cancel got %q", got[0].Body)
				}
				if nothing := clDrain(ds[2]); len(nothing) != 0 {
					t.Fatalf("third consumer got %v while the second is active", clBodies(nothing))
				}
				if err := d1.Ack(false); err != nil {
					t.Fatalf("ack after the cancel: %v", err)
				}
				if err := chans[1].Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				d := clRecvDelivery(t, ds[2])
				if string(d.Body) != "2" || !d.Redelivered {
					t.Fatalf("third consumer got %q redelivered=%v, want 2 redelivered", d.Body, d.Redelivered)
				}
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				clSyncChan(t, chans[2])
				if st := qqStat(t, ch, q); st.Messages != 0 || st.Consumers != 1 {
					t.Fatalf("at the end %d ready %d consumers, want 0 and 1", st.Messages, st.Consumers)
				}
			},
		},
		Case{
			// Consumer priorities (x-priority) on a quorum queue: the
			// higher consumer takes what it has room for first.
			Name: "quorum/consumer-priority",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "prio", nil)
				lch, hch := clOpenChan(t, conn), clOpenChan(t, conn)
				for _, c := range []*amqp.Channel{lch, hch} {
					if err := c.Qos(2, 0, false); err != nil {
						t.Fatalf("qos: %v", err)
					}
				}
				lo, err := lch.Consume(q, "lo", false, false, false, false, amqp.Table{"x-priority": int32(1)})
				if err != nil {
					t.Fatalf("consume lo: %v", err)
				}
				hi, err := hch.Consume(q, "hi", false, false, false, false, amqp.Table{"x-priority": int32(10)})
				if err != nil {
					t.Fatalf("consume hi: %v", err)
				}
				clFill(t, conn, q, 3)
				h := clRecvN(t, hi, 2)
				l := clRecvN(t, lo, 1)
				if fmt.Sprint(clBodies(h), clBodies(l)) != "[1 2] [3]" {
					t.Fatalf("hi %v lo %v, want [1 2] [3]", clBodies(h), clBodies(l))
				}
			},
		},
		Case{
			// queue.purge counts and removes the ready messages only; a
			// held one stays and can come back.
			Name: "quorum/purge-keeps-held",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "purge", nil)
				clFill(t, conn, q, 4)
				held := clGetWait(t, ch, q, false)
				n, err := ch.QueuePurge(q, false)
				if err != nil {
					t.Fatalf("purge: %v", err)
				}
				if n != 3 {
					t.Fatalf("purge-ok %d, want 3", n)
				}
				if st := qqStat(t, ch, q); st.Messages != 0 {
					t.Fatalf("%d ready after the purge", st.Messages)
				}
				if err := held.Reject(true); err != nil {
					t.Fatalf("reject: %v", err)
				}
				clExpectGet(t, ch, q, "1", true)
			},
		},
		Case{
			// queue.declare-ok of a quorum queue: ready messages (not what
			// consumers hold) and consumers.
			Name: "quorum/declare-ok-counts",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "counts", nil)
				clFill(t, conn, q, 5)
				cch := clOpenChan(t, conn)
				if err := cch.Qos(2, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				clRecvN(t, clConsume(t, cch, q, "c", false), 2)
				ich := clOpenChan(t, conn)
				if err := ich.Qos(1, 0, false); err != nil {
					t.Fatalf("qos: %v", err)
				}
				clRecvN(t, clConsume(t, ich, q, "c1", false), 1)
				st := qqStat(t, ch, q)
				if st.Messages != 2 || st.Consumers != 2 {
					t.Fatalf("declare-ok %d messages %d consumers, want 2 and 2", st.Messages, st.Consumers)
				}
				// A redeclare (not passive) answers the same.
				st2, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
				if err != nil {
					t.Fatalf("redeclare: %v", err)
				}
				if st2.Messages != 2 || st2.Consumers != 2 {
					t.Fatalf("redeclare-ok %d messages %d consumers", st2.Messages, st2.Consumers)
				}
			},
		},
		Case{
			// An auto-ack consumer on a quorum queue: no x-delivery-count,
			// nothing left.
			Name: "quorum/no-ack-consumer",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "noack", nil)
				clFill(t, conn, q, 3)
				ds := clRecvN(t, clConsume(t, ch, q, "c", true), 3)
				for i, d := range ds {
					if string(d.Body) != fmt.Sprint(i+1) || d.Redelivered {
						t.Fatalf("delivery %d: %q redelivered=%v", i, d.Body, d.Redelivered)
					}
					if n, has := d.Headers["x-delivery-count"]; has {
						t.Fatalf("x-delivery-count %v on a first delivery", n)
					}
				}
				if st := qqStat(t, ch, q); st.Messages != 0 {
					t.Fatalf("%d ready", st.Messages)
				}
			},
		},
		Case{
			// A consumer's unacknowledged messages come back when it is
			// cancelled and its channel closes; basic.recover requeues them
			// too.
			Name: "quorum/basic-recover-requeues",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "recover", nil)
				clFill(t, conn, q, 2)
				cch := clOpenChan(t, conn)
				ds := clConsume(t, cch, q, "c", false)
				clRecvN(t, ds, 2)
				if err := cch.Recover(true); err != nil {
					t.Fatalf("basic.recover: %v", err)
				}
				again := clRecvN(t, ds, 2)
				var got []string
				for _, d := range again {
					got = append(got, fmt.Sprintf("%s/%v/%v", d.Body, d.Redelivered, d.Headers["x-delivery-count"]))
				}
				if fmt.Sprint(got) != "[1/true/1 2/true/1]" {
					t.Fatalf("after basic.recover %v", got)
				}
			},
		},
		Case{
			// x-expires on a quorum queue: an unused queue goes.
			Name: "quorum/x-expires-deletes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "exp", amqp.Table{"x-expires": int32(300)})
				clPublish(t, ch, "", q, clBody("m"))
				deadline := time.Now().Add(10 * time.Second)
				for clQueueExists(t, conn, q) {
					if time.Now().After(deadline) {
						t.Fatalf("queue still there 10s on")
					}
					time.Sleep(50 * time.Millisecond)
				}
			},
		},
		Case{
			// A policy's max-length and overflow apply to a quorum queue.
			Name: "quorum/policy-max-length-reject-publish",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				name := clUniq("qq-pol")
				qqPolicy(t, tg, name, map[string]any{"max-length": 1, "overflow": "reject-publish"})
				clCleanupQueue(t, tg, name)
				if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
					t.Fatalf("declare: %v", err)
				}
				pub := clConfirmChan(t, conn)
				var got []string
				for i := 1; i <= 4; i++ {
					got = append(got, qqPublishOutcome(t, pub, name, clBody(fmt.Sprint(i))))
				}
				if fmt.Sprint(got) != "[ack ack nack nack]" {
					t.Fatalf("confirms %v, want [ack ack nack nack]", got)
				}
			},
		},
		Case{
			// A policy's delivery-limit applies to a quorum queue.
			Name: "quorum/policy-delivery-limit",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				_, ch := clDialChan(t, tg)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				name := clUniq("qq-pol")
				qqPolicy(t, tg, name, map[string]any{"delivery-limit": 1, "dead-letter-exchange": "", "dead-letter-routing-key": dlq})
				clCleanupQueue(t, tg, name)
				if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
					t.Fatalf("declare: %v", err)
				}
				clPublish(t, ch, "", name, clBody("m"))
				for range 2 {
					if err := clGetWait(t, ch, name, false).Nack(false, true); err != nil {
						t.Fatalf("nack: %v", err)
					}
				}
				qqDeath(t, clGetWait(t, ch, dlq, true), name, "delivery_limit")
				clGetEmpty(t, ch, name)
			},
		},
		Case{
			// A policy set on an existing quorum queue drops its head at
			// the next publish.
			Name: "quorum/policy-max-length-existing",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "pol-late", nil)
				clFill(t, conn, q, 3)
				qqPolicy(t, tg, q, map[string]any{"max-length": 2})
				pub := clConfirmChan(t, conn)
				n := 3
				clEventually(t, "the policy's max-length applies", func() bool {
					n++
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(n)))
					return qqStat(t, ch, q).Messages == 2
				})
				got := clGetAll(t, ch, q)
				if want := []string{fmt.Sprint(n - 1), fmt.Sprint(n)}; !slices.Equal(got, want) {
					t.Fatalf("queue holds %v, want %v", got, want)
				}
			},
		},
		Case{
			// A policy that lowers a quorum queue's max-length drops the
			// heads at once, without a publish.
			Name: "quorum/policy-lower-max-length-drops-at-once",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				q := qqDeclare(t, tg, ch, "pol-lower", args)
				clFill(t, conn, q, 4)
				qqPolicy(t, tg, q, map[string]any{"max-length": 1})
				qqWaitReady(t, ch, q, 1)
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[4]" {
					t.Fatalf("queue holds %v, want [4]", got)
				}
				// Dropped together: dead-lettered newest first.
				for _, want := range []string{"3", "2", "1"} {
					d := clGetWait(t, ch, dlq, true)
					if string(d.Body) != want {
						t.Fatalf("dead letter %q, want %s", d.Body, want)
					}
					qqDeath(t, d, q, "maxlen")
				}
			},
		},
		Case{
			// A message that takes a quorum queue past x-max-length-bytes
			// by more than its head drops several heads at once; they are
			// dead-lettered newest first.
			Name: "quorum/drop-head-several-newest-first",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				args["x-max-length-bytes"] = int32(10)
				q := qqDeclare(t, tg, ch, "dh-several", args)
				pub := clConfirmChan(t, conn)
				for _, b := range []string{"aaa", "bbb", "ccc", "dddddddddd"} {
					clPublishConfirmed(t, pub, "", q, clBody(b))
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[dddddddddd]" {
					t.Fatalf("queue holds %v", got)
				}
				for _, want := range []string{"ccc", "bbb", "aaa"} {
					d := clGetWait(t, ch, dlq, true)
					if string(d.Body) != want {
						t.Fatalf("dead letter %q, want %s", d.Body, want)
					}
				}
			},
		},
		Case{
			// basic.get on a quorum queue with single active consumer is
			// refused: 405, a channel error.
			Name: "quorum/get-single-active-consumer-refused",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "sac-get", amqp.Table{"x-single-active-consumer": true})
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				gch := clOpenChan(t, conn)
				_, _, err := gch.Get(q, false)
				ae := clExpectErr(t, conn, err, clCodeResourceLocked, clChanClose)
				want := fmt.Sprintf("RESOURCE_LOCKED - cannot obtain access to locked queue '%s' in vhost '%s'. basic.get operations are not supported by quorum queues with single active consumer", q, tg.VHost())
				if ae.Reason != want {
					t.Fatalf("reply %q, want %q", ae.Reason, want)
				}
				if n := qqStat(t, ch, q).Messages; n != 1 {
					t.Fatalf("%d ready after the refused get, want 1", n)
				}
			},
		},
		Case{
			// A message dead-lettered back into the quorum queue it left
			// (rejected twice) counts its deaths in one x-death entry.
			Name: "quorum/dead-letter-cycle-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "fanout", nil)
				q := qqDeclare(t, tg, ch, "cycle", amqp.Table{"x-dead-letter-exchange": x})
				clBindQueue(t, ch, q, "", x, nil)
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				for range 2 {
					if err := clGetWait(t, ch, q, false).Reject(false); err != nil {
						t.Fatalf("reject: %v", err)
					}
				}
				d := clGetWait(t, ch, q, true)
				deaths, _ := d.Headers["x-death"].([]any)
				if len(deaths) != 1 {
					t.Fatalf("x-death %v, want one entry", d.Headers["x-death"])
				}
				e, _ := deaths[0].(amqp.Table)
				if e["count"] != int64(2) || e["reason"] != "rejected" || e["queue"] != q || e["exchange"] != "" {
					t.Fatalf("x-death entry %v", e)
				}
				if d.Headers["x-first-death-reason"] != "rejected" || d.Headers["x-first-death-queue"] != q {
					t.Fatalf("x-first-death headers %v", d.Headers)
				}
				// Enqueued anew: basic.get's first delivery of it.
				if n := d.Headers["x-delivery-count"]; fmt.Sprint(n) != "0" {
					t.Fatalf("x-delivery-count %v after a dead-letter cycle, want 0", n)
				}
			},
		},
		Case{
			// A message requeued after its TTL ran out while it was held
			// expires: it is dead-lettered, not delivered again.
			Name: "quorum/requeued-after-ttl-expires",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				args["x-message-ttl"] = int32(200)
				q := qqDeclare(t, tg, ch, "ttl-requeue", args)
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				d := clGetWait(t, ch, q, false)
				time.Sleep(400 * time.Millisecond)
				if err := d.Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				dd := clGetWait(t, ch, dlq, true)
				qqDeath(t, dd, q, "expired")
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// Quorum queues ignore basic.consume's exclusive flag: an
			// exclusive consumer shares the queue with others, round robin,
			// and one is taken while others are there.
			Name: "quorum/exclusive-flag-ignored",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "excl", nil)
				cch := clOpenChan(t, conn)
				a, err := cch.Consume(q, "a", true, true, false, false, nil)
				if err != nil {
					t.Fatalf("exclusive consume: %v", err)
				}
				b, err := cch.Consume(q, "b", true, false, false, false, nil)
				if err != nil {
					t.Fatalf("a second consumer beside an exclusive one: %v", err)
				}
				c, err := clOpenChan(t, conn).Consume(q, "c", true, true, false, false, nil)
				if err != nil {
					t.Fatalf("an exclusive consumer beside others: %v", err)
				}
				if n := qqStat(t, ch, q).Consumers; n != 3 {
					t.Fatalf("%d consumers, want 3", n)
				}
				clFill(t, conn, q, 3)
				for i, ds := range []<-chan amqp.Delivery{a, b, c} {
					if d := clRecvDelivery(t, ds); string(d.Body) != fmt.Sprint(i+1) {
						t.Fatalf("consumer %d got %q, want %d", i, d.Body, i+1)
					}
				}
			},
		},
		Case{
			// A quorum queue delivers a transient message as it was
			// published (delivery mode 1), and one without a mode without.
			Name: "quorum/delivery-mode-kept",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "mode", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: []byte("t"), DeliveryMode: amqp.Transient})
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: []byte("n")})
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: []byte("p"), DeliveryMode: amqp.Persistent})
				var got []string
				for range 3 {
					d := clGetWait(t, ch, q, true)
					got = append(got, fmt.Sprintf("%s/%d", d.Body, d.DeliveryMode))
				}
				if fmt.Sprint(got) != "[t/1 n/0 p/2]" {
					t.Fatalf("delivered %v", got)
				}
			},
		},
		Case{
			// basic.nack with multiple and requeue puts what it names at
			// the back, in delivery order, behind what was ready.
			Name: "quorum/nack-multiple-requeue-order",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "nackm", nil)
				clFill(t, conn, q, 5)
				ds := clGetN(t, ch, q, 3)
				if err := ds[2].Nack(true, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				qqWaitReady(t, ch, q, 5)
				var got []string
				for range 5 {
					d := clGetWait(t, ch, q, true)
					got = append(got, fmt.Sprintf("%s/%v", d.Body, d.Redelivered))
				}
				if fmt.Sprint(got) != "[4/false 5/false 1/true 2/true 3/true]" {
					t.Fatalf("after the nack %v", got)
				}
			},
		},
		Case{
			// queue.delete-ok of a quorum queue counts its ready messages,
			// not what a consumer holds.
			Name: "quorum/delete-ok-count",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "delcount", nil)
				clFill(t, conn, q, 3)
				clGetWait(t, clOpenChan(t, conn), q, false)
				n, err := ch.QueueDelete(q, false, false, false)
				if err != nil {
					t.Fatalf("queue.delete: %v", err)
				}
				if n != 2 {
					t.Fatalf("delete-ok %d, want 2", n)
				}
			},
		},
		Case{
			// Dead-lettered messages keep their own headers and properties.
			Name: "quorum/dead-letter-keeps-properties",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				dlq, args := qqDLQ(t, tg, ch)
				q := qqDeclare(t, tg, ch, "props", args)
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, amqp.Publishing{Body: []byte("m"), ContentType: "text/plain",
					CorrelationId: "cid", DeliveryMode: amqp.Persistent, Headers: amqp.Table{"own": "kept"}})
				if err := clGetWait(t, ch, q, false).Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				d := clGetWait(t, ch, dlq, true)
				if d.ContentType != "text/plain" || d.CorrelationId != "cid" || d.DeliveryMode != amqp.Persistent || d.Headers["own"] != "kept" {
					t.Fatalf("dead letter %+v", d)
				}
				var keys []string
				for k := range d.Headers {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				if got := strings.Join(keys, ","); got != "own,x-death,x-first-death-exchange,x-first-death-queue,x-first-death-reason" {
					t.Fatalf("dead letter headers %s", got)
				}
			},
		},
		Case{
			// basic.qos with global=true, then basic.consume on a quorum
			// queue: refused.
			Name: "quorum/global-qos-refused",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "gqos", nil)
				cch := clOpenChan(t, conn)
				if err := cch.Qos(10, 0, true); err != nil {
					t.Fatalf("basic.qos global: %v", err)
				}
				_, err := cch.Consume(q, "c", false, false, false, false, nil)
				t.Logf("consume after global qos: %v", err)
				ae := clExpectErr(t, conn, err, clCodeNotImplemented, clConnClose)
				want := fmt.Sprintf("NOT_IMPLEMENTED - queue '%s' in vhost '%s' does not support global qos", q, tg.VHost())
				if ae.Reason != want {
					t.Fatalf("reply %q, want %q", ae.Reason, want)
				}
			},
		},
		Case{
			// A consumer without a prefetch (prefetch 0, manual acks) of a
			// quorum queue has at most 2000 unacknowledged deliveries
			// (rabbit_quorum_queue's UNLIMITED_PREFETCH_COUNT): the rest
			// stays ready until it acknowledges.
			Name: "quorum/prefetch-zero-is-2000",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := qqDeclare(t, tg, ch, "pf0", nil)
				pub := clConfirmChan(t, conn)
				const n = 2100
				var dcs []*amqp.DeferredConfirmation
				for i := 1; i <= n; i++ {
					dc, err := pub.PublishWithDeferredConfirm("", q, false, false, clBody(fmt.Sprint(i)))
					if err != nil {
						t.Fatalf("publish %d: %v", i, err)
					}
					dcs = append(dcs, dc)
				}
				for i, dc := range dcs {
					if !dc.Wait() {
						t.Fatalf("publish %d nacked", i+1)
					}
				}
				cch := clOpenChan(t, conn)
				ds := clConsume(t, cch, q, "c", false)
				got := clRecvN(t, ds, 2000)
				if st := qqStat(t, ch, q); st.Messages != n-2000 {
					t.Fatalf("with 2000 unacknowledged: %d ready, want %d", st.Messages, n-2000)
				}
				if err := got[len(got)-1].Ack(true); err != nil {
					t.Fatalf("ack: %v", err)
				}
				rest := clRecvN(t, ds, n-2000)
				if b := string(rest[len(rest)-1].Body); b != fmt.Sprint(n) {
					t.Fatalf("last delivery %q, want %d", b, n)
				}
			},
		},
	)
}
