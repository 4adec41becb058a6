package conformance

import (
	"strconv"
	"strings"
	"time"
)

// Protocol details found by replaying the same raw-frame scenarios against
// RabbitMQ 3.10.8 and Warren and comparing the transcripts (issue 16). The
// reply texts quoted are RabbitMQ's.

var (
	mExchUnbind   = rawMethodID{40, 40}
	mExchUnbindOk = rawMethodID{40, 51}
	mQBind        = rawMethodID{50, 20}
	mQBindOk      = rawMethodID{50, 21}
	mQUnbind      = rawMethodID{50, 50}
	mQUnbindOk    = rawMethodID{50, 51}
	mBasicConsume = rawMethodID{60, 20}
	mBasicConsOk  = rawMethodID{60, 21}
	mBasicDeliver = rawMethodID{60, 60}
	mBasicAck     = rawMethodID{60, 80}
	mBasicRecover = rawMethodID{60, 110}
	mBasicRecOk   = rawMethodID{60, 111}
	mTxSelect     = rawMethodID{90, 10}
	mTxSelectOk   = rawMethodID{90, 11}
	mTxCommit     = rawMethodID{90, 20}
	mTxCommitOk   = rawMethodID{90, 21}
)

func consumeArgs(queue, tag string, noAck, exclusive bool, args map[string]any) []byte {
	var w wbuf
	w.short(0).shortstr(queue).shortstr(tag).bits(false, noAck, exclusive, false).table(args)
	return w.b
}

func queueBindArgs(queue, exchange, key string) []byte {
	var w wbuf
	w.short(0).shortstr(queue).shortstr(exchange).shortstr(key).bits(false).table(nil)
	return w.b
}

func queueUnbindArgs(queue, exchange, key string) []byte {
	var w wbuf
	w.short(0).shortstr(queue).shortstr(exchange).shortstr(key).table(nil)
	return w.b
}

func exchangeBindArgs(dst, src, key string) []byte {
	var w wbuf
	w.short(0).shortstr(dst).shortstr(src).shortstr(key).bits(false).table(nil)
	return w.b
}

func queueDeclareArgsTable(name string, durable, exclusive, autoDelete bool, args map[string]any) []byte {
	var w wbuf
	w.short(0).shortstr(name).bits(false, durable, exclusive, autoDelete, false).table(args)
	return w.b
}

// contentHeaderDeliveryMode is a basic content header whose only property
// is delivery-mode dm.
func contentHeaderDeliveryMode(bodySize uint64, dm uint8) []byte {
	var w wbuf
	w.short(rawClassBasic).short(0).longlong(bodySize).short(0x1000).octet(dm)
	return w.b
}

// publishRaw sends basic.publish of body to the default exchange with key.
func (c *rawConn) publishRaw(ch uint16, key, body string) {
	c.t.Helper()
	c.sendMethod(ch, mBasicPublish, publishArgs("", key, false))
	c.sendFrame(frameHeader, ch, contentHeader(uint64(len(body))))
	if body != "" {
		c.sendFrame(frameBody, ch, []byte(body))
	}
}

// rawDelivery is a basic.deliver or basic.get-ok read by readDelivery.
type rawDelivery struct {
	Method      rawMethodID
	Tag         uint64
	Redelivered bool
	Body        string
}

// readDelivery reads a basic.deliver with its content on ch.
func (c *rawConn) readDelivery(ch uint16) rawDelivery {
	c.t.Helper()
	args := c.expect(ch, mBasicDeliver)
	r := &rbuf{b: args}
	r.shortstr()
	d := rawDelivery{Method: mBasicDeliver, Tag: r.longlong(), Redelivered: r.octet()&1 != 0}
	d.Body = string(c.readContent(ch))
	return d
}

// readContent reads a content header and its body frames on ch.
func (c *rawConn) readContent(ch uint16) []byte {
	c.t.Helper()
	f := c.next()
	if f.Type != frameHeader || f.Channel != ch {
		c.t.Fatalf("expected content header on channel %d, got %s", ch, f)
	}
	r := &rbuf{b: f.Payload}
	r.short()
	r.short()
	size := r.longlong()
	var body []byte
	for uint64(len(body)) < size {
		f := c.next()
		if f.Type != frameBody || f.Channel != ch {
			c.t.Fatalf("expected content body on channel %d, got %s", ch, f)
		}
		body = append(body, f.Payload...)
	}
	return body
}

// isRabbitMQ reports whether the broker behind c says it is RabbitMQ.
func (c *rawConn) isRabbitMQ() bool {
	p, _ := c.Start.Props["product"].(string)
	return p == "RabbitMQ"
}

