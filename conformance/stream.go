package conformance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Stream queues over AMQP 0-9-1, as RabbitMQ 3.10 has them: declared
// durable with x-queue-type=stream; consumed with manual acks and a
// per-consumer prefetch from an x-stream-offset; every delivery carries
// its offset in the x-stream-offset header; acks return credit and never
// delete, so every consumer reads the whole stream.

// stDeclare declares a stream and removes it after the case.
func stDeclare(t T, tg Target, ch *amqp.Channel, args amqp.Table) string {
	t.Helper()
	name := clUniq("stream")
	clCleanupQueue(t, tg, name)
	a := amqp.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		t.Fatalf("declare stream: %v", err)
	}
	return name
}

// stPublishN publishes n confirmed messages "0".."n-1" to stream q.
func stPublishN(t T, conn *amqp.Connection, q string, n int) {
	t.Helper()
	ch := clConfirmChan(t, conn)
	for i := range n {
		clPublishConfirmed(t, ch, "", q, clBody(fmt.Sprint(i)))
	}
	ch.Close()
}

// stConsume consumes q on a new channel with prefetch and an offset
// spec (nil: none).
func stConsume(t T, conn *amqp.Connection, q string, prefetch int, offset any) (*amqp.Channel, <-chan amqp.Delivery) {
	t.Helper()
	ch := clOpenChan(t, conn)
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatalf("basic.qos: %v", err)
	}
	var args amqp.Table
	if offset != nil {
		args = amqp.Table{"x-stream-offset": offset}
	}
	ds, err := ch.Consume(q, "", false, false, false, false, args)
	if err != nil {
		t.Fatalf("consume %v: %v", offset, err)
	}
	return ch, ds
}

