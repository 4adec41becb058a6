package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/server/internal/testhooks"

	"github.com/rs/zerolog"
)

// Config is everything an operator starts a broker with. The zero value of
// a field means its default (DefaultConfig); New checks it with Validate.
type Config struct {
	// Listen is the AMQP listener address (default 0.0.0.0:5672).
	Listen string
	// TLSListen is the amqps listener address; no TLS listener when empty.
	// TLSCert and TLSKey are the PEM files of its certificate and key.
	// TLSCA, when set, is a PEM file of CA certificates: clients are asked
	// for a certificate and one they present must verify against it
	// (a client without one may still log in with a password); a verified
	// certificate offers the EXTERNAL mechanism, its subject's Common Name
	// being the user.
	TLSListen string
	TLSCert   string
	TLSKey    string
	TLSCA     string
	// DataDir is where durable state lives (default ./warren-data).
	DataDir string
	// Users maps user names to passwords (default guest/guest). They are
	// created, as administrators with full permissions on vhost "/", on a
	// first start only: afterwards the stored users are the truth.
	Users map[string]string
	// LoopbackUsers may log in from loopback addresses only (default
	// guest, RabbitMQ's loopback_users); an empty non-nil slice allows
	// every user from anywhere.
	LoopbackUsers []string
	// FrameMax is the largest frame the broker accepts and offers in
	// connection.tune, at least MinFrameMax (default 131072, RabbitMQ's).
	FrameMax uint32
	// ChannelMax is offered in connection.tune (default 2047, RabbitMQ's).
	ChannelMax uint16
	// Heartbeat is offered in connection.tune, in whole seconds, at most
	// MaxHeartbeat (default 60 s); HeartbeatOff offers none.
	Heartbeat time.Duration
	// HandshakeTimeout bounds the time from accept to connection.open
	// (default 10 s, RabbitMQ's).
	HandshakeTimeout time.Duration
	// MaxMessageSize is the largest message body accepted, at most
	// MaxMessageSizeLimit (default 128 MiB).
	MaxMessageSize uint64
	// MaxConnections caps the client connections of the whole broker; a
	// socket over it is closed at once (default 0: no limit). Management
	// sessions do not count.
	MaxConnections int
	// MaxUnackedPerConnection caps the unacknowledged deliveries on one
	// connection, whatever its consumers' prefetch; consumers get nothing
	// more until some are settled (default 100000).
	MaxUnackedPerConnection int
	// ConsumerTimeout is how long a channel may hold a delivery
	// unacknowledged (RabbitMQ's consumer_timeout, default 30 min): a
	// channel whose oldest unacknowledged delivery is older is closed with
	// 406 PRECONDITION_FAILED, its deliveries requeued. It is checked
	// every minute, as RabbitMQ does, or every ConsumerTimeout when that
	// is shorter; ConsumerTimeoutOff turns it off.
	ConsumerTimeout time.Duration
	// Log receives the broker's structured logs (default: disabled).
	Log *zerolog.Logger
	// MemoryHighWatermark is the fraction of the machine's memory above
	// which publishers are blocked (default 0.4, RabbitMQ's);
	// MemoryHighWatermarkBytes, when set, is an absolute limit instead.
	MemoryHighWatermark      float64
	MemoryHighWatermarkBytes uint64
	// DiskFreeLimit is the free space under DataDir below which publishers
	// are blocked (default 50 MB, RabbitMQ's).
	DiskFreeLimit uint64
	// QueueWindow is how many ready messages a queue keeps in memory; the
	// rest wait in the store (a durable queue's persistent messages) or in
	// the queue's spill files (everything else) (default 2048).
	QueueWindow int
	// RepairMessageLog lets start-up go past damage in the message log
	// (persist.Options.RepairLog): the damaged records are dropped, and
	// the log says which. Without it a damaged log stops start-up.
	RepairMessageLog bool
	// RepairStore lets start-up go past damaged Badger tables and message
	// bodies (persist.Options.RepairStore): damaged tables are moved to a
	// damaged-<time> folder in DataDir, messages whose bodies are damaged
	// are dropped, and the log says which. Without it either stops
	// start-up with an error naming the file.
	RepairStore bool
	// Cluster makes the broker a cluster node (package cluster); its zero
	// value (no Listen) is a single node, as before.
	Cluster cluster.Config

	// hooks are the settings only tests make (servertest's options, or a
	// Config literal in package server's own tests).
	hooks testhooks.Hooks
}

func init() {
	testhooks.Set = func(cfg any, h testhooks.Hooks) { cfg.(*Config).hooks = h }
}

// Bounds of Config's fields that Validate enforces (cmd/warren's flags
// check the same ones).
const (
	// MinFrameMax is the smallest FrameMax: the spec's frame-min-size.
	MinFrameMax = amqp.FrameMinSize
	// MaxMessageSizeLimit is the largest MaxMessageSize, RabbitMQ's.
	MaxMessageSizeLimit = 512 << 20
	// MaxHeartbeat is the longest Heartbeat connection.tune can carry.
	MaxHeartbeat = 65535 * time.Second
	// HeartbeatOff as Heartbeat offers no heartbeat (0 in
	// connection.tune), where a zero Heartbeat means the default.
	HeartbeatOff time.Duration = -1
	// ConsumerTimeoutOff as ConsumerTimeout turns the consumer
	// acknowledgement timeout off.
	ConsumerTimeoutOff time.Duration = -1
)

