package server

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
)

// lockedBuffer is a log sink safe for the broker's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestForcedCloseNotLoggedAsClient: a client that drops the socket when the
// broker closes its connection (at shutdown, 320 CONNECTION_FORCED) is
// logged as closed by the broker, not as "closed abruptly by client".
func TestForcedCloseNotLoggedAsClient(t *testing.T) {
	var logs lockedBuffer
	log := zerolog.New(&logs)
	s := newTestServer(t, Config{Log: &log})
	rc := openRaw(t, s, 0, 131072)
	s.connsMu.Lock()
	for c := range s.conns {
		c.forceClose("broker shutdown")
	}
	s.connsMu.Unlock()
	cl := expectRaw[*amqp.ConnectionClose](rc)
	if cl.ReplyCode != amqp.ConnectionForced {
		t.Fatalf("close code %d", cl.ReplyCode)
	}
	rc.nc.Close() // no close-ok: the client just goes
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "connection closed by the broker") {
		if time.Now().After(deadline) {
			t.Fatalf("no 'closed by the broker' line in %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out := logs.String(); strings.Contains(out, "abruptly") || !strings.Contains(out, `"reason":"broker shutdown"`) {
		t.Fatalf("log: %s", out)
	}
}
