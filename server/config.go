package server

import (
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/persist"

	"github.com/rs/zerolog"
)

// Config is everything a broker is started with. The zero value of a field
// means its default.
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
	// LoginThrottle slows repeated failed logins (default: one with
	// auth.ThrottleConfig's defaults). The management API uses the same
	// one, through Server.LoginThrottle.
	LoginThrottle *auth.Throttle
	// FrameMax is the largest frame the broker accepts and offers in
	// connection.tune (default 131072, RabbitMQ's).
	FrameMax uint32
	// ChannelMax is offered in connection.tune (default 2047, RabbitMQ's).
	ChannelMax uint16
	// Heartbeat is offered in connection.tune (default 60 s).
	Heartbeat time.Duration
	// HandshakeTimeout bounds the time from accept to connection.open
	// (default 10 s, RabbitMQ's).
	HandshakeTimeout time.Duration
	// MaxMessageSize is the largest message body accepted (default 128 MiB).
	MaxMessageSize uint64
	// MaxConnections caps the client connections of the whole broker; a
	// socket over it is closed at once (default 0: no limit). Management
	// sessions do not count.
	MaxConnections int
	// MaxUnackedPerConnection caps the unacknowledged deliveries on one
	// connection, whatever its consumers' prefetch; consumers get nothing
	// more until some are settled (default 100000).
	MaxUnackedPerConnection int
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
	// AlarmInterval is how often memory and disk are checked (default 1 s).
	AlarmInterval time.Duration
	// QueueWindow is how many ready messages a queue keeps in memory; the
	// rest wait in the store (a durable queue's persistent messages) or in
	// the queue's spill files (everything else) (default 2048).
	QueueWindow int
	// OnStart, if set, is called with the server once New has built it
	// (tests use it to reach the server behind servertest).
	OnStart func(*Server)
	// Store is the durable store (default: Badger in DataDir). The server
	// closes it when Serve returns.
	Store persist.Store
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
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "0.0.0.0:5672"
	}
	if c.DataDir == "" {
		c.DataDir = "./warren-data"
	}
	if c.Users == nil {
		c.Users = map[string]string{"guest": "guest"}
	}
	if c.LoopbackUsers == nil {
		c.LoopbackUsers = []string{"guest"}
	}
	if c.LoginThrottle == nil {
		c.LoginThrottle = auth.NewThrottle(auth.ThrottleConfig{})
	}
	if c.FrameMax == 0 {
		c.FrameMax = 131072
	}
	if c.ChannelMax == 0 {
		c.ChannelMax = 2047
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 60 * time.Second
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.MaxUnackedPerConnection <= 0 {
		c.MaxUnackedPerConnection = 100_000
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 128 << 20
	}
	if c.MemoryHighWatermark == 0 {
		c.MemoryHighWatermark = 0.4
	}
	if c.DiskFreeLimit == 0 {
		c.DiskFreeLimit = 50_000_000
	}
	if c.AlarmInterval == 0 {
		c.AlarmInterval = time.Second
	}
	if c.QueueWindow <= 0 {
		c.QueueWindow = 2048
	}
	if c.Log == nil {
		l := zerolog.Nop()
		c.Log = &l
	}
}
