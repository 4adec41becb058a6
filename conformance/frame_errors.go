package conformance

import (
	"bytes"
	"fmt"
)

// Frame-level errors. All of these are connection errors in RabbitMQ: the
// server sends connection.close on channel 0 and, after close-ok, closes
// the socket (after a 501 it ignores further input and drops the socket
// about 3 s later). Reply texts quoted are RabbitMQ 3.10's.

// connErrCase registers a case that opens a raw connection with channel 1
// open, runs send, and expects connection.close code/class/method.
func connErrCase(name string, send func(c *rawConn), code, classID, mid uint16) {
	register(Case{Name: name, Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		send(c)
		c.expectConnClose(code, classID, mid)
	}})
}

// qosArgs encodes basic.qos(0, 0, false), a harmless channel method.
func qosArgs() []byte { return new(wbuf).long(0).short(0).bits(false).b }

func init() {
	// Frame-end octet other than 0xCE: 501 "FRAME_ERROR - type 1, all
	// octets = <<...>>: {invalid_frame_end_marker,171}" class 0 method 0.
	connErrCase("frame/bad-frame-end-501", func(c *rawConn) {
		c.mustWrite(encodeFrame(frameMethod, 1, methodPayload(mBasicQos, qosArgs()), 0xAB))
	}, 501, 0, 0)
	connErrCase("frame/bad-frame-end-zero-501", func(c *rawConn) {
		c.mustWrite(encodeFrame(frameMethod, 0, methodPayload(mChanOpen, []byte{0}), 0x00))
	}, 501, 0, 0)

	// A frame whose payload is larger than the negotiated frame-max (the
	// limit applies to the payload size, so payload == frame-max is still
	// accepted): 501 "FRAME_ERROR - type 3, all octets = <<>>:
	// {frame_too_large,131073,131064}" class 0 method 0. The check is made
	// on the 7-octet frame header, before the payload arrives.
	connErrCase("frame/payload-over-default-frame-max-501", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(300000))
		_ = c.write(encodeFrame(frameBody, 1, make([]byte, 131073), frameEnd))
	}, 501, 0, 0)
	connErrCase("frame/oversized-frame-header-only-501", func(c *rawConn) {
		// type 1, channel 0, size 1 MiB, no payload sent.
		c.mustWrite([]byte{frameMethod, 0, 0, 0, 0x10, 0, 0})
	}, 501, 0, 0)
	register(Case{Name: "frame/payload-over-negotiated-frame-max-501", Run: func(t T, tg Target) {
		c := openRawFrameMax(t, tg, 4096)
		c.openChannel(1)
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(20000))
		_ = c.write(encodeFrame(frameBody, 1, make([]byte, 4097), frameEnd))
		c.expectConnClose(501, 0, 0)
	}})
	// Payload exactly frame-max (4096) is accepted; the message arrives.
	register(Case{Name: "frame/payload-equal-to-frame-max-accepted", Run: func(t T, tg Target) {
		c := openRawFrameMax(t, tg, 4096)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		body := bytes.Repeat([]byte("x"), 4096)
		c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
		c.sendFrame(frameHeader, 1, contentHeader(uint64(len(body))))
		c.sendFrame(frameBody, 1, body)
		got := c.basicGetBody(1, q)
		if !bytes.Equal(got, body) {
			t.Fatalf("got %d-byte body, want %d bytes", len(got), len(body))
		}
		c.closeConn()
	}})

	// Unknown frame types (anything but 1, 2, 3, 8) on any channel: 501
	// "FRAME_ERROR - type N, all octets = <<...>>: unknown_frame" class 0
	// method 0.
	for _, ft := range []uint8{0, 4, 9, 255} {
		ft := ft
		connErrCase(fmt.Sprintf("frame/unknown-frame-type-%d-501", ft), func(c *rawConn) {
			c.sendFrame(ft, 1, []byte{1, 2, 3})
		}, 501, 0, 0)
	}

	// Method on a channel that was never opened: 504 "CHANNEL_ERROR -
	// expected 'channel.open'" with the method's class/method.
	connErrCase("frame/method-on-unopened-channel-504", func(c *rawConn) {
		c.sendMethod(3, mQDeclare, queueDeclareArgs("", false, false, true, true))
	}, 504, 50, 10)
	connErrCase("frame/channel-close-on-unopened-channel-504", func(c *rawConn) {
		c.sendMethod(3, mChanClose, closeArgs(200, "", 0, 0))
	}, 504, 20, 40)
	connErrCase("frame/channel-close-ok-on-unopened-channel-504", func(c *rawConn) {
		c.sendMethod(3, mChanCloseOk, nil)
	}, 504, 20, 41)
	// channel.open on an open channel: 504 "CHANNEL_ERROR - second
	// 'channel.open' seen" class 20 method 10.
	connErrCase("frame/channel-open-twice-504", func(c *rawConn) {
		c.sendMethod(1, mChanOpen, new(wbuf).shortstr("").b)
	}, 504, 20, 10)

	// Content frames out of place: 505 "UNEXPECTED_FRAME - expected method
	// frame, got non method frame instead" class 0 method 0.
	connErrCase("frame/header-without-publish-505", func(c *rawConn) {
		c.sendFrame(frameHeader, 1, contentHeader(3))
	}, 505, 0, 0)
	connErrCase("frame/header-on-unopened-channel-505", func(c *rawConn) {
		c.sendFrame(frameHeader, 7, contentHeader(3))
	}, 505, 0, 0)
	connErrCase("frame/body-without-header-505", func(c *rawConn) {
		c.sendFrame(frameBody, 1, []byte("abc"))
	}, 505, 0, 0)
	// A body frame after content is complete.
	connErrCase("frame/extra-body-after-complete-content-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendFrame(frameBody, 1, []byte("abc"))
		c.sendFrame(frameBody, 1, []byte("d"))
	}, 505, 0, 0)
	// body-size 0 completes the message with the header; an (empty) body
	// frame after it is unexpected.
	connErrCase("frame/empty-body-after-zero-size-header-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(0))
		c.sendFrame(frameBody, 1, nil)
	}, 505, 0, 0)

	// Inside a publish: 505 "UNEXPECTED_FRAME - expected content header for
	// class 60, got non content header frame instead" class 60 method 40.
	connErrCase("frame/body-right-after-publish-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameBody, 1, []byte("abc"))
	}, 505, 60, 40)
	connErrCase("frame/method-between-publish-and-header-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendMethod(1, mBasicQos, qosArgs())
	}, 505, 60, 40)
	// Header for class 50: 505 "UNEXPECTED_FRAME - expected content header
	// for class 60, got one for class 50 instead" class 60 method 40.
	connErrCase("frame/header-wrong-class-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, new(wbuf).short(50).short(0).longlong(3).short(0).b)
	}, 505, 60, 40)
	// 505 "UNEXPECTED_FRAME - expected content body, got non content body
	// frame instead" class 60 method 40.
	connErrCase("frame/method-between-header-and-body-505", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendMethod(1, mBasicQos, qosArgs())
	}, 505, 60, 40)
	// Body frames adding up to more than body-size: RabbitMQ does not
	// notice (it keeps waiting for body frames); the next method frame on
	// that channel then gets the "expected content body" 505 class 60
	// method 40. Other channels keep working meanwhile.
	register(Case{Name: "frame/body-longer-than-declared-505-on-next-method", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.openChannel(2)
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, contentHeader(3))
		c.sendFrame(frameBody, 1, []byte("abcd"))
		c.sendMethod(2, mBasicQos, qosArgs())
		c.expect(2, mBasicQosOk)
		c.sendMethod(1, mBasicQos, qosArgs())
		c.expectConnClose(505, 60, 40)
	}})
	// Content header payload shorter than class+weight+size+flags: 501
	// "FRAME_ERROR - type 2, all octets = <<0,60,0>>: unknown_frame".
	connErrCase("frame/header-payload-too-short-501", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, []byte{0, 60, 0})
	}, 501, 0, 0)
	// Content frames on channel 0: 505 "UNEXPECTED_FRAME - type 2, all
	// octets = <<...>>" class 0 method 0 (type 3 for a body).
	connErrCase("frame/header-on-channel-0-505", func(c *rawConn) {
		c.sendFrame(frameHeader, 0, contentHeader(3))
	}, 505, 0, 0)
	connErrCase("frame/body-on-channel-0-505", func(c *rawConn) {
		c.sendFrame(frameBody, 0, []byte("abc"))
	}, 505, 0, 0)

	// Heartbeats on a non-zero channel (open or not): 505 "UNEXPECTED_FRAME
	// - type 8, all octets = <<>>" class 0 method 0 (not 501).
	connErrCase("frame/heartbeat-on-channel-1-505", func(c *rawConn) {
		c.sendFrame(frameHeartbeat, 1, nil)
	}, 505, 0, 0)
	connErrCase("frame/heartbeat-on-unopened-channel-505", func(c *rawConn) {
		c.sendFrame(frameHeartbeat, 5, nil)
	}, 505, 0, 0)
	// Heartbeat with a payload: 501 "FRAME_ERROR - type 8, all octets =
	// <<1,2>>: unknown_frame" class 0 method 0.
	connErrCase("frame/heartbeat-with-payload-501", func(c *rawConn) {
		c.sendFrame(frameHeartbeat, 0, []byte{1, 2})
	}, 501, 0, 0)
	// A heartbeat on channel 0 is fine at any time.
	register(Case{Name: "frame/heartbeat-on-channel-0-ok", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.sendFrame(frameHeartbeat, 0, nil)
		c.openChannel(1)
		c.sendFrame(frameHeartbeat, 0, nil)
		c.sendMethod(1, mBasicQos, qosArgs())
		c.expect(1, mBasicQosOk)
		c.closeConn()
	}})

	// Non-connection methods on channel 0: 504 "CHANNEL_ERROR - unexpected
	// method in connection state running" with the method's class/method.
	connErrCase("frame/channel-open-on-channel-0-504", func(c *rawConn) {
		c.sendMethod(0, mChanOpen, new(wbuf).shortstr("").b)
	}, 504, 20, 10)
	connErrCase("frame/queue-declare-on-channel-0-504", func(c *rawConn) {
		c.sendMethod(0, mQDeclare, queueDeclareArgs("", false, false, true, true))
	}, 504, 50, 10)

	// Methods the server does not accept from a client on a channel:
	// 503 "COMMAND_INVALID - unimplemented method" with class/method.
	connErrCase("frame/connection-open-on-channel-1-503", func(c *rawConn) {
		c.sendMethod(1, mConnOpen, connOpenArgs("/"))
	}, 503, 10, 40)
	connErrCase("frame/connection-close-on-channel-1-503", func(c *rawConn) {
		c.sendMethod(1, mConnClose, closeArgs(200, "", 0, 0))
	}, 503, 10, 50)
	connErrCase("frame/server-method-queue-declare-ok-503", func(c *rawConn) {
		c.sendMethod(1, mQDeclareOk, new(wbuf).shortstr("q").long(0).long(0).b)
	}, 503, 50, 11)
	connErrCase("frame/unsolicited-channel-close-ok-503", func(c *rawConn) {
		c.sendMethod(1, mChanCloseOk, nil)
	}, 503, 20, 41)
	connErrCase("frame/channel-flow-ok-from-client-503", func(c *rawConn) {
		c.sendMethod(1, mChanFlowOk, []byte{1})
	}, 503, 20, 21)

	// Argument decoding errors: 501 "FRAME_ERROR - cannot decode <<...>>"
	// with the method's class/method, for too few and too many octets.
	connErrCase("frame/truncated-arguments-501", func(c *rawConn) {
		c.sendMethod(1, mQDeclare, []byte{0, 0, 5, 'a'})
	}, 501, 50, 10)
	connErrCase("frame/empty-arguments-501", func(c *rawConn) {
		c.sendMethod(1, mQDeclare, nil)
	}, 501, 50, 10)
	connErrCase("frame/trailing-argument-bytes-501", func(c *rawConn) {
		c.sendMethod(1, mBasicQos, append(qosArgs(), 1, 2, 3))
	}, 501, 60, 10)
	// Method frame payload shorter than class-id + method-id: 501
	// "FRAME_ERROR - type 1, all octets = <<0,50>>: unknown_frame" class 0
	// method 0.
	connErrCase("frame/method-payload-under-4-octets-501", func(c *rawConn) {
		c.sendFrame(frameMethod, 1, []byte{0, 50})
	}, 501, 0, 0)

	// Unknown class or method ids, and a field table with an unknown field
	// type: RabbitMQ's reader crashes and drops the socket at once without
	// sending connection.close.
	socketDrop := []struct {
		name string
		send func(c *rawConn)
	}{
		{"frame/unknown-class-socket-closed", func(c *rawConn) { c.sendMethod(1, rawMethodID{99, 10}, nil) }},
		{"frame/unknown-method-socket-closed", func(c *rawConn) { c.sendMethod(1, rawMethodID{60, 99}, nil) }},
		{"frame/unknown-connection-method-socket-closed", func(c *rawConn) { c.sendMethod(0, rawMethodID{10, 99}, nil) }},
		{"frame/bad-field-table-type-socket-closed", func(c *rawConn) {
			tbl := new(wbuf).long(5).octet(1).octet('a').octet('Z').short(0).b
			args := new(wbuf).short(0).shortstr(rawUniq("q")).bits(false, false, true, true, false).b
			c.sendMethod(1, mQDeclare, append(args, tbl...))
		}},
	}
	for _, s := range socketDrop {
		send := s.send
		register(Case{Name: s.name, Run: func(t T, tg Target) {
			c := openRaw(t, tg)
			c.openChannel(1)
			send(c)
			c.expectSilentClose(rawTimeout)
		}})
	}

	// A second protocol header on an open connection is parsed as a frame
	// header: type 'A' (65), channel "MQ", size 0x50000009. The size is
	// checked before the type: 501 "FRAME_ERROR - type 65, all octets =
	// <<>>: {frame_too_large,1342177289,131064}" class 0 method 0.
	connErrCase("frame/protocol-header-after-handshake-501", func(c *rawConn) {
		c.sendHeader()
	}, 501, 0, 0)
	// basic.publish on channel 0: 504 "CHANNEL_ERROR - unexpected method in
	// connection state running" class 60 method 40.
	connErrCase("frame/basic-publish-on-channel-0-504", func(c *rawConn) {
		c.sendMethod(0, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
	}, 504, 60, 40)
	// channel.open without its reserved short string: 501 "FRAME_ERROR -
	// cannot decode <<>>" class 20 method 10.
	connErrCase("frame/channel-open-without-arguments-501", func(c *rawConn) {
		c.sendMethod(2, mChanOpen, nil)
	}, 501, 20, 10)
	// A content header whose property flags announce a property
	// (content-type) that is not there: RabbitMQ's channel fails while
	// decoding the properties and the connection is closed with 541
	// "INTERNAL_ERROR" class 0 method 0.
	connErrCase("frame/content-header-missing-property-541", func(c *rawConn) {
		c.sendMethod(1, mBasicPublish, publishArgs("", rawUniq("nowhere"), false))
		c.sendFrame(frameHeader, 1, new(wbuf).short(rawClassBasic).short(0).longlong(0).short(0x8000).b)
	}, 541, 0, 0)

	// A body split over several frames is reassembled.
	register(Case{Name: "frame/body-split-over-frames", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		q := c.declareTempQueue(1)
		c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
		c.sendFrame(frameHeader, 1, contentHeader(6))
		c.sendFrame(frameBody, 1, []byte("abc"))
		c.sendFrame(frameBody, 1, []byte("de"))
		c.sendFrame(frameBody, 1, []byte("f"))
		if got := c.basicGetBody(1, q); string(got) != "abcdef" {
			t.Fatalf("body %q, want %q", got, "abcdef")
		}
		c.closeConn()
	}})
	// Frames of different channels may interleave with a publish's
	// content frames.
	register(Case{Name: "frame/content-interleaved-with-other-channel", Run: func(t T, tg Target) {
		c := openRaw(t, tg)
		c.openChannel(1)
		c.openChannel(2)
		q := c.declareTempQueue(1)
		c.sendMethod(1, mBasicPublish, publishArgs("", q, false))
		c.sendMethod(2, mBasicQos, qosArgs())
		c.sendFrame(frameHeader, 1, contentHeader(2))
		c.sendMethod(2, mBasicQos, qosArgs())
		c.sendFrame(frameBody, 1, []byte("hi"))
		c.expect(2, mBasicQosOk)
		c.expect(2, mBasicQosOk)
		if got := c.basicGetBody(1, q); string(got) != "hi" {
			t.Fatalf("body %q, want %q", got, "hi")
		}
		c.closeConn()
	}})
}

// openRawFrameMax is openRaw with a tune-ok frame-max of fm.
func openRawFrameMax(t T, tg Target, fm uint32) *rawConn {
	t.Helper()
	c := dialRaw(t, tg)
	c.sendHeader()
	c.readStart()
	c.sendStartOk()
	c.readTune()
	c.sendTuneOk(c.Tune.ChannelMax, fm, 0)
	c.sendOpen(c.host)
	c.expect(0, mConnOpenOk)
	return c
}

// declareTempQueue declares an exclusive auto-delete queue with a unique
// name on ch and returns its name.
func (c *rawConn) declareTempQueue(ch uint16) string {
	c.t.Helper()
	q := rawUniq("raw-q")
	c.sendMethod(ch, mQDeclare, queueDeclareArgs(q, false, false, true, true))
	c.expect(ch, mQDeclareOk)
	return q
}

// basicGetBody does basic.get (no-ack) on q and returns the message body.
func (c *rawConn) basicGetBody(ch uint16, q string) []byte {
	c.t.Helper()
	c.sendMethod(ch, mBasicGet, basicGetArgs(q, true))
	c.expect(ch, mBasicGetOk)
	return c.readContent(ch)
}