// stAwaitUp waits, up to a minute, until stream q takes consumers again
// after a restart: RabbitMQ answers 404 "home node ... is down or
// inaccessible" while its stream is still coming back.
func stAwaitUp(t T, conn *amqp.Connection, q string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ch := clOpenChan(t, conn)
		err := ch.Qos(1, 0, false)
		if err == nil {
			_, err = ch.Consume(q, "await-up", false, false, false, false, nil)
		}
		if err == nil {
			ch.Close()
			return
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.NotFound || !strings.Contains(ae.Reason, "down or inaccessible") || time.Now().After(deadline) {
			t.Fatalf("stream %s after the restart: %v", q, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stRecvAcked receives n deliveries, acking each, and returns them.
func stRecvAcked(t T, ds <-chan amqp.Delivery, n int) []amqp.Delivery {
	t.Helper()
	out := make([]amqp.Delivery, 0, n)
	for range n {
		d := clRecvDelivery(t, ds)
		if err := d.Ack(false); err != nil {
			t.Fatalf("ack: %v", err)
		}
		out = append(out, d)
	}
	return out
}

// stOffsets are the x-stream-offset headers of ds.
func stOffsets(t T, ds []amqp.Delivery) []string {
	t.Helper()
	out := make([]string, len(ds))
	for i, d := range ds {
		v, ok := d.Headers["x-stream-offset"].(int64)
		if !ok {
			t.Fatalf("delivery %q: x-stream-offset %v (%T), want a long", d.Body, d.Headers["x-stream-offset"], d.Headers["x-stream-offset"])
		}
		out[i] = fmt.Sprint(v)
	}
	return out
}

func stWant(t T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func stSeq(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func init() {
	refused := func(name string, code int, kind clCloseKind, format string, op func(t T, conn *amqp.Connection, ch *amqp.Channel, q string) error) Case {
		return Case{Name: name, Run: func(t T, tg Target) {
			conn, ch := clDialChan(t, tg)
			q := stDeclare(t, tg, ch, nil)
			stPublishN(t, conn, q, 1)
			ae := clExpectErr(t, conn, op(t, conn, ch, q), code, kind)
			if format == "" {
				return
			}
			if want := fmt.Sprintf(format, q, acVHost(tg)); ae.Reason != want {
				t.Errorf("reply text %q, want %q", ae.Reason, want)
			}
		}}
	}
	consume := func(prefetch int, global, noAck bool, args amqp.Table) func(T, *amqp.Connection, *amqp.Channel, string) error {
		return func(t T, _ *amqp.Connection, ch *amqp.Channel, q string) error {
			if prefetch > 0 {
				if err := ch.Qos(prefetch, 0, global); err != nil {
					t.Fatalf("basic.qos: %v", err)
				}
			}
			_, err := ch.Consume(q, "", noAck, false, false, false, args)
			return err
		}
	}
	register(
		refused("stream/consume-without-prefetch-406", clCodePreconditionFailed, clChanClose,
			"PRECONDITION_FAILED - consumer prefetch count is not set for 'queue '%s' in vhost '%s''", consume(0, false, false, nil)),
		refused("stream/consume-global-prefetch-only-406", clCodePreconditionFailed, clChanClose,
			"PRECONDITION_FAILED - consumer prefetch count is not set for 'queue '%s' in vhost '%s''", consume(10, true, false, nil)),
		refused("stream/consume-no-ack-540", clCodeNotImplemented, clConnClose,
			"NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue '%s' in vhost '%s'", consume(10, false, true, nil)),
		refused("stream/consume-unknown-offset-541", 541, clConnClose, "", consume(10, false, false, amqp.Table{"x-stream-offset": "bogus"})),
		refused("stream/get-540", clCodeNotImplemented, clConnClose,
			"NOT_IMPLEMENTED - basic.get not supported by stream queues queue '%s' in vhost '%s'",
			func(_ T, _ *amqp.Connection, ch *amqp.Channel, q string) error {
				_, _, err := ch.Get(q, false)
				return err
			}),
		refused("stream/purge-540", clCodeNotImplemented, clConnClose,
			"NOT_IMPLEMENTED - queue.purge not supported by stream queues queue '%s' in vhost '%s'",
			func(_ T, _ *amqp.Connection, ch *amqp.Channel, q string) error {
				_, err := ch.QueuePurge(q, false)
				return err
			}),
		refused("stream/nack-540", clCodeNotImplemented, clConnClose,
			"NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue '%s' in vhost '%s'",
			func(t T, conn *amqp.Connection, _ *amqp.Channel, q string) error {
				ch, ds := stConsume(t, conn, q, 10, "first")
				closes := clNotifyClose(ch)
				if err := clRecvDelivery(t, ds).Nack(false, true); err != nil {
					t.Fatalf("nack: %v", err)
				}
				select {
				case e := <-closes:
					if e != nil {
						return e
					}
				case <-time.After(clWaitTimeout):
				}
				return nil
			}),
	)
	register(
		Case{
			// Acks never delete: two consumers from "first" each read the
			// whole stream, every delivery with its offset, not redelivered.
			Name: "stream/every-consumer-reads-all",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 5)
				for range 2 {
					_, ds := stConsume(t, conn, q, 2, "first")
					got := stRecvAcked(t, ds, 5)
					stWant(t, "bodies", clBodies(got), stSeq(0, 5)...)
					stWant(t, "offsets", stOffsets(t, got), stSeq(0, 5)...)
					for _, d := range got {
						if d.Redelivered {
							t.Fatalf("delivery %q is marked redelivered", d.Body)
						}
					}
					clNoDelivery(t, ds)
				}
			},
		},
		Case{
			// The offset specs: first, last (the last chunk: one message
			// when published one by one), next (and no spec), a number
			// (clamped: beyond the end is next, negative is first), an
			// interval and a timestamp.
			Name: "stream/offset-specs",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 5)
				for _, c := range []struct {
					spec any
					want []string
				}{
					{"first", stSeq(0, 5)},
					{"last", []string{"4"}},
					{int64(3), []string{"3", "4"}},
					{int32(2), []string{"2", "3", "4"}},
					{int64(-5), stSeq(0, 5)},
					{int64(100), nil},
					{"next", nil},
					{nil, nil},
					{"10m", stSeq(0, 5)},
					{time.Now().Add(-time.Hour), stSeq(0, 5)},
					{time.Now().Add(time.Hour), nil},
				} {
					_, ds := stConsume(t, conn, q, 10, c.spec)
					got := stRecvAcked(t, ds, len(c.want))
					stWant(t, fmt.Sprintf("offset %v", c.spec), stOffsets(t, got), c.want...)
					stWant(t, fmt.Sprintf("bodies from %v", c.spec), clBodies(got), c.want...)
					clNoDelivery(t, ds)
				}
			},
		},
		Case{
			// A consumer at "next" gets what is published after it
			// subscribed, in order, within its prefetch: acks give credit.
			Name: "stream/next-gets-new-messages-with-credit",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 3)
				_, ds := stConsume(t, conn, q, 2, "next")
				clSyncChan(t, ch)
				pch := clConfirmChan(t, conn)
				for i := 3; i < 8; i++ {
					clPublishConfirmed(t, pch, "", q, clBody(fmt.Sprint(i)))
				}
				first := clRecvN(t, ds, 2)
				stWant(t, "within the prefetch", clBodies(first), "3", "4")
				clNoDelivery(t, ds)
				for _, d := range first {
					d.Ack(false)
				}
				got := stRecvAcked(t, ds, 3)
				stWant(t, "after the acks", clBodies(got), "5", "6", "7")
				stWant(t, "offsets", stOffsets(t, got), "5", "6", "7")
			},
		},
		Case{
			// Own headers are kept next to x-stream-offset; the stream is
			// reached through a bound exchange too.
			Name: "stream/headers-and-bindings",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				clBindQueue(t, ch, q, "k", x, nil)
				pch := clConfirmChan(t, conn)
				clPublishConfirmed(t, pch, x, "k", amqp.Publishing{Body: []byte("m"), Headers: amqp.Table{"own": "kept"}, ContentType: "text/plain"})
				_, ds := stConsume(t, conn, q, 1, "first")
				d := stRecvAcked(t, ds, 1)[0]
				if d.Headers["own"] != "kept" || d.ContentType != "text/plain" || d.Exchange != x || d.RoutingKey != "k" {
					t.Fatalf("delivery: headers %v content type %q exchange %q key %q", d.Headers, d.ContentType, d.Exchange, d.RoutingKey)
				}
				stWant(t, "offset", stOffsets(t, []amqp.Delivery{d}), "0")
			},
		},
		Case{
			// Declare-ok counts the stream's messages; RabbitMQ updates
			// the count it reports every few seconds.
			Name: "stream/declare-ok-counts-messages",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 3)
				deadline := time.Now().Add(15 * time.Second)
				for {
					ok, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
					if err != nil {
						t.Fatalf("re-declare: %v", err)
					}
					if ok.Messages == 3 && ok.Consumers == 0 {
						return
					}
					if ok.Messages != 0 || time.Now().After(deadline) {
						t.Fatalf("declare-ok: %d messages %d consumers, want 3 and 0", ok.Messages, ok.Consumers)
					}
					time.Sleep(200 * time.Millisecond)
				}
			},
		},
		Case{
			// A stream ignores if-empty on delete and reports no messages.
			Name: "stream/delete-if-empty-ignored",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 2)
				n, err := ch.QueueDelete(q, false, true, false)
				if err != nil || n != 0 {
					t.Fatalf("delete if-empty: %d, %v; want 0 and deleted", n, err)
				}
				if clQueueExists(t, conn, q) {
					t.Fatalf("the stream is still there")
				}
			},
		},
		Case{
			// The stream arguments are taken; a refused one is refused.
			Name: "stream/declare-args",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				stDeclare(t, tg, ch, amqp.Table{"x-max-length-bytes": int64(1 << 30), "x-max-age": "7D", "x-stream-max-segment-size-bytes": int32(1 << 20)})
			},
		},
		Case{
			// Confirmed messages survive a restart in order with rising
			// offsets, and new ones follow them.
			Name: "stream/restart-keeps-offsets",
			Run: func(t T, tg Target) {
				if tg.Restart == nil {
					t.Logf("skipped: the target cannot restart")
					return
				}
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, amqp.Table{"x-stream-max-segment-size-bytes": int32(200)})
				stPublishN(t, conn, q, 10)
				conn.Close()
				rsRestart(t, tg)
				conn = clDial(t, tg)
				stAwaitUp(t, conn, q)
				stPublishN(t, conn, q, 1)
				_, ds := stConsume(t, conn, q, 5, "first")
				got := stRecvAcked(t, ds, 11)
				// Offsets rise from 0; RabbitMQ's may skip numbers where
				// its log wrote records of its own (seen at segment rolls
				// with segments this small), Warren's are dense.
				var last int64 = -1
				for _, d := range got {
					off, _ := d.Headers["x-stream-offset"].(int64)
					if off <= last || (last == -1 && off != 0) {
						t.Fatalf("offsets after the restart %v: not rising from 0", stOffsets(t, got))
					}
					last = off
				}
				stWant(t, "bodies", clBodies(got)[:10], stSeq(0, 10)...)
			},
		},
	)
}

