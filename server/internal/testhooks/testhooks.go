// Package testhooks carries the settings of a broker that only tests make
// (a store to fail, a throttle that never waits, fast alarm polls) from
// servertest into package server, so that server.Config holds only what an
// operator configures.
package testhooks

import (
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/persist"
)

// Hooks are a Config's test-only settings; the zero value is production's.
type Hooks struct {
	// Store is the durable store instead of Badger in Config.DataDir; the
	// server closes it when Serve returns.
	Store persist.Store
	// LoginThrottle slows failed logins instead of a throttle with
	// auth.ThrottleConfig's defaults.
	LoginThrottle *auth.Throttle
	// AlarmInterval is how often memory and disk are checked (default 1 s).
	AlarmInterval time.Duration
}

// Set stores h in cfg, a *server.Config. Package server sets it at init
// (this package cannot name server.Config: server imports it).
var Set func(cfg any, h Hooks)
