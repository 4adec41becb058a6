package conformance

import (
	"sync"
	"time"
)

// Heartbeats and the handshake timeout.

// openRawHeartbeat completes the handshake with tune-ok heartbeat hb.
func openRawHeartbeat(t T, tg Target, hb uint16) *rawConn {
	t.Helper()
	c := dialRaw(t, tg)
	c.sendHeader()
	c.readStart()
	c.sendStartOk()
	c.readTune()
	c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, hb)
	c.sendOpen(c.host)
	c.expect(0, mConnOpenOk)
	return c
}

// keepSending writes frame every period from a goroutine until the case
// ends or the returned stop function is called.
func (c *rawConn) keepSending(period time.Duration, frame []byte) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if c.write(frame) != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	c.t.Cleanup(stop)
	return stop
}

// heartbeatFrame is an encoded heartbeat frame on channel 0.
var heartbeatFrame = encodeFrame(frameHeartbeat, 0, nil, frameEnd)

func init() {
	// With heartbeat 1 s negotiated, RabbitMQ sends a heartbeat frame
	// (type 8, channel 0, empty payload) every ~0.5 s when it has nothing
	// else to send, whether or not the client sends heartbeats.
	register(Case{Name: "heartbeat/server-sends-heartbeats", Run: func(t T, tg Target) {
		c := openRawHeartbeat(t, tg, 1)
		c.keepSending(300*time.Millisecond, heartbeatFrame)
		start := time.Now()
		last := start
		var n int
		var maxGap time.Duration
		for time.Since(start) < 3*time.Second {
			f, err := c.readFrame(2500 * time.Millisecond)
			if err != nil {
				t.Fatalf("after %v and %d heartbeats: %v", time.Since(start), n, err)
			}
			if f.Type != frameHeartbeat || f.Channel != 0 || len(f.Payload) != 0 {
				t.Fatalf("expected only heartbeats on channel 0, got %s", f)
			}
			n++
			if g := time.Since(last); g > maxGap {
				maxGap = g
			}
			last = time.Now()
		}
		t.Logf("%d heartbeats in %v, largest gap %v", n, time.Since(start).Round(time.Millisecond), maxGap.Round(time.Millisecond))
		// Nominally 6 heartbeats 0.5 s apart; allow for a loaded machine.
		if n < 2 {
			t.Errorf("got %d heartbeats in 3 s, want at least 2", n)
		}
		if maxGap > 2500*time.Millisecond {
			t.Errorf("largest gap between heartbeats %v, want <= 2.5 s", maxGap)
		}
	}})

	// heartbeat 0 disables heartbeats: nothing is sent for 2.5 s, and the
	// idle client is not disconnected.
	register(Case{Name: "heartbeat/zero-disables", Run: func(t T, tg Target) {
		c := openRawHeartbeat(t, tg, 0)
		f, err := c.readFrame(2500 * time.Millisecond)
		if err == nil {
			t.Fatalf("expected nothing with heartbeat 0, got %s", f)
		}
		if !rawTimeoutErr(err) {
			t.Fatalf("expected nothing with heartbeat 0: %v", err)
		}
		c.openChannel(1)
		c.closeConn()
	}})

	// A client that sends nothing at all with heartbeat 1 s is
	// disconnected by RabbitMQ after ~3 s: the socket is closed without a
	// connection.close (only heartbeats arrive before). The bound is 8 s
	// to allow for a loaded machine (one run under load average 15 took
	// over 6 s).
	register(Case{Name: "heartbeat/silent-client-disconnected", Run: func(t T, tg Target) {
		c := openRawHeartbeat(t, tg, 1)
		el := c.expectSilentClose(8 * time.Second)
		if el < 900*time.Millisecond {
			t.Errorf("disconnected after %v, before one heartbeat interval", el)
		}
	}})

	// The heartbeat monitor starts with tune-ok: a client that stops after
	// tune-ok (heartbeat 1) gets heartbeats and is dropped the same way.
	register(Case{Name: "heartbeat/monitor-starts-at-tune-ok", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, 1)
		f, err := c.readFrame(2500 * time.Millisecond)
		if err != nil || f.Type != frameHeartbeat || f.Channel != 0 {
			t.Fatalf("expected a heartbeat before connection.open, got %s, %v", f, err)
		}
		c.expectSilentClose(8 * time.Second)
	}})

	// A client that sends heartbeats every 0.3 s keeps the connection
	// alive well past 2x the interval.
	register(Case{Name: "heartbeat/client-heartbeats-keep-alive", Run: func(t T, tg Target) {
		c := openRawHeartbeat(t, tg, 1)
		stop := c.keepSending(300*time.Millisecond, heartbeatFrame)
		c.expectSilence(4 * time.Second)
		stop()
		c.openChannel(1)
		c.closeConn()
	}})

	// Any client traffic counts, not only heartbeat frames.
	register(Case{Name: "heartbeat/client-methods-keep-alive", Run: func(t T, tg Target) {
		c := openRawHeartbeat(t, tg, 1)
		c.openChannel(1)
		stop := c.keepSending(300*time.Millisecond, encodeFrame(frameMethod, 1, methodPayload(mBasicQos, qosArgs()), frameEnd))
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			f := c.next()
			if m, _, ok := f.Method(); !ok || m != mBasicQosOk || f.Channel != 1 {
				t.Fatalf("expected basic.qos-ok on channel 1, got %s", f)
			}
		}
		stop()
		c.sendMethod(1, mChanClose, closeArgs(200, "", 0, 0))
		for {
			f := c.next()
			if m, _, ok := f.Method(); ok && m == mChanCloseOk {
				break
			}
		}
		c.closeConn()
	}})

	// The only slow case. A client that sends the protocol header and
	// then nothing gets connection.start and is disconnected when
	// RabbitMQ's handshake_timeout (10 s by default) expires: socket
	// closed, no connection.close. (Sending nothing at all, or only part of
	// the header, is likewise dropped after 10 s.)
	register(Case{Name: "connection/handshake-timeout", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.sendHeader()
		c.readStart()
		el := c.expectSilentClose(15 * time.Second)
		if el < 2*time.Second {
			t.Errorf("disconnected after %v; RabbitMQ waits handshake_timeout (10 s)", el)
		}
	}})
}
