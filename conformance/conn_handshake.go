package conformance

import (
	"strings"
	"time"
)

// Connection handshake: start/start-ok, tune/tune-ok, open/open-ok.
//
// RabbitMQ distinguishes two kinds of failures before connection.open-ok:
//   - authentication failures (when the client advertised the
//     authentication_failure_close capability) and vhost failures on
//     connection.open are answered with connection.close;
//   - every other error before the connection is open (bad mechanism,
//     malformed response, failed tune negotiation, out-of-order methods) is
//     "silent": RabbitMQ sends nothing, waits about 3 s (to slow down
//     brute-force clients) and closes the socket.

// rawSilentClose is how long a silent handshake close may take. RabbitMQ
// takes 3 s; the bound allows for a loaded machine.
const rawSilentClose = 8 * time.Second

func init() {
	// connection.start: version 0-9, server-properties with product,
	// version, platform, copyright, information, cluster_name and a
	// capabilities table (RabbitMQ 3.10 sends publisher_confirms,
	// exchange_exchange_bindings, basic.nack, consumer_cancel_notify,
	// connection.blocked, consumer_priorities,
	// authentication_failure_close, per_consumer_qos, direct_reply_to, all
	// true), mechanisms "AMQPLAIN PLAIN", locales "en_US".
	register(Case{Name: "connection/start-properties", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		s := c.Start
		if s.Major != 0 || s.Minor != 9 {
			t.Errorf("version %d-%d, want 0-9", s.Major, s.Minor)
		}
		mechs := strings.Fields(s.Mechanisms)
		for _, m := range []string{"PLAIN", "AMQPLAIN"} {
			if !containsStr(mechs, m) {
				t.Errorf("mechanisms %q lack %s", s.Mechanisms, m)
			}
		}
		if !containsStr(strings.Fields(s.Locales), "en_US") {
			t.Errorf("locales %q lack en_US", s.Locales)
		}
		for _, k := range []string{"product", "version"} {
			if v, ok := s.Props[k].(string); !ok || v == "" {
				t.Errorf("server-properties %s = %#v, want a non-empty long string", k, s.Props[k])
			}
		}
		caps, ok := s.Props["capabilities"].(map[string]any)
		if !ok {
			t.Fatalf("server-properties capabilities = %#v, want a table", s.Props["capabilities"])
		}
		for _, k := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack",
			"consumer_cancel_notify", "connection.blocked", "per_consumer_qos", "authentication_failure_close"} {
			if v, ok := caps[k].(bool); !ok || !v {
				t.Errorf("capability %s = %#v, want true", k, caps[k])
			}
		}
		t.Logf("server-properties: %v", s.Props)
	}})

	// connection.tune from RabbitMQ 3.10 with default configuration:
	// channel-max 2047, frame-max 131072, heartbeat 60.
	register(Case{Name: "connection/tune-defaults", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		if c.Tune != (rawTuneInfo{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}) {
			t.Errorf("tune = %+v, want channel-max 2047 frame-max 131072 heartbeat 60", c.Tune)
		}
	}})

	// Wrong password with capabilities.authentication_failure_close = true:
	// connection.close 403 "ACCESS_REFUSED - Login was refused using
	// authentication mechanism PLAIN. For details see the broker logfile."
	// class 0 method 0, sent immediately; socket closed after close-ok.
	register(Case{Name: "connection/auth-plain-bad-password-403", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "PLAIN", plainResponse(c.user, c.pass+"-wrong"), "en_US"))
		c.expectConnClose(403, 0, 0)
	}})

	// Same with AMQPLAIN: 403, text names mechanism AMQPLAIN, class 0 method 0.
	register(Case{Name: "connection/auth-amqplain-bad-password-403", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "AMQPLAIN", amqplainResponse(c.user, c.pass+"-wrong"), "en_US"))
		ci := c.expectConnClose(403, 0, 0)
		if !strings.Contains(ci.Text, "AMQPLAIN") {
			t.Errorf("reply text %q does not name AMQPLAIN", ci.Text)
		}
	}})

	// Without the authentication_failure_close capability (here: no
	// capabilities table at all, and one with the capability false),
	// RabbitMQ sends nothing and closes the socket after ~3 s.
	register(Case{Name: "connection/auth-bad-password-no-capability-silent-close", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(false), "PLAIN", plainResponse(c.user, c.pass+"-wrong"), "en_US"))
		c.expectSilentClose(rawSilentClose)
	}})
	register(Case{Name: "connection/auth-bad-user-no-client-properties-silent-close", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(nil, "PLAIN", plainResponse(rawUniq("nobody"), "x"), "en_US"))
		c.expectSilentClose(rawSilentClose)
	}})

	// AMQPLAIN login (response = field table without its length prefix,
	// keys LOGIN and PASSWORD) is accepted: tune follows, open succeeds.
	register(Case{Name: "connection/auth-amqplain-ok", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "AMQPLAIN", amqplainResponse(c.user, c.pass), "en_US"))
		c.readTune()
		c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, 0)
		c.sendOpen(c.host)
		c.expect(0, mConnOpenOk)
		c.openChannel(1)
		c.closeConn()
	}})

	// A locale the server did not offer is accepted (RabbitMQ ignores it).
	register(Case{Name: "connection/start-ok-unknown-locale-accepted", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "PLAIN", plainResponse(c.user, c.pass), "xx_XX"))
		c.readTune()
	}})

	// Silent closes: no frame at all, socket closed after ~3 s.
	silent := []struct {
		name string
		run  func(c *rawConn)
	}{
		// Mechanism not offered (even with authentication_failure_close).
		{"connection/auth-unknown-mechanism-silent-close", func(c *rawConn) {
			c.sendHeader()
			c.readStart()
			c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "FOO", plainResponse(c.user, c.pass), "en_US"))
		}},
		// PLAIN response without the NUL separators.
		{"connection/auth-plain-malformed-response-silent-close", func(c *rawConn) {
			c.sendHeader()
			c.readStart()
			c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "PLAIN", "garbage", "en_US"))
		}},
		// connection.open instead of start-ok.
		{"connection/open-before-start-ok-silent-close", func(c *rawConn) {
			c.sendHeader()
			c.readStart()
			c.sendOpen(c.host)
		}},
		// connection.open instead of tune-ok.
		{"connection/open-before-tune-ok-silent-close", func(c *rawConn) {
			c.sendHeader()
			c.readStart()
			c.sendStartOk()
			c.readTune()
			c.sendOpen(c.host)
		}},
		// tune-ok frame-max below the 4096 minimum.
		{"connection/tune-ok-frame-max-4095-silent-close", tuneOkThenOpen(keep16, func(uint32) uint32 { return 4095 })},
		// tune-ok frame-max 0 ("no limit") is refused since the server has a limit.
		{"connection/tune-ok-frame-max-zero-silent-close", tuneOkThenOpen(keep16, func(uint32) uint32 { return 0 })},
		// tune-ok frame-max above the server's 131072.
		{"connection/tune-ok-frame-max-above-server-silent-close", tuneOkThenOpen(keep16, func(v uint32) uint32 { return v + 1 })},
		// tune-ok channel-max 0 ("no limit") is refused since the server's is 2047.
		{"connection/tune-ok-channel-max-zero-silent-close", tuneOkThenOpen(func(uint16) uint16 { return 0 }, keep32)},
		// tune-ok channel-max above the server's.
		{"connection/tune-ok-channel-max-above-server-silent-close", tuneOkThenOpen(func(v uint16) uint16 { return v + 1 }, keep32)},
	}
	for _, s := range silent {
		run := s.run
		register(Case{Name: s.name, Run: func(t T, tg Target) {
			c := dialRaw(t, tg)
			run(c)
			c.expectSilentClose(rawSilentClose)
		}})
	}

	// tune-ok frame-max 4096 (the minimum, below the server's proposal) is
	// accepted and connection.open succeeds.
	register(Case{Name: "connection/tune-ok-frame-max-4096-accepted", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(c.Tune.ChannelMax, 4096, 0)
		c.sendOpen(c.host)
		c.expect(0, mConnOpenOk)
		c.openChannel(1)
		c.closeConn()
	}})

	// A heartbeat larger than the server's proposal is accepted.
	register(Case{Name: "connection/tune-ok-heartbeat-above-server-accepted", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, c.Tune.Heartbeat+60)
		c.sendOpen(c.host)
		c.expect(0, mConnOpenOk)
		c.closeConn()
	}})

	// With channel-max 1 negotiated, the second channel.open (whatever its
	// number) gets connection.close 530 "NOT_ALLOWED - number of channels
	// opened (1) has reached the negotiated channel_max (1)" class 0 method 0.
	register(Case{Name: "connection/channel-max-1-second-channel-530", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(1, c.Tune.FrameMax, 0)
		c.sendOpen(c.host)
		c.expect(0, mConnOpenOk)
		c.openChannel(1)
		c.sendMethod(2, mChanOpen, new(wbuf).shortstr("").b)
		c.expectConnClose(530, 0, 0)
	}})

	// RabbitMQ does not compare channel numbers with channel-max: with the
	// default 2047, channel.open on 2048 and 65535 get open-ok.
	register(Case{Name: "connection/channel-number-above-channel-max-accepted", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(2047)
		c.openChannel(2048)
		c.openChannel(65535)
		c.closeConn()
	}})

	// connection.open of the URL's vhost -> open-ok (known-hosts "").
	register(Case{Name: "connection/open-vhost-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.closeConn()
	}})

	// connection.open with non-empty reserved capabilities and insist=true
	// is accepted.
	register(Case{Name: "connection/open-with-insist-and-capabilities-ok", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.handshakeTo()
		c.sendMethod(0, mConnOpen, new(wbuf).shortstr(c.host).shortstr("caps").bits(true).b)
		c.expect(0, mConnOpenOk)
		c.closeConn()
	}})

	// connection.open of an unknown vhost: connection.close 530
	// "NOT_ALLOWED - vhost <name> not found" class 10 method 40, sent at
	// once; socket closed after close-ok.
	register(Case{Name: "connection/open-unknown-vhost-530", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.handshakeTo()
		c.sendOpen(rawUniq("no-such-vhost"))
		c.expectConnClose(530, 10, 40)
	}})

	// channel.open after tune-ok but before connection.open: connection.close
	// 505 "UNEXPECTED_FRAME - type 1, all octets = <<...>>" class 0 method 0.
	register(Case{Name: "connection/channel-open-before-connection-open-505", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.handshakeTo()
		c.sendMethod(1, mChanOpen, new(wbuf).shortstr("").b)
		c.expectConnClose(505, 0, 0)
	}})

	// Handshake methods on an open connection: connection.close 504
	// "CHANNEL_ERROR - unexpected method in connection state running" with
	// the offending class/method.
	again := []struct {
		name string
		m    rawMethodID
		args func(c *rawConn) []byte
	}{
		{"connection/start-ok-after-open-504", mConnStartOk, func(c *rawConn) []byte {
			return startOkArgs(rawClientProps(true), "PLAIN", plainResponse(c.user, c.pass), "en_US")
		}},
		{"connection/tune-ok-after-open-504", mConnTuneOk, func(c *rawConn) []byte { return tuneOkArgs(10, 131072, 0) }},
		{"connection/open-twice-504", mConnOpen, func(c *rawConn) []byte { return connOpenArgs(c.host) }},
		{"connection/unsolicited-close-ok-504", mConnCloseOk, func(c *rawConn) []byte { return nil }},
	}
	for _, a := range again {
		a := a
		register(Case{Name: a.name, Run: func(t T, tg Target) {
			c := openRaw(t, tg)
			c.sendMethod(0, a.m, a.args(c))
			c.expectConnClose(504, a.m.class, a.m.method)
		}})
	}

	// Client connection.close -> connection.close-ok. (RabbitMQ then waits
	// for the client to close the socket; it drops it itself after 30 s.)
	register(Case{Name: "connection/client-close-close-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.sendMethod(0, mConnClose, closeArgs(200, "bye", 0, 0))
		c.expect(0, mConnCloseOk)
	}})
}

// tuneOkThenOpen returns a handshake that answers connection.tune with
// tune-ok values computed from the server's proposal, then sends
// connection.open.
func tuneOkThenOpen(ch func(uint16) uint16, fm func(uint32) uint32) func(c *rawConn) {
	return func(c *rawConn) {
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(ch(c.Tune.ChannelMax), fm(c.Tune.FrameMax), 0)
		c.sendOpen(c.host)
	}
}

func keep16(v uint16) uint16 { return v }
func keep32(v uint32) uint32 { return v }

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
