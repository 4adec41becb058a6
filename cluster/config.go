package cluster

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is what an operator starts a cluster node with (cmd/warren's
// --node-name and --cluster-* flags). The zero Listen means no cluster: the
// broker runs as a single node, as before.
type Config struct {
	// NodeName is this node's name, unique in the cluster; it is the node's
	// Raft server ID in every group (cmd/warren: the host name by default).
	NodeName string
	// Listen is the one TCP listener (HOST:PORT) that carries all
	// inter-node traffic: every Raft group's and the RPC channel.
	Listen string
	// Advertise is the address other nodes reach this node at. Empty: this
	// node's entry in Seeds (found by dialling them), else Listen, its host
	// replaced by the host name when it is unspecified (0.0.0.0, ::).
	Advertise string
	// Seeds are the cluster listeners of the initial members. Nodes started
	// with the same seeds form one cluster once each has learned every
	// seed's name; a node that finds a seed already in a cluster joins it.
	Seeds []string
	// Secret is shared by every node of the cluster; a connection whose
	// peer does not prove it knows it is refused. It never crosses the wire.
	Secret string
	// Join is a member of a running cluster that a new node asks to be
	// added through (that member forwards to the Raft leader).
	Join string
	// TLS, when its files are set, runs inter-node traffic over mutual TLS.
	TLS TLSConfig
}

// TLSConfig names the PEM files of inter-node TLS: this node's certificate
// and key, and the CA that every peer's certificate must verify against
// (both ways: the dialling node presents its certificate too). Host names
// are not checked: the cluster's CA is taken to sign only its nodes, and
// the cluster secret authenticates them as well.
type TLSConfig struct {
	Cert, Key, CA string
}

// Enabled reports whether any TLS file is set.
func (t TLSConfig) Enabled() bool { return t.Cert != "" || t.Key != "" || t.CA != "" }

// MinSecretLen is the shortest Secret Validate accepts.
const MinSecretLen = 8

// MaxNameLen is the longest node name (it travels in a one-byte length).
const MaxNameLen = 255

// ConfigError is a Config field that Validate refuses.
type ConfigError struct {
	Field string // the Config field's name, e.g. "Seeds" or "TLS.CA"
	Value any    // its value
	Want  string // what it should be
}

func (e *ConfigError) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("cluster.Config.%s %q: %s", e.Field, s, e.Want)
	}
	return fmt.Sprintf("cluster.Config.%s %v: %s", e.Field, e.Value, e.Want)
}

// Validate reports the first field of c that no node can run with, as a
// *ConfigError. A Config with an empty Listen is valid (no cluster) when
// it sets no Seeds, Join or TLS.
func (c *Config) Validate() error {
	bad := func(field string, v any, want string) error { return &ConfigError{field, v, want} }
	if c.Listen == "" {
		if len(c.Seeds) > 0 || c.Join != "" || c.TLS.Enabled() {
			return bad("Listen", "", "seeds, a join address and TLS need a cluster listener")
		}
		return nil
	}
	if err := checkHostPort(c.Listen); err != nil {
		return bad("Listen", c.Listen, err.Error())
	}
	if err := CheckNodeName(c.NodeName); err != nil {
		return bad("NodeName", c.NodeName, err.Error())
	}
	if len(c.Secret) < MinSecretLen {
		return bad("Secret", strings.Repeat("*", len(c.Secret)), fmt.Sprintf("want a shared secret of at least %d characters", MinSecretLen))
	}
	if c.Advertise != "" {
		if err := checkHostPort(c.Advertise); err != nil {
			return bad("Advertise", c.Advertise, err.Error())
		}
	}
	for i, s := range c.Seeds {
		if err := checkHostPort(s); err != nil {
			return bad("Seeds", s, err.Error())
		}
		if slices.Contains(c.Seeds[:i], s) {
			return bad("Seeds", s, "want each seed once")
		}
	}
	if c.Join != "" {
		if err := checkHostPort(c.Join); err != nil {
			return bad("Join", c.Join, err.Error())
		}
		if len(c.Seeds) > 0 {
			return bad("Join", c.Join, "want either seeds (the initial members) or an address to join, not both")
		}
	}
	if c.TLS.Enabled() {
		switch {
		case c.TLS.Cert == "":
			return bad("TLS.Cert", "", "inter-node TLS needs a certificate, a key and a CA")
		case c.TLS.Key == "":
			return bad("TLS.Key", "", "inter-node TLS needs a certificate, a key and a CA")
		case c.TLS.CA == "":
			return bad("TLS.CA", "", "inter-node TLS needs a CA that peers' certificates verify against")
		}
	}
	return nil
}