// Retention, stream arguments and what RabbitMQ 3.10's streams ignore.
func init() {
	// stDeclareErr declares stream q with args and returns its refusal.
	stDeclareErr := func(t T, tg Target, conn *amqp.Connection, q string, args amqp.Table) *amqp.Error {
		t.Helper()
		ch := clOpenChan(t, conn)
		a := amqp.Table{"x-queue-type": "stream"}
		for k, v := range args {
			a[k] = v
		}
		_, err := ch.QueueDeclare(q, true, false, false, false, a)
		return clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
	}
	register(
		Case{
			// Retention drops whole old segments, applied when a segment
			// rolls (RabbitMQ: lazily): with tiny segments and a byte
			// limit, a consumer from "first" gets a suffix of what was
			// published, in order, without the oldest; declare-ok counts
			// what is retained (RabbitMQ updates it every few seconds).
			Name: "stream/retention-drops-oldest-segments",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, amqp.Table{"x-stream-max-segment-size-bytes": int32(500), "x-max-length-bytes": int32(1500)})
				pch := clConfirmChan(t, conn)
				const n = 40
				pad := string(make([]byte, 100))
				for i := range n {
					clPublishConfirmed(t, pch, "", q, clBody(fmt.Sprintf("%02d%s", i, pad)))
				}
				_, ds := stConsume(t, conn, q, 100, "first")
				var got []int
				var offsets []int64
				for len(got) == 0 || got[len(got)-1] != n-1 {
					d := clRecvDelivery(t, ds)
					d.Ack(false)
					var i int
					fmt.Sscanf(string(d.Body[:2]), "%d", &i)
					got = append(got, i)
					off, _ := d.Headers["x-stream-offset"].(int64)
					offsets = append(offsets, off)
				}
				if len(got) >= n || got[0] == 0 {
					t.Fatalf("from first after retention: %v, want a suffix without the oldest", got)
				}
				for k := range got {
					if got[k] != got[0]+k || (k > 0 && offsets[k] <= offsets[k-1]) {
						t.Fatalf("from first: bodies %v offsets %v, want consecutive messages in offset order", got, offsets)
					}
				}
				deadline := time.Now().Add(15 * time.Second)
				for {
					ok, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
					if err != nil {
						t.Fatalf("passive declare: %v", err)
					}
					if ok.Messages > 0 && ok.Messages < n {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("declare-ok: %d messages, want some and fewer than %d", ok.Messages, n)
					}
					time.Sleep(200 * time.Millisecond)
				}
			},
		},
		Case{
			// Bad stream arguments, refused with RabbitMQ 3.10's texts.
			Name: "stream/declare-invalid-args-406",
			Run: func(t T, tg Target) {
				conn := clDial(t, tg)
				q := clUniq("stream-bad")
				clCleanupQueue(t, tg, q)
				invalid := "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '%s': %s"
				for _, c := range []struct {
					arg  string
					v    any
					want string
				}{
					{"x-max-age", "1x", fmt.Sprintf(invalid, "x-max-age", q, acVHost(tg), "invalid_max_age")},
					{"x-max-age", "0D", fmt.Sprintf(invalid, "x-max-age", q, acVHost(tg), "invalid_max_age")},
					{"x-max-age", int32(5), fmt.Sprintf(invalid, "x-max-age", q, acVHost(tg), "{unacceptable_type,signedint}")},
					{"x-stream-max-segment-size-bytes", int32(-1), fmt.Sprintf(invalid, "x-stream-max-segment-size-bytes", q, acVHost(tg), "{value_negative,-1}")},
					{"x-stream-max-segment-size-bytes", "big", fmt.Sprintf(invalid, "x-stream-max-segment-size-bytes", q, acVHost(tg), `"expected integer, got longstr"`)},
					{"x-stream-max-segment-size-bytes", int64(4_000_000_000), "PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes"},
				} {
					if ae := stDeclareErr(t, tg, conn, q, amqp.Table{c.arg: c.v}); ae.Reason != c.want {
						t.Errorf("%s %v: reply text %q, want %q", c.arg, c.v, ae.Reason, c.want)
					}
				}
			},
		},
		Case{
			// An x-max-age without a leading number crashes RabbitMQ
			// 3.10's check: a bare 541 that closes the connection.
			Name: "stream/declare-max-age-without-number-541",
			Run: func(t T, tg Target) {
				q := clUniq("stream-bad")
				clCleanupQueue(t, tg, q)
				for _, v := range []string{"", "D", "-1D", " 1D"} {
					conn, ch := clDialChan(t, tg)
					_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "stream", "x-max-age": v})
					if ae := clExpectErr(t, conn, err, 541, clConnClose); ae.Reason != "INTERNAL_ERROR" {
						t.Errorf("x-max-age %q: reply text %q, want INTERNAL_ERROR", v, ae.Reason)
					}
				}
			},
		},
		Case{
			// Re-declaring with other stream arguments is 406 inequivalent
			// arg; x-max-age compares as text ("24h" is not "1D"), numbers
			// by value whatever their width.
			Name: "stream/redeclare-inequivalent-args-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				base := amqp.Table{"x-max-age": "1D", "x-stream-max-segment-size-bytes": int32(1000), "x-max-length-bytes": int64(100000)}
				q := stDeclare(t, tg, ch, base)
				with := func(k string, v any) amqp.Table {
					a := amqp.Table{}
					for bk, bv := range base {
						a[bk] = bv
					}
					a[k] = v
					return a
				}
				same := with("x-stream-max-segment-size-bytes", int64(1000))
				same["x-queue-type"] = "stream"
				if _, err := ch.QueueDeclare(q, true, false, false, false, same); err != nil {
					t.Fatalf("re-declare with a wider integer: %v", err)
				}
				format := "PRECONDITION_FAILED - inequivalent arg '%s' for queue '%s' in vhost '%s': received '%s' but current is '%s'"
				for _, c := range []struct {
					arg       string
					v         any
					got, have string
				}{
					{"x-max-age", "2D", "2D", "1D"},
					{"x-max-age", "24h", "24h", "1D"},
					{"x-stream-max-segment-size-bytes", int32(2000), "2000", "1000"},
					{"x-max-length-bytes", int64(1), "1", "100000"},
				} {
					want := fmt.Sprintf(format, c.arg, q, acVHost(tg), c.got, c.have)
					if ae := stDeclareErr(t, tg, conn, q, with(c.arg, c.v)); ae.Reason != want {
						t.Errorf("%s %v: reply text %q, want %q", c.arg, c.v, ae.Reason, want)
					}
				}
			},
		},
		Case{
			// RabbitMQ 3.10's streams report no consumers in declare-ok,
			// take an exclusive consumer like any other (and others next
			// to it), and delete with if-unused while consumed.
			Name: "stream/consumers-not-counted-exclusive-and-if-unused-ignored",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := stDeclare(t, tg, ch, nil)
				stPublishN(t, conn, q, 1)
				ech := clOpenChan(t, conn)
				ech.Qos(10, 0, false)
				eds, err := ech.Consume(q, "", false, true, false, false, amqp.Table{"x-stream-offset": "first"})
				if err != nil {
					t.Fatalf("exclusive consume: %v", err)
				}
				if d := clRecvDelivery(t, eds); string(d.Body) != "0" {
					t.Fatalf("exclusive consumer got %q", d.Body)
				}
				_, ds := stConsume(t, conn, q, 10, "first")
				if d := clRecvDelivery(t, ds); string(d.Body) != "0" {
					t.Fatalf("second consumer got %q", d.Body)
				}
				xch := clOpenChan(t, conn)
				xch.Qos(10, 0, false)
				if _, err := xch.Consume(q, "", false, true, false, false, nil); err != nil {
					t.Fatalf("exclusive consume next to others: %v", err)
				}
				ok, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
				if err != nil || ok.Consumers != 0 {
					t.Fatalf("declare-ok with 3 consumers: %+v %v, want 0 consumers", ok, err)
				}
				if _, err := ch.QueueDelete(q, true, false, false); err != nil {
					t.Fatalf("delete if-unused: %v", err)
				}
				if clQueueExists(t, conn, q) {
					t.Fatalf("the stream is still there")
				}
			},
		},
	)
}
