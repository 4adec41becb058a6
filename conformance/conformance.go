// Package conformance is a black-box AMQP 0-9-1 test suite. It talks to any
// broker URL, so the same cases certify Warren and RabbitMQ. It never imports
// the server package.
package conformance

import (
	"fmt"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"
)

// Target is the broker under test.
type Target struct {
	// URL is an amqp:// URL with credentials for a user that may
	// configure, write and read everything in its vhost.
	URL string
	// Restart, when set, restarts the broker gracefully and returns once
	// it accepts connections again at URL. Cases that need it are skipped
	// without it.
	Restart func() error
	// SetPolicy and ClearPolicy, when set, manage policies in the URL's
	// vhost, as rabbitmqctl set_policy and clear_policy do. Cases that
	// need them are skipped without them.
	SetPolicy   func(name, pattern, applyTo string, priority int, definition map[string]any) error
	ClearPolicy func(name string) error
	// MemoryAlarm, when set, raises (true) or clears (false) the broker's
	// memory alarm, as rabbitmqctl set_vm_memory_high_watermark does with a
	// tiny or the default watermark.
	MemoryAlarm func(on bool) error
	// SetMaxMessageSize, when set, changes the broker's largest accepted
	// message body (RabbitMQ's max_message_size); 0 restores the default.
	SetMaxMessageSize func(n int) error
	// Admin, when set, manages users, vhosts and permissions (the access
	// cases need it).
	Admin Admin
	// SetTracing, when set, turns the firehose of the URL's vhost on or
	// off, as rabbitmqctl trace_on and trace_off do.
	SetTracing func(on bool) error
	// ConsumerTimeout, when set, is the broker's consumer acknowledgement
	// timeout (RabbitMQ's consumer_timeout); the cases that wait for it
	// are skipped without it. Keep it short: a case waits for it, and for
	// up to a minute more (RabbitMQ checks every minute).
	ConsumerTimeout time.Duration
}

// VHost returns the vhost of the target's URL ("/" when it names none).
func (t Target) VHost() string { return acVHost(t) }

// Addr returns host:port of the target's URL (default port 5672).
func (t Target) Addr() string {
	u, err := url.Parse(t.URL)
	if err != nil {
		return t.URL
	}
	if u.Port() == "" {
		return u.Hostname() + ":5672"
	}
	return u.Host
}

// T is the part of testing.TB a case uses. *testing.T implements it, and so
// does the stand-alone runner of cmd/warren-conformance. FailNow and Fatalf
// end the calling goroutine (runtime.Goexit), as testing does.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Failed() bool
	Cleanup(func())
}

// Case is one named conformance check.
type Case struct {
	// Name is "area/what", e.g. "queue/declare-passive-missing-404".
	Name string
	Run  func(t T, target Target)
	// MinTimeout, when set, is the least time the case needs against
	// target; a runner with a shorter per-case timeout gives it this.
	MinTimeout func(target Target) time.Duration
}

var (
	registryMu sync.Mutex
	registry   = map[string]Case{}
)

// register adds cases at package init. Names must be unique.
func register(cases ...Case) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, c := range cases {
		if _, dup := registry[c.Name]; dup {
			panic(fmt.Sprintf("conformance: duplicate case %q", c.Name))
		}
		registry[c.Name] = c
	}
}

// Cases returns every registered case, sorted by name.
func Cases() []Case {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Case, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Run runs every case as a subtest of t against target.
func Run(t *testing.T, target Target) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, target) })
	}
}