// ackArgs encodes basic.ack.
func ackArgs(tag uint64, multiple bool) []byte {
	return new(wbuf).longlong(tag).bits(multiple).b
}

func init() {
	// 1. Hard errors caused by a method name it in connection.close.

	// A consumer tag in use on the channel: 530 "NOT_ALLOWED - attempt to
	// reuse consumer tag '<tag>'" class 60 method 20.
	connErrCase("parity/consume-duplicate-tag-530-names-method", func(c *rawConn) {
		q := c.declareTempQueue(1)
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "dup", false, false, nil))
		c.expect(1, mBasicConsOk)
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "dup", false, false, nil))
	}, 530, 60, 20)
	// An unknown exchange type: 503 "COMMAND_INVALID - unknown exchange
	// type 'x-nonsense'" class 40 method 10; so is an empty one.
	connErrCase("parity/exchange-declare-unknown-type-503-names-method", func(c *rawConn) {
		c.sendMethod(1, mExDeclare, exchangeDeclareArgs(rawUniq("ex"), "x-nonsense", false))
	}, 503, 40, 10)
	connErrCase("parity/exchange-declare-empty-type-503-names-method", func(c *rawConn) {
		c.sendMethod(1, mExDeclare, exchangeDeclareArgs(rawUniq("ex"), "", false))
	}, 503, 40, 10)
	// basic.qos prefetch-size != 0: 540 "NOT_IMPLEMENTED - prefetch_size!=0
	// (1000)" class 60 method 10.
	connErrCase("parity/qos-prefetch-size-540-names-method", func(c *rawConn) {
		c.sendMethod(1, mBasicQos, new(wbuf).long(1000).short(0).bits(false).b)
	}, 540, 60, 10)
	// basic.recover requeue=false: 540 "NOT_IMPLEMENTED - requeue=false"
	// class 60 method 110.
	connErrCase("parity/recover-no-requeue-540-names-method", func(c *rawConn) {
		c.sendMethod(1, mBasicRecover, new(wbuf).bits(false).b)
	}, 540, 60, 110)
	// channel.flow active=false: 540 class 20 method 20.
	connErrCase("parity/flow-inactive-540-names-method", func(c *rawConn) {
		c.sendMethod(1, mChanFlow, new(wbuf).bits(false).b)
	}, 540, 20, 20)

	// 4. Content frames.

	// A content header with a non-zero weight is not a content header to
	// RabbitMQ: 505 "UNEXPECTED_FRAME - expected content header for class
	// 60, got non content header frame instead" class 60 method 40.
	connErrCase("parity/content-header-nonzero-weight-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, new(wbuf).short(rawClassBasic).short(1).longlong(3).short(0).b)
	}, 505, 60, 40)
	// A second content header where a body is expected: 505
	// "UNEXPECTED_FRAME - expected content body, got non content body frame
	// instead" class 60 method 40.
	connErrCase("parity/second-content-header-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendFrame(frameHeader, 1, contentHeader(3))
	}, 505, 60, 40)
	// A heartbeat frame where a body is expected is not an error.
	register(Case{Name: "parity/heartbeat-inside-content-accepted", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
		c.sendFrame(frameHeader, 1, contentHeader(2))
		c.sendFrame(frameHeartbeat, 0, nil)
		c.sendFrame(frameBody, 1, []byte("ok"))
		if got := c.basicGetBody(1, q); string(got) != "ok" {
			t.Fatalf("body %q, want ok", got)
		}
		c.closeConn()
	}})
}

// unbindCase registers a case that runs setup on channel 1 of a fresh raw
// connection, sends the unbind it returns and expects unbind-ok (the
// channel stays usable).
func unbindCase(name string, setup func(t T, tg Target, c *rawConn) (rawMethodID, []byte)) {
	register(Case{Name: name, Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		m, args := setup(t, tg, c)
		c.sendMethod(1, m, args)
		want := mQUnbindOk
		if m == mExchUnbind {
			want = mExchUnbindOk
		}
		c.expect(1, want)
		c.declareTempQueue(1)
		c.closeConn()
	}})
}

