package server_test

import (
	"testing"

	"github.com/warrenmq/warren/conformance"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestConformance runs the black-box suite against an in-process broker
// on a Badger store in a temporary directory, restarts and policies
// included. Durable queues keep only 3 messages in memory, so every case
// with more also runs through the paging to and from the store.
func TestConformance(t *testing.T) {
	var srv *server.Server
	b := servertest.StartBroker(t, server.Config{QueueWindow: 3, OnStart: func(s *server.Server) { srv = s }})
	conformance.Run(t, conformance.Target{
		URL:     b.URL(),
		Restart: func() error { b.Restart(); return nil },
		SetPolicy: func(name, pattern, applyTo string, priority int, def map[string]any) error {
			return srv.SetPolicy("/", server.Policy{Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: jsonNumbers(def)})
		},
		ClearPolicy: func(name string) error { return srv.DeletePolicy("/", name) },
		SetMaxMessageSize: func(n int) error {
			if n == 0 {
				n = 128 << 20
			}
			srv.SetMaxMessageSize(uint64(n))
			return nil
		},
		MemoryAlarm: func(on bool) error {
			if on {
				srv.SetMemoryHighWatermark(1)
			} else {
				srv.SetMemoryHighWatermark(1 << 50)
			}
			return nil
		},
	})
}

// jsonNumbers turns ints into float64, as a definition read from JSON
// (the management API, a definitions file) carries them.
func jsonNumbers(def map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range def {
		if n, ok := v.(int); ok {
			out[k] = float64(n)
		} else {
			out[k] = v
		}
	}
	return out
}