// DefaultConfig is the configuration a zero field of a Config stands for:
// New fills every zero field from it, and cmd/warren's flags take their
// defaults from it. Each call returns fresh maps and slices.
func DefaultConfig() Config {
	nop := zerolog.Nop()
	return Config{
		Listen:                  "0.0.0.0:5672",
		DataDir:                 "./warren-data",
		Users:                   map[string]string{"guest": "guest"},
		LoopbackUsers:           []string{"guest"}, // RabbitMQ's loopback_users
		FrameMax:                131072,
		ChannelMax:              2047,
		Heartbeat:               60 * time.Second,
		HandshakeTimeout:        10 * time.Second,
		MaxMessageSize:          128 << 20,
		MaxUnackedPerConnection: 100_000,
		ConsumerTimeout:         30 * time.Minute, // RabbitMQ's consumer_timeout
		Log:                     &nop,
		MemoryHighWatermark:     0.4,
		DiskFreeLimit:           50_000_000,
		QueueWindow:             2048,
	}
}

// ConfigError is a Config field that Validate refuses.
type ConfigError struct {
	Field string // the Config field's name, e.g. "FrameMax"
	Value any    // its value
	Want  string // what it should be, e.g. "want 4096 or more"
}

func (e *ConfigError) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("server.Config.%s %q: %s", e.Field, s, e.Want)
	}
	return fmt.Sprintf("server.Config.%s %v: %s", e.Field, e.Value, e.Want)
}

// Validate reports the first field of c that no broker can run with, as a
// *ConfigError; zero fields (the defaults) are valid. New calls it.
func (c *Config) Validate() error {
	bad := func(field string, v any, want string) error { return &ConfigError{field, v, want} }
	switch {
	case c.FrameMax != 0 && c.FrameMax < MinFrameMax:
		return bad("FrameMax", c.FrameMax, fmt.Sprintf("want %d or more", MinFrameMax))
	case c.Heartbeat != HeartbeatOff && (c.Heartbeat < 0 || c.Heartbeat > MaxHeartbeat):
		return bad("Heartbeat", c.Heartbeat, fmt.Sprintf("want 0 to %s, or HeartbeatOff", MaxHeartbeat))
	case c.HandshakeTimeout < 0:
		return bad("HandshakeTimeout", c.HandshakeTimeout, "want 0 or more")
	case c.MaxMessageSize > MaxMessageSizeLimit:
		return bad("MaxMessageSize", c.MaxMessageSize, fmt.Sprintf("want at most %d", MaxMessageSizeLimit))
	case c.MaxConnections < 0:
		return bad("MaxConnections", c.MaxConnections, "want 0 or more")
	case c.MaxUnackedPerConnection < 0:
		return bad("MaxUnackedPerConnection", c.MaxUnackedPerConnection, "want 0 or more")
	case c.ConsumerTimeout != ConsumerTimeoutOff && c.ConsumerTimeout != 0 && c.ConsumerTimeout < time.Millisecond:
		return bad("ConsumerTimeout", c.ConsumerTimeout, "want 1ms or more, or ConsumerTimeoutOff")
	case c.QueueWindow < 0:
		return bad("QueueWindow", c.QueueWindow, "want 0 or more")
	case !(c.MemoryHighWatermark >= 0 && c.MemoryHighWatermark <= 1): // NaN too
		return bad("MemoryHighWatermark", c.MemoryHighWatermark, "want a fraction of memory from 0 to 1")
	case c.TLSListen != "" && (c.TLSCert == "" || c.TLSKey == ""):
		return bad("TLSListen", c.TLSListen, "needs a certificate and a key (TLSCert, TLSKey)")
	}
	if err := c.Cluster.Validate(); err != nil {
		var ce *cluster.ConfigError
		if errors.As(err, &ce) {
			return bad("Cluster."+ce.Field, ce.Value, ce.Want)
		}
		return err
	}
	return nil
}

// setDefaults fills c's zero fields from DefaultConfig.
func (c *Config) setDefaults() {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.DataDir == "" {
		c.DataDir = d.DataDir
	}
	if c.Users == nil {
		c.Users = d.Users
	}
	if c.LoopbackUsers == nil {
		c.LoopbackUsers = d.LoopbackUsers
	}
	if c.FrameMax == 0 {
		c.FrameMax = d.FrameMax
	}
	if c.ChannelMax == 0 {
		c.ChannelMax = d.ChannelMax
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = d.Heartbeat
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.MaxUnackedPerConnection == 0 {
		c.MaxUnackedPerConnection = d.MaxUnackedPerConnection
	}
	if c.ConsumerTimeout == 0 {
		c.ConsumerTimeout = d.ConsumerTimeout
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = d.MaxMessageSize
	}
	if c.MemoryHighWatermark == 0 {
		c.MemoryHighWatermark = d.MemoryHighWatermark
	}
	if c.DiskFreeLimit == 0 {
		c.DiskFreeLimit = d.DiskFreeLimit
	}
	if c.QueueWindow == 0 {
		c.QueueWindow = d.QueueWindow
	}
	if c.Log == nil {
		c.Log = d.Log
	}
	if c.hooks.LoginThrottle == nil {
		c.hooks.LoginThrottle = auth.NewThrottle(auth.ThrottleConfig{})
	}
	if c.hooks.AlarmInterval == 0 {
		c.hooks.AlarmInterval = time.Second
	}
}
