// Package servertest starts in-process brokers for tests.
package servertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/server"
)

// Broker is an in-process broker that a test can restart on the same data
// directory and address.
type Broker struct {
	t      testing.TB
	cfg    server.Config
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// Start runs a broker on 127.0.0.1 with a random port and a temporary data
// directory, stopped when the test ends. It returns the amqp:// URL for
// guest/guest.
func Start(t testing.TB, cfg server.Config) string {
	return StartBroker(t, cfg).URL()
}

// StartBroker is Start returning the Broker, for tests that restart it.
func StartBroker(t testing.TB, cfg server.Config) *Broker {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	b := &Broker{t: t, cfg: cfg}
	b.start()
	t.Cleanup(b.Stop)
	return b
}

func (b *Broker) start() {
	b.t.Helper()
	cfg := b.cfg
	if b.addr != "" {
		cfg.Listen = b.addr
	}
	srv, err := server.New(cfg)
	if err != nil {
		b.t.Fatalf("servertest: %v", err)
	}
	if err := srv.Listen(); err != nil {
		srv.Close()
		b.t.Fatalf("servertest: %v", err)
	}
	b.addr = srv.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan error, 1)
	go func() { b.done <- srv.Serve(ctx) }()
}

// URL is the broker's amqp:// URL for guest/guest.
func (b *Broker) URL() string { return fmt.Sprintf("amqp://guest:guest@%s/", b.addr) }

// Stop shuts the broker down gracefully (clients get 320
// CONNECTION_FORCED) and waits for it. Stopping twice is harmless.
func (b *Broker) Stop() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	if err := <-b.done; err != nil {
		b.t.Errorf("servertest: serve: %v", err)
	}
	b.cancel = nil
}

// Restart stops the broker and starts it again on the same address and
// data directory.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Stop()
	b.start()
}
