package cluster

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// recorder keeps every byte written through it.
type recorder struct {
	net.Conn
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (r recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// handshakePair runs both sides over a pipe, recording the wire.
func handshakePair(t *testing.T, dSecret, aSecret string, channel string) (dp, ap peer, dErr, aErr error, wire []byte) {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	_ = c1.SetDeadline(time.Now().Add(5 * time.Second))
	_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
	var mu sync.Mutex
	var buf bytes.Buffer
	d := peer{name: "dialler", instance: newInstance()}
	a := peer{name: "acceptor", instance: newInstance()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ap, _, aErr = serverHandshake(recorder{c2, &mu, &buf}, []byte(aSecret), a, func(ch string) string {
			if ch != "rpc" {
				return "unknown channel"
			}
			return ""
		})
		if aErr != nil {
			c2.Close()
		}
	}()
	dp, dErr = clientHandshake(recorder{c1, &mu, &buf}, []byte(dSecret), d, channel)
	if dErr != nil {
		c1.Close()
	}
	<-done
	return dp, ap, dErr, aErr, buf.Bytes()
}

func TestHandshake(t *testing.T) {
	const secret = "the-cluster-secret"
	dp, ap, dErr, aErr, wire := handshakePair(t, secret, secret, "rpc")
	if dErr != nil || aErr != nil || dp.name != "acceptor" || ap.name != "dialler" {
		t.Fatalf("good handshake: %v / %v (%q, %q)", dErr, aErr, dp.name, ap.name)
	}
	if bytes.Contains(wire, []byte(secret)) {
		t.Fatal("the secret crossed the wire")
	}

	// The acceptor does not know the secret: the dialler refuses it, and
	// tells it why.
	_, _, dErr, aErr, _ = handshakePair(t, secret, "another-secret", "rpc")
	var rf *refusal
	if !errors.As(dErr, &rf) || rf.byPeer || rf.reason != reasonSecret {
		t.Fatalf("dialler: %v", dErr)
	}
	if !errors.As(aErr, &rf) || !rf.byPeer || !errors.Is(aErr, ErrRefused) {
		t.Fatalf("acceptor: %v", aErr)
	}

	// The dialler does not know it: it finds out first (the acceptor
	// proves itself first), and both sides say so.
	_, _, dErr, aErr, _ = handshakePair(t, "another-secret", secret, "rpc")
	if !errors.As(dErr, &rf) || rf.byPeer || rf.reason != reasonSecret {
		t.Fatalf("dialler: %v", dErr)
	}
	if !errors.As(aErr, &rf) || !rf.byPeer {
		t.Fatalf("acceptor: %v", aErr)
	}

	// An unknown channel is refused after authentication.
	_, _, dErr, _, _ = handshakePair(t, secret, secret, "raft/nothing")
	if !errors.As(dErr, &rf) || rf.reason != "unknown channel" {
		t.Fatalf("unknown channel: %v", dErr)
	}
}

// TestHandshakeGarbage: a connection that is not a cluster one is refused
// without allocating what it claims.
func TestHandshakeGarbage(t *testing.T) {
	for _, in := range [][]byte{
		[]byte("AMQP\x00\x00\x09\x01"),
		[]byte("GET / HTTP/1.1\r\n\r\n" + string(make([]byte, 40))),
		append([]byte("WRNC\x07"), make([]byte, 32)...), // another version
	} {
		c1, c2 := net.Pipe()
		_ = c2.SetDeadline(time.Now().Add(300 * time.Millisecond)) // the AMQP header is short: it waits for more
		go func() { c1.Write(in); _, _ = c1.Read(make([]byte, 512)); c1.Close() }()
		_, _, err := serverHandshake(c2, []byte("secret-secret"), peer{name: "a"}, func(string) string { return "" })
		if err == nil {
			t.Fatalf("%q accepted", in)
		}
		c2.Close()
	}
}
