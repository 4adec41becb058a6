package conformance

import "time"

// Channel-level error mechanics at the frame level: the server's
// channel.close, the "closing" state until the client's close-ok, reuse of
// the channel number, and connection-level closing semantics.

// passiveMissing sends queue.declare(passive) of a queue that does not exist.
func (c *rawConn) passiveMissing(ch uint16) {
	c.t.Helper()
	c.sendMethod(ch, mQDeclare, queueDeclareArgs(rawUniq("missing"), true, false, false, false))
}

// readChanClose requires the next non-heartbeat frame to be channel.close
// on ch with code/class/method, without answering it.
func (c *rawConn) readChanClose(ch uint16, code, classID, mid uint16) rawClose {
	c.t.Helper()
	f := c.next()
	m, args, ok := f.Method()
	if !ok || m != mChanClose || f.Channel != ch {
		c.t.Fatalf("expected channel.close on channel %d, got %s", ch, f)
	}
	ci := decodeClose(args)
	c.checkClose("channel.close", ci, code, classID, mid)
	return ci
}

// checkChannelUsable reopens ch and does a declare/publish/get round trip.
func (c *rawConn) checkChannelUsable(ch uint16) {
	c.t.Helper()
	c.openChannel(ch)
	q := c.declareTempQueue(ch)
	c.sendMethod(ch, mBasicPublish, publishArgs("", q, false))
	c.sendFrame(frameHeader, ch, contentHeader(2))
	c.sendFrame(frameBody, ch, []byte("ok"))
	if got := c.basicGetBody(ch, q); string(got) != "ok" {
		c.t.Fatalf("body %q, want %q", got, "ok")
	}
}

