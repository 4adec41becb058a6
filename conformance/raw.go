package conformance

// raw.go is a small, self-contained AMQP 0-9-1 client used by the frame-level
// cases (conn_*.go, frame_*.go, errors_*.go). It encodes and decodes by hand
// so that it can send malformed or out-of-order traffic on purpose. It does
// not import Warren's amqp package.

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// Frame types.
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE
)

// rawClassBasic is the basic class id (content class of basic.publish).
const rawClassBasic = 60

// rawMethodID is a class-id/method-id pair.
type rawMethodID struct{ class, method uint16 }

var (
	mConnStart    = rawMethodID{10, 10}
	mConnStartOk  = rawMethodID{10, 11}
	mConnTune     = rawMethodID{10, 30}
	mConnTuneOk   = rawMethodID{10, 31}
	mConnOpen     = rawMethodID{10, 40}
	mConnOpenOk   = rawMethodID{10, 41}
	mConnClose    = rawMethodID{10, 50}
	mConnCloseOk  = rawMethodID{10, 51}
	mChanOpen     = rawMethodID{20, 10}
	mChanOpenOk   = rawMethodID{20, 11}
	mChanFlow     = rawMethodID{20, 20}
	mChanFlowOk   = rawMethodID{20, 21}
	mChanClose    = rawMethodID{20, 40}
	mChanCloseOk  = rawMethodID{20, 41}
	mQDeclare     = rawMethodID{50, 10}
	mQDeclareOk   = rawMethodID{50, 11}
	mBasicQos     = rawMethodID{60, 10}
	mBasicQosOk   = rawMethodID{60, 11}
	mBasicPublish = rawMethodID{60, 40}
	mBasicGet     = rawMethodID{60, 70}
	mBasicGetOk   = rawMethodID{60, 71}
)

func (m rawMethodID) String() string { return fmt.Sprintf("%d.%d", m.class, m.method) }

// ---------------------------------------------------------------------------
// Encoding

// wbuf builds AMQP-encoded bytes.
type wbuf struct{ b []byte }

func (w *wbuf) octet(v uint8) *wbuf { w.b = append(w.b, v); return w }
func (w *wbuf) short(v uint16) *wbuf {
	w.b = binary.BigEndian.AppendUint16(w.b, v)
	return w
}
func (w *wbuf) long(v uint32) *wbuf {
	w.b = binary.BigEndian.AppendUint32(w.b, v)
	return w
}
func (w *wbuf) longlong(v uint64) *wbuf {
	w.b = binary.BigEndian.AppendUint64(w.b, v)
	return w
}
func (w *wbuf) shortstr(s string) *wbuf {
	if len(s) > 255 {
		panic("shortstr too long")
	}
	w.b = append(w.b, byte(len(s)))
	w.b = append(w.b, s...)
	return w
}
func (w *wbuf) longstr(s string) *wbuf {
	w.long(uint32(len(s)))
	w.b = append(w.b, s...)
	return w
}

// bits packs consecutive bit fields into one octet (first = lowest bit).
func (w *wbuf) bits(bs ...bool) *wbuf {
	var o uint8
	for i, b := range bs {
		if b {
			o |= 1 << i
		}
	}
	return w.octet(o)
}

// table encodes a field table. Supported values: bool, int32, int64,
// string (long string), []byte (long string), map[string]any (table).
func (w *wbuf) table(m map[string]any) *wbuf {
	var t wbuf
	for k, v := range m {
		t.shortstr(k)
		t.fieldValue(v)
	}
	w.long(uint32(len(t.b)))
	w.b = append(w.b, t.b...)
	return w
}

func (w *wbuf) fieldValue(v any) {
	switch v := v.(type) {
	case bool:
		w.octet('t')
		if v {
			w.octet(1)
		} else {
			w.octet(0)
		}
	case int32:
		w.octet('I')
		w.long(uint32(v))
	case int:
		w.octet('I')
		w.long(uint32(int32(v)))
	case int64:
		w.octet('l')
		w.longlong(uint64(v))
	case string:
		w.octet('S')
		w.longstr(v)
	case []byte:
		w.octet('S')
		w.longstr(string(v))
	case map[string]any:
		w.octet('F')
		w.table(v)
	case nil:
		w.octet('V')
	default:
		panic(fmt.Sprintf("raw: unsupported table value %T", v))
	}
}

// methodPayload returns class-id, method-id and args as a method frame payload.
func methodPayload(m rawMethodID, args []byte) []byte {
	var w wbuf
	w.short(m.class).short(m.method)
	w.b = append(w.b, args...)
	return w.b
}