func init() {
	// 2. Unbind is idempotent: unbinding what is not there answers
	// unbind-ok.
	unbindCase("parity/queue-unbind-missing-binding-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		q := c.declareTempQueue(1)
		return mQUnbind, queueUnbindArgs(q, "amq.direct", rawUniq("key"))
	})
	unbindCase("parity/queue-unbind-missing-exchange-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		q := c.declareTempQueue(1)
		return mQUnbind, queueUnbindArgs(q, rawUniq("no-such-ex"), "k")
	})
	unbindCase("parity/queue-unbind-missing-queue-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		return mQUnbind, queueUnbindArgs(rawUniq("no-such-q"), "amq.direct", "k")
	})
	unbindCase("parity/queue-unbind-missing-both-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		return mQUnbind, queueUnbindArgs(rawUniq("no-such-q"), rawUniq("no-such-ex"), "k")
	})
	// Another connection's exclusive queue: with no such binding the
	// unbind is a no-op (unbind-ok); removing a binding that exists is 405
	// "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue
	// ..." class 50 method 50.
	for _, bound := range []bool{true, false} {
		bound := bound
		name := "parity/queue-unbind-other-connections-exclusive-queue-405"
		if !bound {
			name = "parity/queue-unbind-other-connections-exclusive-queue-unbound-ok"
		}
		register(Case{Name: name, Run: func(t T, tg Target) {
			o := openRaw(t, tg)
			o.openChannel(1)
			q := o.declareTempQueue(1)
			if bound {
				o.sendMethod(1, mQBind, queueBindArgs(q, "amq.direct", "k"))
				o.expect(1, mQBindOk)
			}
			c := openRaw(t, tg)
			c.openChannel(1)
			c.sendMethod(1, mQUnbind, queueUnbindArgs(q, "amq.direct", "k"))
			if bound {
				c.expectChanClose(1, 405, 50, 50)
			} else {
				c.expect(1, mQUnbindOk)
			}
			c.closeConn()
		}})
	}
	unbindCase("parity/exchange-unbind-missing-binding-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		return mExchUnbind, exchangeBindArgs("amq.fanout", "amq.direct", rawUniq("key"))
	})
	unbindCase("parity/exchange-unbind-missing-source-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		return mExchUnbind, exchangeBindArgs("amq.fanout", rawUniq("no-such-ex"), "k")
	})
	unbindCase("parity/exchange-unbind-missing-destination-ok", func(t T, tg Target, c *rawConn) (rawMethodID, []byte) {
		return mExchUnbind, exchangeBindArgs(rawUniq("no-such-ex"), "amq.direct", "k")
	})

	// 6. delivery-mode other than absent, 1 or 2: channel.close 406
	// "PRECONDITION_FAILED - invalid message: {delivery_mode_unknown,N}"
	// class 60 method 40.
	for _, dm := range []uint8{0, 3, 255} {
		dm := dm
		register(Case{Name: "parity/publish-delivery-mode-" + strconv.Itoa(int(dm)) + "-406", Run: func(t T, tg Target) {
			c := openRaw(t, tg)
			c.openChannel(1)
			q := c.declareTempQueue(1)
			c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
			c.sendFrame(frameHeader, 1, contentHeaderDeliveryMode(1, dm))
			c.sendFrame(frameBody, 1, []byte("x"))
			ci := c.expectChanClose(1, 406, 60, 40)
			if want := "PRECONDITION_FAILED - invalid message: {delivery_mode_unknown," + strconv.Itoa(int(dm)) + "}"; ci.Text != want {
				t.Errorf("reply text %q, want %q", ci.Text, want)
			}
			c.openChannel(2)
			c.sendMethod(2, mBasicGet, basicGetArgs(q, true))
			c.expect(2, rawMethodID{60, 72}) // get-empty: nothing was enqueued
			c.closeConn()
		}})
	}
	// delivery-mode 1 and 2 are accepted.
	register(Case{Name: "parity/publish-delivery-mode-1-2-accepted", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		for _, dm := range []uint8{1, 2} {
			c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
			c.sendFrame(frameHeader, 1, contentHeaderDeliveryMode(1, dm))
			c.sendFrame(frameBody, 1, []byte{'0' + dm})
			if got := c.basicGetBody(1, q); string(got) != string('0'+rune(dm)) {
				t.Fatalf("body %q", got)
			}
		}
		c.closeConn()
	}})

	// 8. A passive queue.declare with an empty name does not mean the last
	// declared queue: 404 "NOT_FOUND - no queue '' in vhost '/'" class 50
	// method 10, even right after a server-named declare.
	register(Case{Name: "parity/queue-declare-passive-empty-name-404", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.expect(1, mQDeclareOk)
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", true, false, false, false))
		c.expectChanClose(1, 404, 50, 10)
		c.closeConn()
	}})

	// 9. Queue arguments. x-queue-mode other than default and lazy: 406
	// "PRECONDITION_FAILED - invalid arg 'x-queue-mode' for queue '<name>'
	// in vhost '/': {unsupported_queue_mode,<<"fast">>}" class 50 method 10.
	register(Case{Name: "parity/queue-declare-bad-queue-mode-406", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mQDeclare, queueDeclareArgsTable(rawUniq("qm"), false, true, true, map[string]any{"x-queue-mode": "fast"}))
		ci := c.expectChanClose(1, 406, 50, 10)
		if !strings.Contains(ci.Text, "x-queue-mode") {
			t.Errorf("reply text %q does not name x-queue-mode", ci.Text)
		}
		c.openChannel(1)
		for _, mode := range []string{"default", "lazy"} {
			c.sendMethod(1, mQDeclare, queueDeclareArgsTable(rawUniq("qm"), false, true, true, map[string]any{"x-queue-mode": mode}))
			c.expect(1, mQDeclareOk)
		}
		c.closeConn()
	}})
	// An unknown x-queue-master-locator on a non-exclusive queue: RabbitMQ
	// 3.10 crashes on it (connection.close 541 INTERNAL_ERROR, the queue is
	// not created); Warren refuses it with channel.close 406
	// PRECONDITION_FAILED class 50 method 10, the code RabbitMQ gives an
	// invalid queue argument. (RabbitMQ does not look at the locator of an
	// exclusive queue; Warren refuses the value there too.) Known locators
	// (client-local, min-masters, random) are accepted.
	register(Case{Name: "parity/queue-declare-bad-master-locator-refused", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mQDeclare, queueDeclareArgsTable(rawUniq("ml"), false, false, true, map[string]any{"x-queue-master-locator": "nearest"}))
		f := c.next()
		m, args, ok := f.Method()
		if !ok || (m != mChanClose && m != mConnClose) {
			t.Fatalf("expected a close, got %s", f)
		}
		ci := decodeClose(args)
		t.Logf("%s: %s", m, ci)
		switch {
		case c.isRabbitMQ() && ci.Code == 541:
			// RabbitMQ's own crash.
			return
		case m == mChanClose:
			c.checkClose("channel.close", ci, 406, 50, 10)
			c.sendMethod(1, mChanCloseOk, nil)
		default:
			t.Fatalf("want channel.close 406, got connection.close %s", ci)
		}
		c.openChannel(1)
		for _, loc := range []string{"client-local", "min-masters", "random"} {
			c.sendMethod(1, mQDeclare, queueDeclareArgsTable(rawUniq("ml"), false, true, true, map[string]any{"x-queue-master-locator": loc}))
			c.expect(1, mQDeclareOk)
		}
		c.closeConn()
	}})

	// 10. basic.recover: recover-ok goes out before the redeliveries.
	register(Case{Name: "parity/recover-ok-before-redeliveries", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.publishRaw(1, q, "a")
		c.publishRaw(1, q, "b")
		c.sendMethod(1, mBasicConsume, consumeArgs(q, "c", false, false, nil))
		c.expect(1, mBasicConsOk)
		for _, want := range []string{"a", "b"} {
			if d := c.readDelivery(1); d.Body != want || d.Redelivered {
				t.Fatalf("delivery %+v, want %q not redelivered", d, want)
			}
		}
		c.sendMethod(1, mBasicRecover, new(wbuf).bits(true).b)
		c.expect(1, mBasicRecOk)
		for _, want := range []string{"a", "b"} {
			if d := c.readDelivery(1); d.Body != want || !d.Redelivered {
				t.Fatalf("delivery %+v, want %q redelivered", d, want)
			}
		}
		c.closeConn()
	}})

	// 5. Handshake order. Once tune-ok is in, a connection method other
	// than connection.open (close, close-ok, start-ok or tune-ok again) is
	// answered with connection.close 504 "CHANNEL_ERROR - unexpected method
	// in connection state opening" naming that method.
	for _, a := range []struct {
		name string
		m    rawMethodID
		args func(c *rawConn) []byte
	}{
		{"close", mConnClose, func(c *rawConn) []byte { return closeArgs(200, "bye", 0, 0) }},
		{"close-ok", mConnCloseOk, func(c *rawConn) []byte { return nil }},
		{"start-ok", mConnStartOk, func(c *rawConn) []byte {
			return startOkArgs(rawClientProps(true), "PLAIN", plainResponse(c.user, c.pass), "en_US")
		}},
		{"tune-ok", mConnTuneOk, func(c *rawConn) []byte { return tuneOkArgs(c.Tune.ChannelMax, c.Tune.FrameMax, 0) }},
	} {
		a := a
		register(Case{Name: "parity/" + a.name + "-before-open-504", Run: func(t T, tg Target) {
			c := dialRaw(t, tg)
			c.handshakeTo()
			c.sendMethod(0, a.m, a.args(c))
			c.expectConnClose(504, a.m.class, a.m.method)
		}})
	}
	// Before tune-ok, connection.close gets no answer: the socket is
	// closed at once.
	register(Case{Name: "parity/close-instead-of-start-ok-silent", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		c.expectSilentClose(rawSilentClose)
	}})
	register(Case{Name: "parity/close-instead-of-tune-ok-silent", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		c.expectSilentClose(rawSilentClose)
	}})
	// After a hard error RabbitMQ keeps the socket open until close-ok
	// (for a bounded time): the connection.close arrives, and the socket
	// is still open a moment later.
	register(Case{Name: "parity/hard-error-waits-for-close-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mBasicRecover, new(wbuf).bits(false).b)
		ci := c.readConnClose()
		c.checkClose("connection.close", ci, 540, 60, 110)
		c.expectSilence(500 * time.Millisecond)
		c.sendMethod(0, mConnCloseOk, nil)
		c.expectEOF(rawCloseWait)
	}})
}

