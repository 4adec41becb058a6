package server_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/conformance"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestConformance runs the black-box suite against an in-process broker
// on a Badger store in a temporary directory, restarts and policies
// included. Durable queues keep only 3 messages in memory, so every case
// with more also runs through the paging to and from the store.
func TestConformance(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{QueueWindow: 3})
	srv := b.Server()
	conformance.Run(t, conformance.Target{
		URL:     b.URL(),
		Restart: func() error { b.Restart(); srv = b.Server(); return nil },
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
		Admin:      serverAdmin{srv},
		SetTracing: func(on bool) error { return srv.SetTracing("/", on) },
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

// TestConformanceConsumerTimeout runs the consumer-timeout cases against
// a broker of their own whose consumer acknowledgement timeout is short
// enough to wait for (the main one keeps the default, which no case
// reaches).
func TestConformanceConsumerTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	b := servertest.StartBroker(t, server.Config{ConsumerTimeout: timeout})
	target := conformance.Target{URL: b.URL(), ConsumerTimeout: timeout}
	for _, c := range conformance.Cases() {
		if strings.HasPrefix(c.Name, "consumer-timeout/") {
			t.Run(c.Name, func(t *testing.T) { c.Run(t, target) })
		}
	}
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

// serverAdmin is conformance.Admin on the server's own API.
type serverAdmin struct{ srv *server.Server }

func (a serverAdmin) AddUser(name, password string, tags ...string) error {
	return a.srv.Auth().SetPassword(name, password, tags)
}
func (a serverAdmin) DeleteUser(name string) error { return a.srv.DeleteUser(name) }
func (a serverAdmin) AddVHost(name string) error {
	return a.srv.AddVHost(auth.VHost{Name: name})
}
func (a serverAdmin) DeleteVHost(name string) error { return a.srv.DeleteVHost(name) }
func (a serverAdmin) SetPermissions(vhost, user, configure, write, read string) error {
	return a.srv.Auth().SetPermission(auth.Permission{User: user, VHost: vhost, Configure: configure, Write: write, Read: read})
}
func (a serverAdmin) SetTopicPermissions(vhost, user, exchange, write, read string) error {
	return a.srv.Auth().SetTopicPermission(auth.TopicPermission{User: user, VHost: vhost, Exchange: exchange, Write: write, Read: read})
}
func (a serverAdmin) SetVHostLimit(vhost, name string, value int) error {
	rec, _ := a.srv.Auth().VHost(vhost)
	limits := maps.Clone(rec.Limits)
	if limits == nil {
		limits = map[string]int64{}
	}
	limits[name] = int64(value)
	return a.srv.Auth().SetVHostLimits(vhost, limits)
}
