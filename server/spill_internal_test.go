package server

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// TestDurableQueueSpillsTransient: through the broker, a durable queue fed
// only transient messages keeps no more than its window of them in memory.
func TestDurableQueueSpillsTransient(t *testing.T) {
	const window = 8
	s := newTestServer(t, Config{QueueWindow: window, DataDir: t.TempDir()})
	v := s.vhost("/")
	pub, _ := net.Pipe()
	c := newConn(s, pub)
	c.vhost, c.user, c.frameMax = v, "guest", 131072
	ch := newChannel(c, 1)
	c.channels[1] = ch
	if err := ch.queueDeclare(&amqp.QueueDeclare{Queue: "dq", Durable: true}); err != nil {
		t.Fatal(err)
	}
	method := &amqp.BasicPublish{RoutingKey: "dq"}
	for i := range 100 {
		body := []byte(fmt.Sprint(i))
		ch.route(&publishing{method: method, body: body, bodySize: uint64(len(body)), gotHdr: true}, nil)
	}
	v.mu.RLock()
	q := v.queues["dq"]
	v.mu.RUnlock()
	if n := q.Stats().Ready; n != 100 {
		t.Fatalf("%d ready, want 100", n)
	}
	// The spill log: what is past the window went to files.
	segs, _ := filepath.Glob(filepath.Join(s.spillDir(), "*", "*.spill"))
	if len(segs) == 0 {
		t.Fatal("a durable queue kept 100 transient messages in memory with a window of 8: nothing spilled")
	}
	for i := range 100 {
		e, _, ok := q.(queue.Getter).Get(false)
		if !ok || string(e.Msg.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d: %v %q", i, ok, e.Msg.Body)
		}
	}
}
