package conformance

import (
	"fmt"
	"slices"
	"sort"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/queue/stream/group"
)

// Warren's extensions of streams (issue 13, sections 1 to 3): filtering
// on the broker, partitioned streams and consumer groups with committed
// offsets, all over plain AMQP 0-9-1 arguments and headers. RabbitMQ 3.10
// has none of them (it ignores the arguments), so these cases skip on a
// broker that is not Warren.

// sgWarren reports whether conn is to Warren; the case is skipped
// (logged) otherwise.
func sgWarren(t T, conn *amqp.Connection) bool {
	t.Helper()
	if p, _ := conn.Properties["product"].(string); p != "Warren" {
		t.Logf("skipped: Warren's stream extension (the broker is %q)", p)
		return false
	}
	return true
}

// sgConsume consumes q on a new channel with prefetch and args, with
// consumer tag tag ("" for the server's).
func sgConsume(t T, conn *amqp.Connection, q, tag string, prefetch int, args amqp.Table) (*amqp.Channel, <-chan amqp.Delivery) {
	t.Helper()
	ch := clOpenChan(t, conn)
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatalf("basic.qos: %v", err)
	}
	ds, err := ch.Consume(q, tag, false, false, false, false, args)
	if err != nil {
		t.Fatalf("consume %v: %v", args, err)
	}
	return ch, ds
}

// sgPart is a delivery's x-stream-partition.
func sgPart(t T, d amqp.Delivery) int {
	t.Helper()
	p, ok := d.Headers["x-stream-partition"].(int64)
	if !ok {
		t.Fatalf("delivery %q: x-stream-partition %v (%T), want a long", d.Body, d.Headers["x-stream-partition"], d.Headers["x-stream-partition"])
	}
	return int(p)
}

// sgPublishKeyed publishes n confirmed messages "0".."n-1" to q with
// partition keys "key-0"...
func sgPublishKeyed(t T, conn *amqp.Connection, q string, n int) {
	t.Helper()
	ch := clConfirmChan(t, conn)
	for i := range n {
		clPublishConfirmed(t, ch, "", q, amqp.Publishing{Body: []byte(fmt.Sprint(i)), Headers: amqp.Table{"x-stream-partition-key": fmt.Sprint("key-", i)}})
	}
	ch.Close()
}

