package conformance

import (
	"bytes"
	"io"
	"time"
)

// Protocol header negotiation (AMQP 0-9-1 section 4.2.2).

func init() {
	// RabbitMQ 3.10 answers any header it does not support with its own
	// "AMQP\x00\x00\x09\x01" and then closes the socket (observed as an
	// RST). This includes unknown revisions, non-AMQP bytes and the AMQP
	// 1.0 header when the 1.0 plugin is not enabled.
	bad := []struct{ name, header string }{
		{"connection/header-wrong-revision-0-9-2", "AMQP\x00\x00\x09\x02"},
		{"connection/header-http", "HTTP/1.1"},
		{"connection/header-http-get", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"connection/header-amqp-1-0", "AMQP\x00\x01\x00\x00"},
		{"connection/header-0-8-0-id-0", "AMQP\x00\x00\x08\x00"},
	}
	for _, b := range bad {
		header := b.header
		register(Case{Name: b.name, Run: func(t T, tg Target) {
			c := dialRaw(t, tg)
			c.mustWrite([]byte(header))
			expectHeaderReply(t, c)
		}})
	}

	// "AMQP\x01\x01\x00\x09" is the AMQP 0-9 header. RabbitMQ accepts it and
	// speaks 0-9-1 on the connection: it sends connection.start with
	// version-major 0, version-minor 9 and the handshake completes normally.
	register(Case{Name: "connection/header-0-9-legacy-accepted", Run: func(t T, tg Target) {
		c := dialRaw(t, tg)
		c.mustWrite([]byte("AMQP\x01\x01\x00\x09"))
		c.readStart()
		if c.Start.Major != 0 || c.Start.Minor != 9 {
			t.Errorf("connection.start version = %d-%d, want 0-9", c.Start.Major, c.Start.Minor)
		}
		c.sendStartOk()
		c.readTune()
		c.sendTuneOk(c.Tune.ChannelMax, c.Tune.FrameMax, 0)
		c.sendOpen(c.host)
		c.expect(0, mConnOpenOk)
		c.openChannel(1)
		c.closeConn()
	}})
}

// expectHeaderReply requires the server to answer with the 0-9-1 protocol
// header and then close the socket without sending anything else.
func expectHeaderReply(t T, c *rawConn) {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(rawTimeout))
	got := make([]byte, 8)
	if _, err := io.ReadFull(c.r, got); err != nil {
		t.Fatalf("reading protocol header reply: %v", err)
	}
	if want := []byte("AMQP\x00\x00\x09\x01"); !bytes.Equal(got, want) {
		t.Fatalf("server replied %q, want %q", got, want)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(rawTimeout))
	rest, err := io.ReadAll(c.r)
	if len(rest) > 0 {
		t.Errorf("server sent %d more bytes after the protocol header: %q", len(rest), rest)
	}
	if err != nil && !rawClosedErr(err) {
		t.Errorf("expected the server to close the socket: %v", err)
	}
}