// encodeFrame encodes a complete frame with the given end octet.
func encodeFrame(typ uint8, ch uint16, payload []byte, end byte) []byte {
	var w wbuf
	w.octet(typ).short(ch).long(uint32(len(payload)))
	w.b = append(w.b, payload...)
	w.octet(end)
	return w.b
}

// ---------------------------------------------------------------------------
// Decoding

var rawErrShort = errors.New("raw: short buffer")

// rbuf reads AMQP-encoded bytes; the first error sticks.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = rawErrShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *rbuf) octet() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (r *rbuf) short() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}
func (r *rbuf) long() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}
func (r *rbuf) longlong() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}
func (r *rbuf) shortstr() string { return string(r.take(int(r.octet()))) }
func (r *rbuf) longstr() string  { return string(r.take(int(r.long()))) }

func (r *rbuf) table() map[string]any {
	raw := r.take(int(r.long()))
	if r.err != nil {
		return nil
	}
	t := &rbuf{b: raw}
	m := map[string]any{}
	for len(t.b) > 0 && t.err == nil {
		k := t.shortstr()
		m[k] = t.fieldValue()
	}
	if t.err != nil {
		r.err = t.err
	}
	return m
}

func (r *rbuf) fieldValue() any {
	switch r.octet() {
	case 't':
		return r.octet() != 0
	case 'b':
		return int8(r.octet())
	case 'B':
		return r.octet()
	case 's':
		return int16(r.short())
	case 'u':
		return r.short()
	case 'I':
		return int32(r.long())
	case 'i':
		return r.long()
	case 'l':
		return int64(r.longlong())
	case 'f':
		return math.Float32frombits(r.long())
	case 'd':
		return math.Float64frombits(r.longlong())
	case 'D':
		scale := r.octet()
		return [2]any{scale, r.long()}
	case 'S', 'x':
		return r.longstr()
	case 'T':
		return time.Unix(int64(r.longlong()), 0)
	case 'F':
		return r.table()
	case 'A':
		raw := r.take(int(r.long()))
		a := &rbuf{b: raw}
		var out []any
		for len(a.b) > 0 && a.err == nil {
			out = append(out, a.fieldValue())
		}
		if a.err != nil {
			r.err = a.err
		}
		return out
	case 'V':
		return nil
	default:
		r.err = errors.New("raw: unknown field type")
		return nil
	}
}

// rawFrame is one decoded frame.
type rawFrame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// Method returns the class/method ids of a method frame and its arguments.
func (f rawFrame) Method() (rawMethodID, []byte, bool) {
	if f.Type != frameMethod || len(f.Payload) < 4 {
		return rawMethodID{}, nil, false
	}
	return rawMethodID{binary.BigEndian.Uint16(f.Payload), binary.BigEndian.Uint16(f.Payload[2:])}, f.Payload[4:], true
}

func (f rawFrame) String() string {
	if m, _, ok := f.Method(); ok {
		if m == mConnClose || m == mChanClose {
			c := decodeClose(f.Payload[4:])
			return fmt.Sprintf("method %s on ch %d (%s)", m, f.Channel, c)
		}
		return fmt.Sprintf("method %s on ch %d", m, f.Channel)
	}
	return fmt.Sprintf("frame type %d on ch %d, %d bytes", f.Type, f.Channel, len(f.Payload))
}

// rawClose is a decoded connection.close or channel.close.
type rawClose struct {
	Code     uint16
	Text     string
	ClassID  uint16
	MethodID uint16
}

func (c rawClose) String() string {
	return fmt.Sprintf("%d %q class=%d method=%d", c.Code, c.Text, c.ClassID, c.MethodID)
}

func decodeClose(args []byte) rawClose {
	r := &rbuf{b: args}
	c := rawClose{Code: r.short(), Text: r.shortstr(), ClassID: r.short(), MethodID: r.short()}
	return c
}

// ---------------------------------------------------------------------------
// Connection

// rawConn is a raw AMQP connection under test control.
type rawConn struct {
	t    T
	c    net.Conn
	r    *bufio.Reader
	user string
	pass string
	host string // vhost

	// Negotiated values after handshake.
	FrameMax   uint32
	ChannelMax uint16
	Heartbeat  uint16

	// Start is the decoded connection.start.
	Start rawStartInfo
	// Tune is the server's connection.tune proposal.
	Tune rawTuneInfo
}

type rawStartInfo struct {
	Major, Minor uint8
	Props        map[string]any
	Mechanisms   string
	Locales      string
}

type rawTuneInfo struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

// rawTimeout bounds every single read or write of the raw client.
const rawTimeout = 5 * time.Second