// CheckNodeName reports why name cannot be a node name: it must be 1 to
// MaxNameLen bytes of printable ASCII without spaces or commas.
func CheckNodeName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("want a name of 1 to %d characters", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ',' {
			return fmt.Errorf("want printable ASCII without spaces or commas")
		}
	}
	return nil
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var p uint64
		p, err = strconv.ParseUint(port, 10, 16)
		if err == nil && p == 0 {
			return fmt.Errorf("want a port other than 0: other nodes dial it")
		}
	}
	if err != nil {
		return fmt.Errorf("want HOST:PORT (127.0.0.1:25672, node1.example:25672)")
	}
	return nil
}

// Timing is how fast a node's Raft groups react. The defaults are raised
// from hashicorp/raft's (1 s heartbeat and election timeouts, 500 ms
// lease) for a loaded 2-core machine, where a starved process must not be
// taken for a dead one: a follower starts an election between 1.5 s and
// 3 s after it last heard from the leader. Tests may lower them.
type Timing struct {
	// HeartbeatTimeout and ElectionTimeout are raft.Config's (default 1.5 s).
	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLeaseTimeout: a leader that has not heard from a majority for
	// this long steps down (default 1 s).
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is raft.Config's (default 50 ms).
	CommitTimeout time.Duration
	// IOTimeout bounds one Raft RPC's I/O and the handshake of a new
	// connection (default 10 s).
	IOTimeout time.Duration
	// Probe is how often a node pings the other members to tell running
	// from not running, and retries forming or joining (default 1 s); a
	// member not heard from for three probes is not running.
	Probe time.Duration
	// FollowerWait bounds how long a leader's AppendEntries to a follower
	// that does not answer waits for it to answer the probes again before
	// it fails (default 30 s; transport.go says why).
	FollowerWait time.Duration
	// SnapshotThreshold, SnapshotInterval and TrailingLogs are
	// raft.Config's (defaults 8192, 2 min, 10240).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
}

// DefaultTiming is the Timing a zero field stands for.
func DefaultTiming() Timing {
	return Timing{
		HeartbeatTimeout:   1500 * time.Millisecond,
		ElectionTimeout:    1500 * time.Millisecond,
		LeaderLeaseTimeout: 1000 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		IOTimeout:          10 * time.Second,
		Probe:              time.Second,
		FollowerWait:       30 * time.Second,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       10240,
	}
}

func (t *Timing) setDefaults() {
	d := DefaultTiming()
	set := func(v *time.Duration, dv time.Duration) {
		if *v == 0 {
			*v = dv
		}
	}
	set(&t.HeartbeatTimeout, d.HeartbeatTimeout)
	set(&t.ElectionTimeout, d.ElectionTimeout)
	set(&t.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	set(&t.CommitTimeout, d.CommitTimeout)
	set(&t.IOTimeout, d.IOTimeout)
	set(&t.Probe, d.Probe)
	set(&t.FollowerWait, d.FollowerWait)
	set(&t.SnapshotInterval, d.SnapshotInterval)
	if t.SnapshotThreshold == 0 {
		t.SnapshotThreshold = d.SnapshotThreshold
	}
	if t.TrailingLogs == 0 {
		t.TrailingLogs = d.TrailingLogs
	}
}
