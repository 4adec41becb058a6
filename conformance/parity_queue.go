package conformance

import (
	"time"
)

// Delivery and queue semantics where Warren differed from RabbitMQ 3.10
// (issue 16): prefetch limits, transactions, connection close, single
// active consumer, length limits and expiry.

// rawQuiet is how long a case waits to see that nothing more arrives.
const rawQuiet = 400 * time.Millisecond

func qosArgsN(count uint16, global bool) []byte {
	return new(wbuf).long(0).short(count).bits(global).b
}

// declareQueueArgs declares a non-exclusive, auto-delete queue with args on
// ch and returns its name; it is deleted when the case ends.
func (c *rawConn) declareQueueArgs(t T, tg Target, ch uint16, args map[string]any) string {
	c.t.Helper()
	q := rawUniq("parity-q")
	c.sendMethod(ch, mQDeclare, queueDeclareArgsTable(q, false, false, false, args))
	c.expect(ch, mQDeclareOk)
	clCleanupQueue(t, tg, q)
	return q
}

// declareCount is a passive queue.declare on ch that returns message-count.
func (c *rawConn) declareCount(ch uint16, q string) uint32 {
	c.t.Helper()
	c.sendMethod(ch, mQDeclare, queueDeclareArgs(q, true, false, false, false))
	r := &rbuf{b: c.expect(ch, mQDeclareOk)}
	r.shortstr()
	return r.long()
}

// getBody does basic.get (no-ack) and returns the body and message-count,
// or ok=false on get-empty.
func (c *rawConn) getBody(ch uint16, q string) (body string, count uint32, ok bool) {
	c.t.Helper()
	c.sendMethod(ch, mBasicGet, basicGetArgs(q, true))
	f := c.next()
	m, args, isM := f.Method()
	if isM && m == (rawMethodID{60, 72}) && f.Channel == ch {
		return "", 0, false
	}
	if !isM || m != mBasicGetOk || f.Channel != ch {
		c.t.Fatalf("expected basic.get-ok or get-empty on %d, got %s", ch, f)
	}
	r := &rbuf{b: args}
	r.longlong()
	r.octet()
	r.shortstr()
	r.shortstr()
	count = r.long()
	return string(c.readContent(ch)), count, true
}

// publishTTL publishes body to q with the expiration property.
func (c *rawConn) publishTTL(ch uint16, q, body, expiration string) {
	c.t.Helper()
	var w wbuf
	w.short(rawClassBasic).short(0).longlong(uint64(len(body))).short(0x0100).shortstr(expiration)
	c.sendMethod(ch, mBasicPublish, publishArgs("", q, false))
	c.sendFrame(frameHeader, ch, w.b)
	c.sendFrame(frameBody, ch, []byte(body))
}

// sync waits for a basic.qos round trip on ch, so that what was sent
// before it has been handled.
func (c *rawConn) sync(ch uint16) {
	c.t.Helper()
	c.sendMethod(ch, mBasicQos, qosArgs())
	c.expect(ch, mBasicQosOk)
}

// collectDeliveries reads deliveries on any channel until rawQuiet passes
// without a frame; it fails on anything but deliveries.
func (c *rawConn) collectDeliveries() map[uint16][]rawDelivery {
	c.t.Helper()
	out := map[uint16][]rawDelivery{}
	for {
		f, err := c.readFrame(rawQuiet)
		if err != nil {
			if rawTimeoutErr(err) {
				return out
			}
			c.t.Fatalf("read: %v", err)
		}
		if f.Type == frameHeartbeat {
			continue
		}
		m, args, ok := f.Method()
		if !ok || m != mBasicDeliver {
			c.t.Fatalf("expected basic.deliver, got %s", f)
		}
		r := &rbuf{b: args}
		r.shortstr()
		d := rawDelivery{Method: m, Tag: r.longlong(), Redelivered: r.octet()&1 != 0}
		d.Body = string(c.readContent(f.Channel))
		out[f.Channel] = append(out[f.Channel], d)
	}
}

// collectDeliveriesAround is collectDeliveries that also takes method m
// on channel ch, which must arrive among the deliveries.
func (c *rawConn) collectDeliveriesAround(ch uint16, m rawMethodID) map[uint16][]rawDelivery {
	c.t.Helper()
	out := map[uint16][]rawDelivery{}
	seen := false
	for {
		f, err := c.readFrame(rawQuiet)
		if err != nil {
			if rawTimeoutErr(err) && seen {
				return out
			}
			c.t.Fatalf("read (%s seen: %v): %v", m, seen, err)
		}
		if f.Type == frameHeartbeat {
			continue
		}
		got, args, ok := f.Method()
		if ok && got == m && f.Channel == ch {
			seen = true
			continue
		}
		if !ok || got != mBasicDeliver {
			c.t.Fatalf("expected basic.deliver or %s, got %s", m, f)
		}
		r := &rbuf{b: args}
		r.shortstr()
		d := rawDelivery{Method: got, Tag: r.longlong(), Redelivered: r.octet()&1 != 0}
		d.Body = string(c.readContent(f.Channel))
		out[f.Channel] = append(out[f.Channel], d)
	}
}