func init() {
	register(
		Case{
			// A keyed message lands on the partition MurmurHash3 (seed
			// 104729, as RabbitMQ's stream clients) gives its key; an
			// explicit partition wins; offsets are dense per partition; a
			// plain consumer reads every partition.
			Name: "stream-groups/partitioned-routing",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, amqp.Table{"x-stream-partitions": int32(3)})
				sgPublishKeyed(t, conn, q, 12)
				pch := clConfirmChan(t, conn)
				clPublishConfirmed(t, pch, "", q, amqp.Publishing{Body: []byte("explicit"), Headers: amqp.Table{"x-stream-partition": int32(1), "x-stream-partition-key": "ignored"}})
				_, ds := stConsume(t, conn, q, 20, "first")
				got := stRecvAcked(t, ds, 13)
				next := map[int]int64{}
				for _, d := range got {
					p := sgPart(t, d)
					want := 1
					if string(d.Body) != "explicit" {
						want = group.KeyPartition("key-"+string(d.Body), 3)
					}
					if p != want {
						t.Fatalf("message %q on partition %d, want %d", d.Body, p, want)
					}
					if off := d.Headers["x-stream-offset"].(int64); off != next[p] {
						t.Fatalf("partition %d: offset %d, want %d (dense from 0)", p, off, next[p])
					}
					next[p]++
				}
				clNoDelivery(t, ds)
			},
		},
		Case{
			// A partition header out of range closes the channel with 406
			// and stores nothing; the partition count is immutable.
			Name: "stream-groups/bad-partition-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, amqp.Table{"x-stream-partitions": int32(2)})
				pch := clOpenChan(t, conn)
				closes := clNotifyClose(pch)
				clPublish(t, pch, "", q, amqp.Publishing{Body: []byte("x"), Headers: amqp.Table{"x-stream-partition": int32(2)}})
				ae := clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
				if want := "PRECONDITION_FAILED - invalid header 'x-stream-partition': partition 2 out of range: the stream has 2 partitions (0..1)"; ae.Reason != want {
					t.Errorf("reply text %q, want %q", ae.Reason, want)
				}
				ch2 := clOpenChan(t, conn)
				_, err := ch2.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "stream", "x-stream-partitions": int32(3)})
				ae = clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
				t.Logf("re-declare: %s", ae.Reason)
				ok, err := clOpenChan(t, conn).QueueDeclarePassive(q, true, false, false, false, nil)
				if err != nil || ok.Messages != 0 {
					t.Fatalf("after the refused publish: %d messages, %v", ok.Messages, err)
				}
			},
		},
		Case{
			// x-stream-filter passes only matching messages, exactly;
			// x-stream-match-unfiltered adds the untagged ones.
			Name: "stream-groups/filter-exact",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, nil)
				pch := clConfirmChan(t, conn)
				for i, v := range []string{"eu", "us", "", "eu", "ap"} {
					m := amqp.Publishing{Body: []byte(fmt.Sprint(i))}
					if v != "" {
						m.Headers = amqp.Table{"x-stream-filter-value": v}
					}
					clPublishConfirmed(t, pch, "", q, m)
				}
				_, ds := sgConsume(t, conn, q, "", 10, amqp.Table{"x-stream-offset": "first", "x-stream-filter": []any{"eu", "ap"}})
				stWant(t, "eu and ap", clBodies(stRecvAcked(t, ds, 3)), "0", "3", "4")
				clNoDelivery(t, ds)
				_, ds = sgConsume(t, conn, q, "", 10, amqp.Table{"x-stream-offset": "first", "x-stream-filter": "us", "x-stream-match-unfiltered": true})
				stWant(t, "us and untagged", clBodies(stRecvAcked(t, ds, 2)), "1", "2")
				clNoDelivery(t, ds)
			},
		},
		Case{
			// Two members of a group split the partitions (each message to
			// one of them); another group gets everything; when a member's
			// channel closes, the other takes its partitions and its
			// unacked deliveries, redelivered.
			Name: "stream-groups/members-split-and-take-over",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, amqp.Table{"x-stream-partitions": int32(4)})
				g := amqp.Table{"x-stream-group": clUniq("g"), "x-stream-offset": "first"}
				ach, ads := sgConsume(t, conn, q, "a", 50, g)
				_, bds := sgConsume(t, conn, q, "b", 50, g)
				_, ods := sgConsume(t, conn, q, "o", 50, amqp.Table{"x-stream-group": clUniq("other"), "x-stream-offset": "first"})
				clSyncChan(t, ach)
				sgPublishKeyed(t, conn, q, 40)
				other := stRecvAcked(t, ods, 40)
				stWant(t, "the other group", sgSorted(clBodies(other)), sgSorted(stSeq(0, 40))...)
				var a, b []amqp.Delivery
				deadline := time.Now().Add(clWaitTimeout)
				for len(a)+len(b) < 40 && time.Now().Before(deadline) {
					select {
					case d := <-ads:
						a = append(a, d)
					case d := <-bds:
						b = append(b, d)
						d.Ack(false)
					case <-time.After(100 * time.Millisecond):
					}
				}
				if len(a)+len(b) != 40 {
					t.Fatalf("the group got %d+%d of 40", len(a), len(b))
				}
				pa, pb := map[int]bool{}, map[int]bool{}
				for _, d := range a {
					pa[sgPart(t, d)] = true
				}
				for _, d := range b {
					pb[sgPart(t, d)] = true
					if pa[sgPart(t, d)] {
						t.Fatalf("partition %d delivered to both members", sgPart(t, d))
					}
				}
				if len(pa) != 2 || len(pb) != 2 {
					t.Fatalf("partitions a %v b %v, want two each", pa, pb)
				}
				// a acks none and goes: b gets a's 20-odd deliveries again.
				ach.Close()
				re := stRecvAcked(t, bds, len(a))
				for _, d := range re {
					if !d.Redelivered || !pa[sgPart(t, d)] {
						t.Fatalf("after a left b got %q (partition %d, redelivered %v)", d.Body, sgPart(t, d), d.Redelivered)
					}
				}
				stWant(t, "a's deliveries", sgSorted(clBodies(re)), sgSorted(clBodies(a))...)
				clNoDelivery(t, bds)
			},
		},
		Case{
			// A group resumes at its committed offset: a new member after
			// the last one's channel closed gets what was not acked
			// (redelivered) and nothing acked; x-stream-offset no longer
			// applies.
			Name: "stream-groups/resume-at-committed",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 6)
				name := clUniq("g")
				mch, ds := sgConsume(t, conn, q, "m1", 10, amqp.Table{"x-stream-group": name, "x-stream-offset": "first"})
				got := clRecvN(t, ds, 6)
				for _, d := range got[:4] {
					d.Ack(false)
				}
				if err := mch.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				_, ds = sgConsume(t, conn, q, "m2", 10, amqp.Table{"x-stream-group": name, "x-stream-offset": "last"})
				re := stRecvAcked(t, ds, 2)
				stWant(t, "resumed", clBodies(re), "4", "5")
				if !re[0].Redelivered {
					t.Errorf("an unacked delivery came back without redelivered")
				}
				clNoDelivery(t, ds)
			},
		},
		Case{
			// A member that cancels keeps the partition it has unacked
			// deliveries of until it acks them (they count: no
			// duplicates); the next member then continues after them.
			Name: "stream-groups/cancel-waits-for-acks",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 4)
				name := clUniq("g")
				mch, ds := sgConsume(t, conn, q, "m1", 10, amqp.Table{"x-stream-group": name, "x-stream-offset": "first"})
				got := clRecvN(t, ds, 4)
				if err := mch.Cancel("m1", false); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				_, ds2 := sgConsume(t, conn, q, "m2", 10, amqp.Table{"x-stream-group": name})
				clNoDelivery(t, ds2)
				for _, d := range got {
					d.Ack(false)
				}
				stPublishN(t, conn, q, 1)
				stWant(t, "after m1's acks", clBodies(stRecvAcked(t, ds2, 1)), "0")
				clNoDelivery(t, ds2)
			},
		},
		Case{
			// Acks committed by tx.commit survive a restart: the group
			// resumes after them.
			Name: "stream-groups/tx-commit-survives-restart",
			Run: func(t T, tg Target) {
				if tg.Restart == nil {
					t.Logf("skipped: the target cannot restart")
					return
				}
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 5)
				name := clUniq("g")
				mch, ds := sgConsume(t, conn, q, "m", 10, amqp.Table{"x-stream-group": name, "x-stream-offset": "first"})
				if err := mch.Tx(); err != nil {
					t.Fatalf("tx.select: %v", err)
				}
				got := clRecvN(t, ds, 5)
				got[2].Ack(true)
				if err := mch.TxCommit(); err != nil {
					t.Fatalf("tx.commit: %v", err)
				}
				conn.Close()
				rsRestart(t, tg)
				conn = clDial(t, tg)
				stAwaitUp(t, conn, q)
				_, ds = sgConsume(t, conn, q, "m", 10, amqp.Table{"x-stream-group": name, "x-stream-offset": "first"})
				stWant(t, "after the restart", clBodies(stRecvAcked(t, ds, 2)), "3", "4")
				clNoDelivery(t, ds)
			},
		},
		Case{
			// A group member may nack: with requeue the offset comes back
			// to it redelivered; without, it counts as processed.
			Name: "stream-groups/nack-in-a-group",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				if !sgWarren(t, conn) {
					return
				}
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 3)
				_, ds := sgConsume(t, conn, q, "m", 10, amqp.Table{"x-stream-group": clUniq("g"), "x-stream-offset": "first"})
				got := clRecvN(t, ds, 3)
				got[0].Nack(false, true)
				got[1].Reject(false)
				got[2].Ack(false)
				d := clRecvDelivery(t, ds)
				if string(d.Body) != "0" || !d.Redelivered {
					t.Fatalf("after nack got %q redelivered %v, want 0 redelivered", d.Body, d.Redelivered)
				}
				d.Ack(false)
				clNoDelivery(t, ds)
			},
		},
	)
}

func sgSorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
