package conformance

import (
	"fmt"
	"time"
)

// The consumer acknowledgement timeout (RabbitMQ's consumer_timeout,
// 1800000 ms by default in 3.10): a channel holding a delivery
// unacknowledged for longer is closed by the broker with 406
// PRECONDITION_FAILED, class and method 0, and its deliveries are requeued
// as at any channel close. RabbitMQ checks each channel every minute
// (channel_tick_interval), so the close comes between the timeout and the
// timeout plus a minute after the delivery. Deliveries count whether they
// came from basic.consume or basic.get; no-ack deliveries and acked ones
// do not.

// ackCheckWindow is how long after the timeout a close may come:
// RabbitMQ's check interval, a minute, and some slack.
const ackCheckWindow = 60*time.Second + 10*time.Second

func init() {
	register(Case{
		Name:       "consumer-timeout/unacked-delivery-closes-channel-406",
		MinTimeout: func(tg Target) time.Duration { return tg.ConsumerTimeout + ackCheckWindow + 20*time.Second },
		Run: func(t T, tg Target) {
			limit := tg.ConsumerTimeout
			if limit <= 0 {
				t.Logf("SKIP: the target's consumer timeout is not known (Target.ConsumerTimeout)")
				return
			}
			c := openRaw(t, tg) // heartbeats off: the client stays silent
			c.openChannel(1)
			q := rawUniq("ack-timeout")
			c.sendMethod(1, mQDeclare, queueDeclareArgs(q, false, false, true, false))
			c.expect(1, mQDeclareOk)
			for _, b := range []string{"a", "b", "c", "d", "e"} {
				c.publishRaw(1, q, b)
			}
			c.sync(1)

			// Channel 2 consumes "a" and holds it; channel 3 gets "b"
			// and holds it; channel 5 gets "c" and acks it before the
			// timeout; channel 4 consumes without acks ("d", "e", then
			// what the closed channels requeue).
			sent := map[uint16]time.Time{}
			c.openChannel(2)
			c.sendMethod(2, mBasicQos, qosArgsN(1, false))
			c.expect(2, mBasicQosOk)
			sent[2] = time.Now()
			c.sendMethod(2, mBasicConsume, consumeArgs(q, "held", false, false, nil))
			c.expect(2, mBasicConsOk)
			if d := c.readDelivery(2); d.Body != "a" {
				t.Fatalf("channel 2: delivery %q, want a", d.Body)
			}
			c.openChannel(3)
			sent[3] = time.Now()
			if body, _, ok := c.getAck(3, q); !ok || body != "b" {
				t.Fatalf("channel 3: basic.get %q (ok %v), want b", body, ok)
			}
			c.openChannel(5)
			got5 := time.Now()
			body, tag5, ok := c.getAck(5, q)
			if !ok || body != "c" {
				t.Fatalf("channel 5: basic.get %q (ok %v), want c", body, ok)
			}
			c.openChannel(4)
			c.sendMethod(4, mBasicConsume, consumeArgs(q, "no-ack", true, false, nil))
			c.expect(4, mBasicConsOk)

			closed := map[uint16]time.Time{}
			var redelivered []string
			acked := false
			deadline := time.Now().Add(limit + ackCheckWindow)
			for len(closed) < 2 || len(redelivered) < 2 {
				wait := time.Until(deadline)
				if !acked {
					wait = min(wait, time.Until(got5.Add(limit/2)))
				}
				if wait <= 0 && !acked {
					c.sendMethod(5, mBasicAck, ackArgs(tag5, false))
					acked = true
					continue
				}
				f, err := c.readFrame(max(wait, time.Millisecond))
				if err != nil {
					if rawTimeoutErr(err) && !acked {
						continue
					}
					t.Fatalf("waiting %v for the timeout's closes (closed: %v, redelivered on channel 4: %v): %v",
						limit+ackCheckWindow, closed, redelivered, err)
				}
				if f.Type == frameHeartbeat {
					continue
				}
				m, args, isMethod := f.Method()
				switch {
				case isMethod && m == mChanClose && (f.Channel == 2 || f.Channel == 3):
					at := time.Now()
					ci := decodeClose(args)
					want := fmt.Sprintf("PRECONDITION_FAILED - delivery acknowledgement on channel %d timed out. "+
						"Timeout value used: %d ms. This timeout value can be configured, see consumers doc guide to learn more",
						f.Channel, limit.Milliseconds())
					if ci.Code != 406 || ci.Text != want || ci.ClassID != 0 || ci.MethodID != 0 {
						t.Errorf("channel %d: close %s, want 406 %q class=0 method=0", f.Channel, ci, want)
					}
					if held := at.Sub(sent[f.Channel]); held <= limit {
						t.Errorf("channel %d closed %v after its delivery, before the timeout (%v)", f.Channel, held, limit)
					} else {
						t.Logf("channel %d closed %v after its delivery", f.Channel, held.Round(time.Millisecond))
					}
					closed[f.Channel] = at
					c.sendMethod(f.Channel, mChanCloseOk, nil)
				case isMethod && m == mBasicDeliver && f.Channel == 4:
					r := &rbuf{b: args}
					r.shortstr()
					r.longlong()
					again := r.octet()&1 != 0
					b := string(c.readContent(4))
					if again {
						redelivered = append(redelivered, b)
					} else if b != "d" && b != "e" {
						t.Errorf("channel 4: first delivery of %q, want d or e", b)
					}
				default:
					t.Fatalf("while waiting for the timeout: %s", f)
				}
			}
			if !acked {
				t.Fatalf("the closes came before channel 5 acked")
			}
			if len(redelivered) != 2 || !(redelivered[0] == "a" && redelivered[1] == "b" || redelivered[0] == "b" && redelivered[1] == "a") {
				t.Errorf("redelivered on channel 4: %v, want a and b", redelivered)
			}
			// Channel 5 acked in time, channels 1 and 4 held nothing: all
			// still open.
			for _, ch := range []uint16{1, 4, 5} {
				c.sync(ch)
			}
			c.closeConn()
		},
	})
}

// getAck does basic.get with acks on ch and returns the body and delivery
// tag, or ok=false on get-empty.
func (c *rawConn) getAck(ch uint16, q string) (body string, tag uint64, ok bool) {
	c.t.Helper()
	c.sendMethod(ch, mBasicGet, basicGetArgs(q, false))
	f := c.next()
	m, args, isM := f.Method()
	if isM && m == (rawMethodID{60, 72}) && f.Channel == ch {
		return "", 0, false
	}
	if !isM || m != mBasicGetOk || f.Channel != ch {
		c.t.Fatalf("expected basic.get-ok or get-empty on %d, got %s", ch, f)
	}
	r := &rbuf{b: args}
	tag = r.longlong()
	return string(c.readContent(ch)), tag, true
}
