// Package servertest starts in-process brokers for tests.
package servertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/server"
)

// Start runs a broker on 127.0.0.1 with a random port and a temporary data
// directory, stopped when the test ends. It returns the amqp:// URL for
// guest/guest.
func Start(t testing.TB, cfg server.Config) string {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("servertest: serve: %v", err)
		}
	})
	return fmt.Sprintf("amqp://guest:guest@%s/", srv.Addr())
}