// rawUniq returns prefix plus a random suffix.
func rawUniq(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// dialRaw opens a TCP connection to the target. Nothing is sent.
func dialRaw(t T, tg Target) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tg.Addr(), rawTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", tg.Addr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c), user: "guest", pass: "guest", host: "/"}
	if u, err := url.Parse(tg.URL); err == nil {
		if u.User != nil {
			rc.user = u.User.Username()
			rc.pass, _ = u.User.Password()
		}
		// u.Path is already unescaped ("/%2f" becomes "//").
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			rc.host = p
		}
	}
	return rc
}

// write sends raw bytes; errors are returned (the server may have closed).
func (c *rawConn) write(b []byte) error {
	_ = c.c.SetWriteDeadline(time.Now().Add(rawTimeout))
	_, err := c.c.Write(b)
	return err
}

// mustWrite sends raw bytes and fails the case on error.
func (c *rawConn) mustWrite(b []byte) {
	c.t.Helper()
	if err := c.write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// sendFrame sends one well-formed frame.
func (c *rawConn) sendFrame(typ uint8, ch uint16, payload []byte) {
	c.t.Helper()
	c.mustWrite(encodeFrame(typ, ch, payload, frameEnd))
}

// sendMethod sends one method frame.
func (c *rawConn) sendMethod(ch uint16, m rawMethodID, args []byte) {
	c.t.Helper()
	c.sendFrame(frameMethod, ch, methodPayload(m, args))
}

// readFrame reads one frame within timeout.
func (c *rawConn) readFrame(timeout time.Duration) (rawFrame, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(timeout))
	var hdr [7]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{Type: hdr[0], Channel: binary.BigEndian.Uint16(hdr[1:])}
	size := binary.BigEndian.Uint32(hdr[3:])
	if size > 16<<20 {
		return rawFrame{}, fmt.Errorf("raw: frame too large (%d)", size)
	}
	f.Payload = make([]byte, size+1)
	if _, err := io.ReadFull(c.r, f.Payload); err != nil {
		return rawFrame{}, err
	}
	if f.Payload[size] != frameEnd {
		return rawFrame{}, fmt.Errorf("raw: bad frame end 0x%x", f.Payload[size])
	}
	f.Payload = f.Payload[:size]
	return f, nil
}

// next reads the next non-heartbeat frame or fails the case.
func (c *rawConn) next() rawFrame {
	c.t.Helper()
	deadline := time.Now().Add(rawTimeout)
	for {
		f, err := c.readFrame(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if f.Type == frameHeartbeat {
			continue
		}
		return f
	}
}

// expect reads the next non-heartbeat frame and requires it to be method m on ch.
func (c *rawConn) expect(ch uint16, m rawMethodID) []byte {
	c.t.Helper()
	f := c.next()
	got, args, ok := f.Method()
	if !ok || got != m || f.Channel != ch {
		c.t.Fatalf("expected method %s on channel %d, got %s", m, ch, f)
	}
	return args
}

// sendHeader sends the AMQP 0-9-1 protocol header.
func (c *rawConn) sendHeader() { c.t.Helper(); c.mustWrite([]byte("AMQP\x00\x00\x09\x01")) }

// rawClientProps are the client-properties sent in start-ok.
func rawClientProps(authFailureClose bool) map[string]any {
	caps := map[string]any{
		"authentication_failure_close": authFailureClose,
		"basic.nack":                   true,
		"connection.blocked":           true,
		"consumer_cancel_notify":       true,
		"publisher_confirms":           true,
	}
	return map[string]any{
		"product":      "warren-conformance-raw",
		"capabilities": caps,
	}
}

// readStart reads and decodes connection.start.
func (c *rawConn) readStart() {
	c.t.Helper()
	args := c.expect(0, mConnStart)
	r := &rbuf{b: args}
	c.Start = rawStartInfo{Major: r.octet(), Minor: r.octet(), Props: r.table(), Mechanisms: r.longstr(), Locales: r.longstr()}
	if r.err != nil {
		c.t.Fatalf("decode connection.start: %v", r.err)
	}
}

// plainResponse is the SASL PLAIN response for user/pass.
func plainResponse(user, pass string) string { return "\x00" + user + "\x00" + pass }

// amqplainResponse is the AMQPLAIN response: a field table without its
// length prefix.
func amqplainResponse(user, pass string) string {
	var w wbuf
	w.shortstr("LOGIN").octet('S').longstr(user)
	w.shortstr("PASSWORD").octet('S').longstr(pass)
	return string(w.b)
}

// startOkArgs encodes connection.start-ok.
func startOkArgs(props map[string]any, mechanism, response, locale string) []byte {
	var w wbuf
	w.table(props).shortstr(mechanism).longstr(response).shortstr(locale)
	return w.b
}

// sendStartOk sends a PLAIN start-ok with the target's credentials.
func (c *rawConn) sendStartOk() {
	c.t.Helper()
	c.sendMethod(0, mConnStartOk, startOkArgs(rawClientProps(true), "PLAIN", plainResponse(c.user, c.pass), "en_US"))
}

// readTune reads connection.tune.
func (c *rawConn) readTune() {
	c.t.Helper()
	args := c.expect(0, mConnTune)
	r := &rbuf{b: args}
	c.Tune = rawTuneInfo{ChannelMax: r.short(), FrameMax: r.long(), Heartbeat: r.short()}
	if r.err != nil {
		c.t.Fatalf("decode connection.tune: %v", r.err)
	}
}

func tuneOkArgs(channelMax uint16, frameMax uint32, heartbeat uint16) []byte {
	var w wbuf
	w.short(channelMax).long(frameMax).short(heartbeat)
	return w.b
}

// sendTuneOk sends tune-ok and records the values as negotiated.
func (c *rawConn) sendTuneOk(channelMax uint16, frameMax uint32, heartbeat uint16) {
	c.t.Helper()
	c.ChannelMax, c.FrameMax, c.Heartbeat = channelMax, frameMax, heartbeat
	c.sendMethod(0, mConnTuneOk, tuneOkArgs(channelMax, frameMax, heartbeat))
}

func connOpenArgs(vhost string) []byte {
	var w wbuf
	w.shortstr(vhost).shortstr("").bits(false)
	return w.b
}

// sendOpen sends connection.open for vhost.
func (c *rawConn) sendOpen(vhost string) {
	c.t.Helper()
	c.sendMethod(0, mConnOpen, connOpenArgs(vhost))
}

// handshakeTo performs header, start/start-ok (PLAIN), tune/tune-ok with the
// server's channel-max and frame-max and heartbeat 0, and stops before open.
func (c *rawConn) handshakeTo() {
	c.t.Helper()
	c.sendHeader()
	c.readStart()
	c.sendStartOk()
	c.readTune()
	c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, 0)
}

