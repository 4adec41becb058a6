package server

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// A cluster node opens its AMQP port only once it has applied the
// metadata log up to its start, as RabbitMQ opens its listeners once
// booted: until then a client is refused (and tries again, or another
// node) rather than left in the listener's backlog past its handshake
// deadline.
func TestClusterNodeRefusesClientsUntilCaughtUp(t *testing.T) {
	addrs := testaddr.FreeN(t, 6) // three cluster listeners, three AMQP ports
	nodes := make([]*Server, 3)
	for i := range nodes {
		log := zerolog.Nop()
		srv, err := New(Config{
			Listen:                   addrs[3+i],
			DataDir:                  t.TempDir(),
			Log:                      &log,
			MemoryHighWatermarkBytes: 1 << 50,
			DiskFreeLimit:            1,
			Cluster:                  cluster.Config{NodeName: fmt.Sprintf("n%d", i+1), Listen: addrs[i], Seeds: addrs[:3], Secret: "s3cret-s3cret"},
			hooks:                    testhooks.Hooks{Store: persist.NewMemory()},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = srv
		t.Cleanup(func() { srv.Close() })
	}
	// n1 alone: no quorum, so it cannot have applied its start.
	listened := make(chan error, 3)
	go func() { listened <- nodes[0].Listen() }()
	// Until the others start, n1's port refuses, however long one
	// waits (a connection accepted into the backlog would succeed here).
	for range 20 {
		c, err := net.DialTimeout("tcp", addrs[3], time.Second)
		if err == nil {
			c.Close()
			t.Fatal("n1's AMQP port took a connection before n1 caught up with the cluster")
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial n1 before it caught up: %v, want connection refused", err)
		}
		select {
		case err := <-listened:
			t.Fatalf("n1's Listen returned (%v) without a quorum", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	go func() { listened <- nodes[1].Listen() }()
	go func() { listened <- nodes[2].Listen() }()
	for range 3 {
		select {
		case err := <-listened:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(startWait):
			t.Fatal("the nodes did not catch up")
		}
	}
	c, err := net.DialTimeout("tcp", nodes[0].Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("n1's AMQP port after it caught up: %v", err)
	}
	c.Close()
}