func bodies(ds []rawDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out
}

func init() {
	// 7. basic.qos per consumer (global=false) and per channel
	// (global=true) together: a delivery needs credit under both. With a
	// consumer limit of 2 and a channel limit of 3, two consumers on one
	// channel get 3 messages between them, the first at most 2.
	register(Case{Name: "parity/qos-consumer-and-channel-limits-both-apply", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q1 := c.declareTempQueue(1)
		q2 := c.declareTempQueue(1)
		for i := 0; i < 5; i++ {
			c.publishRaw(1, q1, "a")
			c.publishRaw(1, q2, "b")
		}
		c.sync(1)
		c.openChannel(2)
		c.sendMethod(2, mBasicQos, qosArgsN(2, false))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicQos, qosArgsN(3, true))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicConsume, consumeArgs(q1, "c1", false, false, nil))
		c.expect(2, mBasicConsOk)
		got := c.collectDeliveries()[2]
		if len(got) != 2 {
			t.Fatalf("first consumer got %d deliveries, want 2 (its own limit)", len(got))
		}
		c.sendMethod(2, mBasicConsume, consumeArgs(q2, "c2", false, false, nil))
		c.expect(2, mBasicConsOk)
		more := c.collectDeliveries()[2]
		if len(more) != 1 {
			t.Fatalf("second consumer got %d deliveries, want 1 (the channel's limit of 3)", len(more))
		}
		// An ack of one of the first consumer's messages frees one unit of
		// both: exactly one more delivery.
		c.sendMethod(2, mBasicAck, ackArgs(got[0].Tag, false))
		if n := len(c.collectDeliveries()[2]); n != 1 {
			t.Fatalf("after one ack %d deliveries, want 1", n)
		}
		c.closeConn()
	}})

	// Set the other way round, the consumer limit lifts the channel's:
	// RabbitMQ's basic.qos global=false removes a channel-wide prefetch
	// limit set before it. With a channel limit of 2 and then a consumer
	// limit of 3, each consumer gets 3.
	register(Case{Name: "parity/qos-consumer-limit-lifts-earlier-channel-limit", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		for i := 0; i < 8; i++ {
			c.publishRaw(1, q, "m")
		}
		c.sync(1)
		c.openChannel(2)
		c.sendMethod(2, mBasicQos, qosArgsN(2, true))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicQos, qosArgsN(3, false))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicConsume, consumeArgs(q, "c1", false, false, nil))
		c.expect(2, mBasicConsOk)
		got := c.collectDeliveries()[2]
		if len(got) != 3 {
			t.Fatalf("first consumer got %d deliveries, want 3 (its own limit)", len(got))
		}
		c.sendMethod(2, mBasicConsume, consumeArgs(q, "c2", false, false, nil))
		c.expect(2, mBasicConsOk)
		if n := len(c.collectDeliveries()[2]); n != 3 {
			t.Fatalf("second consumer got %d deliveries, want 3 (its own limit)", n)
		}
		c.sendMethod(2, mBasicAck, ackArgs(got[1].Tag, true))
		if n := len(c.collectDeliveries()[2]); n != 2 {
			t.Fatalf("after acking both %d deliveries, want 2", n)
		}
		c.closeConn()
	}})

	// 11. Acks inside a transaction free prefetch credit only at commit:
	// with prefetch 1 the next delivery follows commit-ok, not the ack.
	register(Case{Name: "parity/tx-ack-frees-credit-at-commit", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.publishRaw(1, q, "a")
		c.publishRaw(1, q, "b")
		c.sendMethod(1, mTxSelect, nil)
		c.expect(1, mTxSelectOk)
		c.sendMethod(1, mBasicQos, qosArgsN(1, false))
		c.expect(1, mBasicQosOk)
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "c", false, false, nil))
		c.expect(1, mBasicConsOk)
		d := c.readDelivery(1)
		if d.Body != "a" {
			t.Fatalf("first delivery %q, want a", d.Body)
		}
		c.sendMethod(1, mBasicAck, ackArgs(d.Tag, false))
		if ds := c.collectDeliveries()[1]; len(ds) != 0 {
			t.Fatalf("%d deliveries after an uncommitted ack, want none before tx.commit", len(ds))
		}
		c.sendMethod(1, mTxCommit, nil)
		c.expect(1, mTxCommitOk)
		if d := c.readDelivery(1); d.Body != "b" {
			t.Fatalf("delivery after commit %q, want b", d.Body)
		}
		c.closeConn()
	}})
	// A rolled-back ack gives no credit either: the message is unacked
	// again and nothing more is delivered.
	register(Case{Name: "parity/tx-rollback-ack-keeps-credit-used", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.publishRaw(1, q, "a")
		c.publishRaw(1, q, "b")
		c.sendMethod(1, mTxSelect, nil)
		c.expect(1, mTxSelectOk)
		c.sendMethod(1, mBasicQos, qosArgsN(1, false))
		c.expect(1, mBasicQosOk)
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "c", false, false, nil))
		c.expect(1, mBasicConsOk)
		d := c.readDelivery(1)
		c.sendMethod(1, mBasicAck, ackArgs(d.Tag, false))
		c.sendMethod(1, rawMethodID{90, 30}, nil)
		c.expect(1, rawMethodID{90, 31})
		if ds := c.collectDeliveries()[1]; len(ds) != 0 {
			t.Fatalf("%d deliveries after a rolled-back ack, want none", len(ds))
		}
		// The ack after the rollback counts at the next commit.
		c.sendMethod(1, mBasicAck, ackArgs(d.Tag, false))
		c.sendMethod(1, mTxCommit, nil)
		c.expect(1, mTxCommitOk)
		if d := c.readDelivery(1); d.Body != "b" {
			t.Fatalf("delivery after commit %q, want b", d.Body)
		}
		c.closeConn()
	}})

	// 12. Once the client sent connection.close, none of the connection's
	// channels gets another delivery: a message that one channel's close
	// requeues does not go to a sibling channel.
	register(Case{Name: "parity/connection-close-no-delivery-to-siblings", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareQueueArgs(t, tg, 1, nil)
		c.publishRaw(1, q, "a")
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "holder", false, false, nil))
		c.expect(1, mBasicConsOk)
		c.readDelivery(1)
		for ch := uint16(2); ch <= 9; ch++ {
			c.openChannel(ch)
			c.sendMethod(ch, mBasicConsume, consumeArgs(q, "sib", false, false, nil))
			c.expect(ch, mBasicConsOk)
		}
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		for {
			f := c.next()
			if m, _, ok := f.Method(); ok && m == mConnCloseOk {
				break
			}
			t.Fatalf("after connection.close got %s, want only close-ok", f)
		}
		// The message went back to the queue.
		o := openRaw(t, tg)
		o.openChannel(1)
		if body, _, ok := o.getBody(1, q); !ok || body != "a" {
			t.Fatalf("get %q %v, want a", body, ok)
		}
		o.closeConn()
	}})

	// 13. Single active consumer: when the active consumer's channel
	// closes, its unacknowledged messages go to the next consumer first,
	// in their original order and redelivered, ahead of newer messages.
	register(Case{Name: "parity/sac-handover-unacked-first-in-order", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareQueueArgs(t, tg, 1, map[string]any{"x-single-active-consumer": true})
		c.openChannel(2)
		c.sendMethod(2, mBasicQos, qosArgsN(2, false))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicConsume, consumeArgs(q, "active", false, false, nil))
		c.expect(2, mBasicConsOk)
		c.openChannel(3)
		c.sendMethod(3, mBasicConsume, consumeArgs(q, "next", false, false, nil))
		c.expect(3, mBasicConsOk)
		for _, b := range []string{"m1", "m2", "m3", "m4"} {
			c.publishRaw(1, q, b)
		}
		first := c.collectDeliveries()
		if got := bodies(first[2]); len(got) != 2 || got[0] != "m1" || got[1] != "m2" || len(first[3]) != 0 {
			t.Fatalf("active got %v, next got %v; want m1 m2 and nothing", got, bodies(first[3]))
		}
		c.sendMethod(2, mChanClose, closeArgs(200, "bye", 0, 0))
		got := c.collectDeliveriesAround(2, mChanCloseOk)[3]
		want := []struct {
			body string
			re   bool
		}{{"m1", true}, {"m2", true}, {"m3", false}, {"m4", false}}
		if len(got) != len(want) {
			t.Fatalf("next consumer got %v, want m1 m2 m3 m4", bodies(got))
		}
		for i, w := range want {
			if got[i].Body != w.body || got[i].Redelivered != w.re {
				t.Fatalf("delivery %d: %+v, want %s redelivered=%v", i, got[i], w.body, w.re)
			}
		}
		c.closeConn()
	}})
	// An exclusive basic.consume on a single-active-consumer queue:
	// channel.close 403 ACCESS_REFUSED class 60 method 20.
	register(Case{Name: "parity/sac-exclusive-consume-403", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareQueueArgs(t, tg, 1, map[string]any{"x-single-active-consumer": true})
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "x", false, true, nil))
		c.expectChanClose(1, 403, 60, 20)
		c.closeConn()
	}})

	// 14. x-max-length and x-max-length-bytes count ready messages only:
	// unacknowledged ones do not take room.
	for _, lim := range []struct {
		name string
		args map[string]any
	}{
		{"max-length", map[string]any{"x-max-length": int32(2)}},
		{"max-length-bytes", map[string]any{"x-max-length-bytes": int32(4)}},
	} {
		for _, durable := range []bool{false, true} {
			lim, durable := lim, durable
			name := "parity/" + lim.name + "-counts-ready-only"
			if durable {
				name += "-durable"
			}
			register(Case{Name: name, Run: func(t T, tg Target) {
				c := openRaw(t, tg)
				c.openChannel(1)
				q := rawUniq("parity-len")
				c.sendMethod(1, mQDeclare, queueDeclareArgsTable(q, durable, false, false, lim.args))
				c.expect(1, mQDeclareOk)
				clCleanupQueue(t, tg, q)
				c.publishRaw(1, q, "m1")
				c.publishRaw(1, q, "m2")
				c.sync(1)
				c.openChannel(2)
				c.sendMethod(2, mBasicQos, qosArgsN(2, false))
				c.expect(2, mBasicQosOk)
				c.sendMethod(2, mBasicConsume, consumeArgs(q, "c", false, false, nil))
				c.expect(2, mBasicConsOk)
				if got := bodies(c.collectDeliveries()[2]); len(got) != 2 {
					t.Fatalf("consumer got %v, want m1 m2", got)
				}
				// Two unacked; two more fit as ready, the fifth drops m3.
				for _, b := range []string{"m3", "m4", "m5"} {
					c.publishRaw(1, q, b)
				}
				c.sync(1)
				// RabbitMQ's queue process may still be taking the
				// publishes in when the channel answers; its count
				// settles within moments.
				n := c.declareCount(1, q)
				for deadline := time.Now().Add(3 * time.Second); n != 2 && time.Now().Before(deadline); {
					time.Sleep(50 * time.Millisecond)
					n = c.declareCount(1, q)
				}
				if n != 2 {
					t.Fatalf("message-count %d, want 2 (m4 m5)", n)
				}
				// Requeued, m1 and m2 go back to the head and drop-head
				// removes them again.
				c.sendMethod(2, mChanClose, closeArgs(200, "bye", 0, 0))
				c.expect(2, mChanCloseOk)
				var got []string
				for {
					b, _, ok := c.getBody(1, q)
					if !ok {
						break
					}
					got = append(got, b)
				}
				if len(got) != 2 || got[0] != "m4" || got[1] != "m5" {
					t.Fatalf("after the requeue the queue holds %v, want m4 m5", got)
				}
				c.closeConn()
			}})
		}
	}

	// 15. Expired messages are never counted: when a get removes the head
	// and an expired message becomes the head, it is dropped (and
	// dead-lettered) before basic.get-ok reports message-count.
	register(Case{Name: "parity/expired-head-dropped-before-get-count", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		dlq := c.declareQueueArgs(t, tg, 1, nil)
		q := c.declareQueueArgs(t, tg, 1, map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		c.publishRaw(1, q, "live")
		c.publishTTL(1, q, "dies", "1")
		c.publishRaw(1, q, "tail")
		c.sync(1)
		time.Sleep(50 * time.Millisecond) // "dies" is past its 1 ms TTL
		body, count, ok := c.getBody(1, q)
		if !ok || body != "live" || count != 1 {
			t.Fatalf("get: %q count %d ok %v, want live with message-count 1", body, count, ok)
		}
		if body, _, ok := c.getBody(1, dlq); !ok || body != "dies" {
			t.Fatalf("dead-letter queue: %q %v, want dies", body, ok)
		}
		c.closeConn()
	}})
	register(Case{Name: "parity/expired-head-dropped-before-declare-count", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareQueueArgs(t, tg, 1, nil)
		c.publishRaw(1, q, "live")
		c.publishTTL(1, q, "dies", "1")
		c.sync(1)
		c.openChannel(2)
		c.sendMethod(2, mBasicQos, qosArgsN(1, false))
		c.expect(2, mBasicQosOk)
		c.sendMethod(2, mBasicConsume, consumeArgs(q, "c", false, false, nil))
		c.expect(2, mBasicConsOk)
		if d := c.readDelivery(2); d.Body != "live" {
			t.Fatalf("delivery %q, want live", d.Body)
		}
		time.Sleep(50 * time.Millisecond)
		if n := c.declareCount(1, q); n != 0 {
			t.Fatalf("message-count %d, want 0", n)
		}
		c.closeConn()
	}})
}
