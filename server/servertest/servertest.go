// Package servertest starts in-process brokers for tests.
package servertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// Broker is an in-process broker that a test can restart on the same data
// directory and address.
type Broker struct {
	t      testing.TB
	cfg    server.Config
	addr   string
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

// An Option sets what only a test sets: server.Config leaves these out.
type Option func(*testhooks.Hooks)

// WithStore runs the broker on st instead of Badger in its data
// directory. The broker closes st when it stops, so it cannot Restart.
func WithStore(st persist.Store) Option { return func(h *testhooks.Hooks) { h.Store = st } }

// WithLoginThrottle makes th the broker's throttle of failed logins.
func WithLoginThrottle(th *auth.Throttle) Option {
	return func(h *testhooks.Hooks) { h.LoginThrottle = th }
}

// WithAlarmInterval checks memory and disk every d instead of every second.
func WithAlarmInterval(d time.Duration) Option {
	return func(h *testhooks.Hooks) { h.AlarmInterval = d }
}

// Start runs a broker on 127.0.0.1 with a random port and a temporary data
// directory, stopped when the test ends. It returns the amqp:// URL for
// guest/guest.
func Start(t testing.TB, cfg server.Config, opts ...Option) string {
	return StartBroker(t, cfg, opts...).URL()
}

// StartBroker is Start returning the Broker, for tests that restart it.
func StartBroker(t testing.TB, cfg server.Config, opts ...Option) *Broker {
	t.Helper()
	var h testhooks.Hooks
	for _, o := range opts {
		o(&h)
	}
	testhooks.Set(&cfg, h)
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
	b.addr, b.srv = srv.Addr().String(), srv
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan error, 1)
	go func() { b.done <- srv.Serve(ctx) }()
}

// Server is the running broker; a Restart replaces it.
func (b *Broker) Server() *server.Server { return b.srv }

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
