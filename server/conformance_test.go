package server_test

import (
	"testing"

	"github.com/warrenmq/warren/conformance"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestConformance runs the black-box suite against an in-process broker
// on a Badger store in a temporary directory, restarts included. Durable
// queues keep only 3 messages in memory, so every case with more also runs
// through the paging to and from the store.
func TestConformance(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{QueueWindow: 3})
	conformance.Run(t, conformance.Target{URL: b.URL(), Restart: func() error { b.Restart(); return nil }})
}