// openRaw dials and completes the handshake including connection.open of
// the target's vhost, with heartbeats disabled.
func openRaw(t T, tg Target) *rawConn {
	t.Helper()
	c := dialRaw(t, tg)
	c.handshakeTo()
	c.sendOpen(c.host)
	c.expect(0, mConnOpenOk)
	return c
}

// openChannel opens channel ch and waits for open-ok.
func (c *rawConn) openChannel(ch uint16) {
	c.t.Helper()
	c.sendMethod(ch, mChanOpen, new(wbuf).shortstr("").b)
	c.expect(ch, mChanOpenOk)
}

// rawCloseWait bounds how long the server may take to close the socket
// after a connection.close exchange. RabbitMQ closes at once after close-ok,
// except after a bad frame-end octet or an oversized frame (501): it then
// stops parsing input and drops the socket about 3 s after sending
// connection.close, whether or not close-ok was sent.
const rawCloseWait = 5 * time.Second

// expectConnClose requires the next non-heartbeat frame to be a
// connection.close with the given code/class/method, replies close-ok and
// requires the server to close the socket.
func (c *rawConn) expectConnClose(code, classID, mid uint16) rawClose {
	c.t.Helper()
	ci := c.readConnClose()
	c.checkClose("connection.close", ci, code, classID, mid)
	_ = c.write(encodeFrame(frameMethod, 0, methodPayload(mConnCloseOk, nil), frameEnd))
	c.expectEOF(rawCloseWait)
	return ci
}

// readConnClose requires the next non-heartbeat frame to be connection.close
// on channel 0 and returns it.
func (c *rawConn) readConnClose() rawClose {
	c.t.Helper()
	f := c.next()
	m, args, ok := f.Method()
	if !ok || m != mConnClose || f.Channel != 0 {
		c.t.Fatalf("expected connection.close, got %s", f)
	}
	return decodeClose(args)
}

// expectChanClose reads the next non-heartbeat frame, requires a
// channel.close on ch with the given code/class/method and replies close-ok.
func (c *rawConn) expectChanClose(ch uint16, code, classID, mid uint16) rawClose {
	c.t.Helper()
	f := c.next()
	m, args, ok := f.Method()
	if !ok || m != mChanClose || f.Channel != ch {
		c.t.Fatalf("expected channel.close on channel %d, got %s", ch, f)
	}
	ci := decodeClose(args)
	c.checkClose("channel.close", ci, code, classID, mid)
	c.sendMethod(ch, mChanCloseOk, nil)
	return ci
}