// expirationHeader is a basic content header whose only property is
// expiration exp.
func expirationHeader(bodySize uint64, exp string) []byte {
	var w wbuf
	w.short(rawClassBasic).short(0).longlong(bodySize).short(0x0100).shortstr(exp)
	return w.b
}

func init() {
	// Next to point 6: the expiration property as RabbitMQ reads it (an
	// integer by Erlang's string:to_integer). Refused with channel.close
	// 406 "PRECONDITION_FAILED - invalid expiration '<exp>': <reason>"
	// class 60 method 40.
	for _, c := range []struct{ name, exp, reason string }{
		{"negative", "-1", "{value_negative,-1}"},
		{"fraction", "1.5", `{leftover_string,".5"}`},
		{"letters", "abc", "no_integer"},
		{"empty", "", "no_integer"},
		{"leading-space", " 5", "no_integer"},
	} {
		c := c
		register(Case{Name: "parity/publish-expiration-" + c.name + "-406", Run: func(t T, tg Target) {
			rc := openRaw(t, tg)
			rc.openChannel(1)
			q := rc.declareTempQueue(1)
			rc.sendMethod(1, mBasicPublish, publishArgs("", q, false))
			rc.sendFrame(frameHeader, 1, expirationHeader(1, c.exp))
			rc.sendFrame(frameBody, 1, []byte("x"))
			ci := rc.expectChanClose(1, 406, 60, 40)
			if want := "PRECONDITION_FAILED - invalid expiration '" + c.exp + "': " + c.reason; ci.Text != want {
				t.Errorf("reply text %q, want %q", ci.Text, want)
			}
			rc.closeConn()
		}})
	}
	// A TTL beyond 32 bits, and a signed one, are accepted.
	register(Case{Name: "parity/publish-expiration-large-and-signed-accepted", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		for _, exp := range []string{"99999999999", "+60000"} {
			c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
			c.sendFrame(frameHeader, 1, expirationHeader(1, exp))
			c.sendFrame(frameBody, 1, []byte("x"))
			if got := c.basicGetBody(1, q); string(got) != "x" {
				t.Fatalf("expiration %q: body %q", exp, got)
			}
		}
		c.closeConn()
	}})

	// Next to point 9: x-queue-version is 1 or 2: 406 "PRECONDITION_FAILED
	// - invalid arg 'x-queue-version' for queue '<name>' in vhost '/':
	// \"unsupported queue version '3'\"" class 50 method 10; a string is
	// "expected integer, got longstr".
	register(Case{Name: "parity/queue-declare-queue-version", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		for _, bad := range []struct {
			v    any
			text string
		}{{int32(3), `"unsupported queue version '3'"`}, {"2", `"expected integer, got longstr"`}} {
			q := rawUniq("qv")
			c.sendMethod(1, mQDeclare, queueDeclareArgsTable(q, false, true, true, map[string]any{"x-queue-version": bad.v}))
			ci := c.expectChanClose(1, 406, 50, 10)
			if !strings.HasSuffix(ci.Text, bad.text) {
				t.Errorf("reply text %q does not end with %s", ci.Text, bad.text)
			}
			c.openChannel(1)
		}
		for _, v := range []int32{1, 2} {
			c.sendMethod(1, mQDeclare, queueDeclareArgsTable(rawUniq("qv"), false, true, true, map[string]any{"x-queue-version": v}))
			c.expect(1, mQDeclareOk)
		}
		c.closeConn()
	}})
}
