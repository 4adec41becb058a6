package conformance

// Short strings that are not UTF-8. RabbitMQ 3.10 checks every short
// string argument of a method a client sends, but basic.publish's: a
// malformed one (a stray continuation byte, a truncated or overlong
// sequence, an F8..FF byte) closes the connection with 501 "FRAME_ERROR -
// Malformed UTF-8 in shortstr" class 0 method 0, so no queue or exchange
// ever has such a name. Its check is structural only: surrogates and
// four-byte sequences above U+10FFFF pass, and such a name works like any
// other.

var mExDeclare = rawMethodID{40, 10}

func exchangeDeclareArgs(name, kind string, autoDelete bool) []byte {
	var w wbuf
	w.short(0).shortstr(name).shortstr(kind).bits(false, false, autoDelete, false, false).table(nil)
	return w.b
}

func init() {
	for _, bad := range []struct{ name, s string }{
		{"ff", "\xff"}, {"truncated", "\xc3"}, {"overlong", "\xc0\xaf"}, {"continuation", "\x80"},
	} {
		connErrCase("names/queue-declare-malformed-utf8-"+bad.name+"-501", func(c *rawConn) {
			c.sendMethod(1, mQDeclare, queueDeclareArgs(rawUniq("utf8-q")+bad.s, false, false, true, true))
		}, 501, 0, 0)
	}
	connErrCase("names/queue-declare-passive-malformed-utf8-501", func(c *rawConn) {
		c.sendMethod(1, mQDeclare, queueDeclareArgs(rawUniq("utf8-q")+"\xff", true, false, false, false))
	}, 501, 0, 0)
	connErrCase("names/exchange-declare-malformed-utf8-501", func(c *rawConn) {
		c.sendMethod(1, mExDeclare, exchangeDeclareArgs(rawUniq("utf8-x")+"\xfe", "direct", true))
	}, 501, 0, 0)
	connErrCase("names/basic-get-malformed-utf8-501", func(c *rawConn) {
		c.sendMethod(1, mBasicGet, basicGetArgs(rawUniq("utf8-q")+"\xe2\x82", true))
	}, 501, 0, 0)
	register(Case{Name: "names/malformed-utf8-reply-text", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(1, mQDeclare, queueDeclareArgs(rawUniq("utf8-q")+"\xff", false, false, true, true))
		if ci := c.expectConnClose(501, 0, 0); ci.Text != "FRAME_ERROR - Malformed UTF-8 in shortstr" {
			t.Fatalf("reply text %q", ci.Text)
		}
	}})

	// A name with a surrogate or a code point above U+10FFFF: RabbitMQ
	// takes it and it works exactly (the declare-ok echoes it, a publish
	// routed by it arrives), but its own definitions export then crashes,
	// and JSON cannot carry such a name. Warren refuses it as it refuses a
	// malformed one (501), so that every name it holds survives an export
	// and import; each broker is held to its own answer.
	for _, odd := range []struct{ name, s string }{
		{"surrogate", "\xed\xa0\x80"}, {"above-10ffff", "\xf4\x90\x80\x80"},
	} {
		register(Case{Name: "names/queue-name-" + odd.name, Run: func(t T, tg Target) {
			c := openRaw(t, tg)
			c.openChannel(1)
			q := rawUniq("utf8-q") + odd.s
			c.sendMethod(1, mQDeclare, queueDeclareArgs(q, false, false, true, true))
			if !c.isRabbitMQ() {
				if ci := c.expectConnClose(501, 0, 0); ci.Text != "FRAME_ERROR - Malformed UTF-8 in shortstr" {
					t.Fatalf("reply text %q", ci.Text)
				}
				return
			}
			r := &rbuf{b: c.expect(1, mQDeclareOk)}
			if got := r.shortstr(); got != q {
				t.Fatalf("declare-ok names %q, want %q", got, q)
			}
			c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
			c.sendFrame(frameHeader, 1, contentHeader(2))
			c.sendFrame(frameBody, 1, []byte("hi"))
			if got := string(c.basicGetBody(1, q)); got != "hi" {
				t.Fatalf("got %q", got)
			}
			c.closeConn()
		}})
	}

	// basic.publish is not checked: a malformed routing key is routed
	// (to nothing here) and the connection goes on.
	register(Case{Name: "names/publish-malformed-utf8-key-accepted", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere")+"\xff", false))
		c.sendFrame(frameHeader, 1, contentHeader(1))
		c.sendFrame(frameBody, 1, []byte("x"))
		c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
		c.sendFrame(frameHeader, 1, contentHeader(2))
		c.sendFrame(frameBody, 1, []byte("ok"))
		if got := string(c.basicGetBody(1, q)); got != "ok" {
			t.Fatalf("got %q", got)
		}
		c.closeConn()
	}})
}