func init() {
	// queue.declare passive of a missing queue: channel.close 404
	// "NOT_FOUND - no queue '<name>' in vhost '/'" class 50 method 10. After
	// close-ok the same channel number can be opened and used again.
	register(Case{Name: "channel/error-404-then-reopen-same-number", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.passiveMissing(1)
		c.expectChanClose(1, 404, 50, 10)
		c.checkChannelUsable(1)
		c.closeConn()
	}})

	// A channel error does not affect other channels.
	register(Case{Name: "channel/error-leaves-other-channels-open", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.openChannel(2)
		q := c.declareTempQueue(2)
		c.passiveMissing(1)
		c.expectChanClose(1, 404, 50, 10)
		c.sendMethod(2, mQDeclare, queueDeclareArgs(q, true, false, false, false))
		c.expect(2, mQDeclareOk)
		c.closeConn()
	}})

	// basic.publish to a missing exchange: RabbitMQ checks the exchange only
	// once the whole message (method, header, body) has arrived, and the
	// error is asynchronous: channel.close 404 "NOT_FOUND - no exchange
	// '<name>' in vhost '/'" class 60 method 40.
	register(Case{Name: "channel/publish-missing-exchange-404-after-content", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mBasicPublish, publishArgs(rawUniq("no-exchange"), "k", false))
		c.expectSilence(300 * time.Millisecond)
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendFrame(frameBody, 1, []byte("abc"))
		c.expectChanClose(1, 404, 60, 40)
		c.checkChannelUsable(1)
		c.closeConn()
	}})

	// After the server's channel.close and before the client's close-ok,
	// methods and content on that channel are discarded silently, even
	// ones that would otherwise be errors (a second passive declare of a
	// missing queue, channel.flow active=false which is otherwise a 540
	// connection error). close-ok gets no reply; the channel can then be
	// reopened.
	register(Case{Name: "channel/frames-discarded-until-close-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.passiveMissing(1)
		c.readChanClose(1, 404, 50, 10)
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendFrame(frameBody, 1, []byte("abc"))
		c.passiveMissing(1)
		c.sendMethod(1, mChanFlow, []byte{0})
		c.expectSilence(500 * time.Millisecond)
		c.sendMethod(1, mChanCloseOk, nil)
		c.expectSilence(300 * time.Millisecond)
		c.checkChannelUsable(1)
		c.closeConn()
	}})

	// channel.close from the client while the server's channel.close is
	// pending: RabbitMQ answers channel.close-ok, but the channel stays
	// closing until the client's own close-ok; then it can be reopened.
	register(Case{Name: "channel/close-crossing-server-close-gets-close-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.passiveMissing(1)
		c.readChanClose(1, 404, 50, 10)
		c.sendMethod(1, mChanClose, closeArgs(200, "", 0, 0))
		c.expect(1, mChanCloseOk)
		c.sendMethod(1, mChanCloseOk, nil)
		c.checkChannelUsable(1)
		c.closeConn()
	}})

	// channel.open on a channel the server is closing (close-ok not yet
	// sent): connection.close 504 "CHANNEL_ERROR - second 'channel.open'
	// seen" class 20 method 10.
	register(Case{Name: "channel/open-while-closing-504", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.passiveMissing(1)
		c.readChanClose(1, 404, 50, 10)
		c.sendMethod(1, mChanOpen, new(wbuf).shortstr("").b)
		c.expectConnClose(504, 20, 10)
	}})

	// Framing is still checked on a closing channel: a body frame without a
	// header gets connection.close 505 "UNEXPECTED_FRAME - expected method
	// frame, got non method frame instead" class 0 method 0.
	register(Case{Name: "channel/framing-checked-while-closing-505", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.passiveMissing(1)
		c.readChanClose(1, 404, 50, 10)
		c.sendFrame(frameBody, 1, []byte("abc"))
		c.expectConnClose(505, 0, 0)
	}})

	// Client channel.close -> channel.close-ok; the number can be reused.
	register(Case{Name: "channel/client-close-close-ok-reopen", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mChanClose, closeArgs(200, "bye", 0, 0))
		c.expect(1, mChanCloseOk)
		c.checkChannelUsable(1)
		c.closeConn()
	}})

	// A method on a channel after its close-ok: connection.close 504
	// "CHANNEL_ERROR - expected 'channel.open'" class 50 method 10.
	register(Case{Name: "channel/method-after-close-ok-504", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mChanClose, closeArgs(200, "bye", 0, 0))
		c.expect(1, mChanCloseOk)
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.expectConnClose(504, 50, 10)
	}})

	// channel.flow active=true -> channel.flow-ok active=true.
	register(Case{Name: "channel/flow-active-true-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mChanFlow, []byte{1})
		args := c.expect(1, mChanFlowOk)
		if len(args) != 1 || args[0] != 1 {
			t.Fatalf("flow-ok args %x, want 01", args)
		}
		c.closeConn()
	}})

	// channel.flow active=false: connection.close 540 "NOT_IMPLEMENTED -
	// active=false" class 20 method 20.
	register(Case{Name: "channel/flow-active-false-540", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mChanFlow, []byte{0})
		c.expectConnClose(540, 20, 20)
	}})

	// access.request (class 30, deprecated) -> access.request-ok with
	// ticket 1.
	register(Case{Name: "channel/access-request-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, rawMethodID{30, 10}, new(wbuf).shortstr("/data").bits(false, false, false, false, false).b)
		args := c.expect(1, rawMethodID{30, 11})
		r := &rbuf{b: args}
		if tk := r.short(); r.err != nil || tk != 1 {
			t.Fatalf("access.request-ok ticket %d (%v), want 1", tk, r.err)
		}
		c.closeConn()
	}})

	// After the server sends connection.close, everything but close-ok is
	// ignored (methods on open and unopened channels, channel.open on 0,
	// heartbeats); close-ok makes the server close the socket at once.
	register(Case{Name: "connection/frames-ignored-after-server-close", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(5, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.readConnClose()
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.sendMethod(7, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.sendMethod(0, mChanOpen, new(wbuf).shortstr("").b)
		c.sendFrame(frameHeartbeat, 0, nil)
		c.expectSilence(500 * time.Millisecond)
		c.sendMethod(0, mConnCloseOk, nil)
		c.expectEOF(rawTimeout)
	}})

	// After the client's connection.close, the server answers close-ok and
	// ignores anything else the client sends.
	register(Case{Name: "connection/frames-ignored-after-client-close", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		c.sendMethod(1, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.sendMethod(9, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.sendFrame(frameHeartbeat, 0, nil)
		c.expect(0, mConnCloseOk)
		c.expectSilence(500 * time.Millisecond)
	}})

	// channel.open's reserved short string (out-of-band) may be non-empty.
	register(Case{Name: "channel/open-with-reserved-string-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.sendMethod(1, mChanOpen, new(wbuf).shortstr("xyz").b)
		c.expect(1, mChanOpenOk)
		c.closeConn()
	}})

	// A client connection.close crossing the server's connection.close is
	// answered with connection.close-ok.
	register(Case{Name: "connection/close-crossing-server-close-gets-close-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(5, mQDeclare, queueDeclareArgs("", false, false, true, true))
		c.readConnClose()
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		c.expect(0, mConnCloseOk)
	}})
}