// rawReplyName maps reply codes to the names RabbitMQ prefixes its texts with.
var rawReplyName = map[uint16]string{
	311: "CONTENT_TOO_LARGE",
	312: "NO_ROUTE",
	313: "NO_CONSUMERS",
	320: "CONNECTION_FORCED",
	402: "INVALID_PATH",
	403: "ACCESS_REFUSED",
	404: "NOT_FOUND",
	405: "RESOURCE_LOCKED",
	406: "PRECONDITION_FAILED",
	501: "FRAME_ERROR",
	502: "SYNTAX_ERROR",
	503: "COMMAND_INVALID",
	504: "CHANNEL_ERROR",
	505: "UNEXPECTED_FRAME",
	506: "RESOURCE_ERROR",
	530: "NOT_ALLOWED",
	540: "NOT_IMPLEMENTED",
	541: "INTERNAL_ERROR",
}

func (c *rawConn) checkClose(what string, ci rawClose, code, classID, mid uint16) {
	c.t.Helper()
	if ci.Code != code || ci.ClassID != classID || ci.MethodID != mid {
		c.t.Fatalf("%s: got %s, want code=%d class=%d method=%d", what, ci, code, classID, mid)
	}
	if name := rawReplyName[code]; name != "" && !strings.HasPrefix(ci.Text, name) {
		c.t.Errorf("%s: reply text %q does not start with %q", what, ci.Text, name)
	}
	c.t.Logf("%s: %s", what, ci)
}

// expectEOF requires the server to close the socket within timeout. Bytes
// that arrive first are skipped.
func (c *rawConn) expectEOF(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_ = c.c.SetReadDeadline(deadline)
		var buf [512]byte
		n, err := c.r.Read(buf[:])
		if n > 0 {
			continue
		}
		if err == nil {
			continue
		}
		if rawClosedErr(err) {
			return
		}
		c.t.Fatalf("expected the server to close the socket within %v: %v", timeout, err)
	}
}

// rawClosedErr reports whether err means the peer closed the connection.
func rawClosedErr(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	return false
}

// rawTimeoutErr reports whether err is a deadline expiry.
func rawTimeoutErr(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// expectSilence requires that no non-heartbeat frame arrives and the socket
// stays open for d.
func (c *rawConn) expectSilence(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		f, err := c.readFrame(left)
		if err != nil {
			if rawTimeoutErr(err) {
				return
			}
			c.t.Fatalf("expected silence for %v, got error: %v", d, err)
		}
		if f.Type != frameHeartbeat {
			c.t.Fatalf("expected silence for %v, got %s", d, f)
		}
	}
}

// expectSilentClose requires the server to close the socket within d
// without sending any frame first (heartbeats excepted). It returns how
// long that took.
func (c *rawConn) expectSilentClose(d time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		f, err := c.readFrame(time.Until(deadline))
		if err != nil {
			if rawClosedErr(err) {
				el := time.Since(start)
				c.t.Logf("server closed the socket after %v", el.Round(time.Millisecond))
				return el
			}
			c.t.Fatalf("expected the server to close the socket within %v: %v", d, err)
		}
		if f.Type != frameHeartbeat {
			c.t.Fatalf("expected the server to close the socket without a frame, got %s", f)
		}
	}
}

// closeConn performs a clean client-initiated connection.close.
func (c *rawConn) closeConn() {
	c.t.Helper()
	var w wbuf
	w.short(200).shortstr("bye").short(0).short(0)
	c.sendMethod(0, mConnClose, w.b)
	c.expect(0, mConnCloseOk)
}

// ---------------------------------------------------------------------------
// Method argument helpers

func queueDeclareArgs(name string, passive, durable, exclusive, autoDelete bool) []byte {
	var w wbuf
	w.short(0).shortstr(name).bits(passive, durable, exclusive, autoDelete, false).table(nil)
	return w.b
}

func publishArgs(exchange, key string, mandatory bool) []byte {
	var w wbuf
	w.short(0).shortstr(exchange).shortstr(key).bits(mandatory, false)
	return w.b
}

// contentHeader encodes a basic content header with no properties.
func contentHeader(bodySize uint64) []byte {
	var w wbuf
	w.short(rawClassBasic).short(0).longlong(bodySize).short(0)
	return w.b
}

func basicGetArgs(queue string, noAck bool) []byte {
	var w wbuf
	w.short(0).shortstr(queue).bits(noAck)
	return w.b
}

func closeArgs(code uint16, text string, classID, mid uint16) []byte {
	var w wbuf
	w.short(code).shortstr(text).short(classID).short(mid)
	return w.b
}
