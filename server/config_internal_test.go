package server

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/internal/testhooks"
)

// TestConfigValidate: Validate takes the zero Config, the defaults and the
// bounds themselves, and refuses each bad field with a *ConfigError naming
// the field and its value.
func TestConfigValidate(t *testing.T) {
	d := DefaultConfig()
	for _, ok := range []Config{{}, d,
		{FrameMax: MinFrameMax, Heartbeat: HeartbeatOff, MaxMessageSize: MaxMessageSizeLimit, MemoryHighWatermark: 1},
		{Heartbeat: MaxHeartbeat, TLSListen: "127.0.0.1:0", TLSCert: "c.pem", TLSKey: "k.pem"},
		{ConsumerTimeout: ConsumerTimeoutOff}, {ConsumerTimeout: time.Millisecond},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, c := range []struct {
		cfg   Config
		field string
		shown string // how the message shows the value
	}{
		{Config{FrameMax: MinFrameMax - 1}, "FrameMax", "4095"},
		{Config{Heartbeat: -2 * time.Second}, "Heartbeat", "-2s"},
		{Config{Heartbeat: MaxHeartbeat + time.Second}, "Heartbeat", "18h12m16s"},
		{Config{HandshakeTimeout: -time.Second}, "HandshakeTimeout", "-1s"},
		{Config{MaxMessageSize: MaxMessageSizeLimit + 1}, "MaxMessageSize", "536870913"},
		{Config{MaxConnections: -1}, "MaxConnections", "-1"},
		{Config{MaxUnackedPerConnection: -5}, "MaxUnackedPerConnection", "-5"},
		{Config{QueueWindow: -1}, "QueueWindow", "-1"},
		{Config{ConsumerTimeout: -2 * time.Second}, "ConsumerTimeout", "-2s"},
		{Config{ConsumerTimeout: 500 * time.Microsecond}, "ConsumerTimeout", "500µs"},
		{Config{MemoryHighWatermark: 1.5}, "MemoryHighWatermark", "1.5"},
		{Config{MemoryHighWatermark: math.NaN()}, "MemoryHighWatermark", "NaN"},
		{Config{TLSListen: "0.0.0.0:5671", TLSCert: "c.pem"}, "TLSListen", `"0.0.0.0:5671"`},
	} {
		err := c.cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want a ConfigError for it", c.field, err)
			continue
		}
		if want := "server.Config." + c.field + " " + c.shown + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %q, want it to start %q", c.field, err, want)
		}
	}
}

// TestNewRefusesInvalidConfig: New validates before it opens anything.
func TestNewRefusesInvalidConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	_, err := New(Config{DataDir: dir, FrameMax: 512})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "FrameMax" {
		t.Fatalf("New: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused New touched its data directory: %v", err)
	}
}

// TestZeroFieldsAreDefaults: setDefaults fills every field DefaultConfig
// sets, with its value, and keeps a field that is set.
func TestZeroFieldsAreDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if c.hooks.LoginThrottle == nil || c.hooks.AlarmInterval != time.Second {
		t.Errorf("test-only settings left unset: %+v", c.hooks)
	}
	c.hooks = testhooks.Hooks{}
	if d := DefaultConfig(); !reflect.DeepEqual(c, d) {
		t.Errorf("zero Config with defaults:\n%+v\nDefaultConfig:\n%+v", c, d)
	}
	set := Config{FrameMax: 8192, Heartbeat: HeartbeatOff, QueueWindow: 7, LoopbackUsers: []string{}}
	set.setDefaults()
	if set.FrameMax != 8192 || set.Heartbeat != HeartbeatOff || set.QueueWindow != 7 || len(set.LoopbackUsers) != 0 {
		t.Errorf("set fields overwritten: %+v", set)
	}
}

// TestHeartbeatOff: HeartbeatOff offers no heartbeat in connection.tune
// (what --heartbeat 0 asks for); a zero Heartbeat offers the default.
func TestHeartbeatOff(t *testing.T) {
	for hb, want := range map[time.Duration]uint16{HeartbeatOff: 0, 0: 60, 30 * time.Second: 30} {
		rc := startRaw(t, newTestServer(t, Config{Heartbeat: hb}))
		if got := expectRaw[*amqp.ConnectionTune](rc).Heartbeat; got != want {
			t.Errorf("Heartbeat %v: tune offers %d, want %d", hb, got, want)
		}
	}
}
