// Package quorum is RabbitMQ's quorum queue: each queue is a Raft group
// (github.com/hashicorp/raft) whose log holds its commands (enqueue,
// consumer attach and detach, settle, return, discard, purge, expiry,
// limits), applied to a deterministic state machine (machine.go, in the
// spirit of RabbitMQ's rabbit_fifo). A publish is confirmed once its
// enqueue is committed and applied: with one voter, once the node's
// shared Raft store (package raftstore) has synced it. Deliveries follow
// from the applied state: the machine checks messages out to consumers
// and the queue hands them over. On one node a queue is a one-voter
// group; Config.Transport and raft's AddVoter let more voters join
// without another design.
package quorum

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/raftstore"
)

// Config is what the quorum type needs of the broker.
type Config struct {
	// Dir holds the node's Raft store (Dir/raft) and the groups'
	// snapshots.
	Dir string
	// Raft is the node's shared Raft store (nil: the type opens one under
	// Dir/raft with its first queue, and closes it).
	Raft *raftstore.Store
	// Store keeps the queues' definitions (nil: none are stored).
	Store persist.Store
	// Log reports failures that have no caller to return to.
	Log func(err error, msg string)
	// RaftLogger, when set, is what every group's raft logs through
	// (shared: a cluster's node writes a line raft repeats for many
	// groups once); else raft's errors go to Log.
	RaftLogger hclog.Logger
	// Now is the clock the leader proposes (default time.Now).
	Now queue.Clock
	// NodeID names this node in the groups (default "local").
	NodeID string
	// Transport gives group id its transport and this node's address in
	// it; nil: an in-memory one, for one-voter groups.
	Transport func(group uint64) (raft.ServerAddress, raft.Transport, error)
	// Addr is a cluster member's address in the groups' transports (a
	// replicated queue's members).
	Addr func(node string) (raft.ServerAddress, bool)
	// Features reports whether every one of a replicated group's members
	// runs a build that has feature (FeatureFifoRules, FeatureKeepOnLeave):
	// every replica must apply the group's log alike, so a feature whose
	// commands or rules an earlier build lacks waits for them all; nil:
	// every member has every feature.
	Features func(feature string, members []string) bool
	// Forward sends an entry to the group's leader on node, which applies
	// it (Type.Forwarded there); nil: entries are proposed here only.
	Forward func(ctx context.Context, node string, group uint64, data []byte) ([]byte, error)
	// Holds asks node which of keys, its consumers of group, it still
	// holds (Type.Holds there); a leader detaches the others of a node
	// that is not a voter (askOrphans). nil: never asked.
	Holds func(ctx context.Context, node string, group uint64, keys []uint64) ([]uint64, error)
	// Views asks node what it knows of its replicas of groups (Type.Views
	// there), one answer per group; a replica reopened after a restart
	// stands for election at once when its members know no leader
	// (restart.go, cluster.ShouldStand). nil: it waits for raft's
	// timeouts.
	Views func(ctx context.Context, node string, groups []uint64) ([]cluster.View, error)
	// Timeouts for raft (HeartbeatTimeout, ElectionTimeout and the leader
	// lease; default 1s, as raft's). A one-voter group elects itself at
	// once when new, after one timeout at a restart.
	Timeout time.Duration
	// SnapshotThreshold is how many log entries a group takes between
	// snapshots (default 8192).
	SnapshotThreshold uint64
	// SnapshotInterval is raft's: how often a group checks whether it
	// has SnapshotThreshold entries past its last snapshot (at random
	// between this and twice this; default 30s). A queue that holds few
	// messages snapshots sooner on its own (compact.go).
	SnapshotInterval time.Duration
	// CompactIdle: a replica holding few messages that applied some
	// traffic since its last snapshot and then nothing for this long
	// snapshots, so that an idle queue's last entries do not stay in the
	// shared log (default 2s; compact.go).
	CompactIdle time.Duration
	// CommitTimeout is raft's: how often a leader with nothing new to
	// send tells each follower its commit index (default 500 ms). A
	// follower learns it at once after an entry anyway (Queue.armNudge).
	CommitTimeout time.Duration
	// BootstrapWait is how long a new group's member waits for its first
	// leader before it bootstraps the group itself (0: 7.5 s, several of
	// the first leader's elections); the first leader cuts it short when
	// it cannot open its replica (BootstrapNow).
	BootstrapWait time.Duration
	// NoSync: the Raft store does not sync (tests of logic only).
	NoSync bool
}

var quorumInfo = queue.TypeInfo{Name: "quorum", Module: "rabbit_quorum_queue", Refused: queue.QuorumRefused, Replicated: true,
	Compared: queue.QuorumCompared}

// Type is the quorum queue type.
type Type struct {
	cfg  Config
	anon atomic.Uint64

	openOnce sync.Once
	store    atomic.Pointer[raftstore.Store] // set once, by raftStore
	openErr  error

	mu     sync.Mutex
	queues map[uint64]*Queue // open queues by group id
	known  map[uint64]bool   // groups opened since start
	closed bool
	// leaving: replicas stopping after Leave, by group id, each closed
	// once its data is gone; a replica of the same group waits for it.
	leaving map[uint64]chan struct{}
	// kept: by group, the consumers this node's replica kept as it left
	// the group (opLeave), which it holds until this process ends
	// (Holds).
	kept map[uint64]map[uint64]bool

	// The replicas' leader changes (watchLeaders): observed on obs, by
	// the raft whose queue is in byRaft; obsStop ends the watcher.
	obsOnce sync.Once
	obs     chan raft.Observation
	obsStop chan struct{}
	byRaft  map[*raft.Raft]*Queue // under mu

	// bootAsked: groups whose first leader asked this node to bootstrap
	// them at once (BootstrapNow) before its member opened, and when.
	bootAsked map[uint64]time.Time // under mu

	// restarting: replicas reopened after a restart that wait for a
	// leader; restartLoop while electRestarted runs (restart.go). Under
	// mu.
	restarting  map[*Queue]*restarting
	restartLoop bool
}

// leaveWait bounds how long a new replica waits for an old one of its
// group to finish leaving.
const leaveWait = time.Minute

// awaitLeft waits until no replica of group is leaving here.
func (t *Type) awaitLeft(group uint64) error {
	t.mu.Lock()
	ch := t.leaving[group]
	t.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-time.After(leaveWait):
		return fmt.Errorf("quorum: the replica of group %d that left is still stopping", group)
	}
}

// NewType returns the quorum type; its Raft store opens with the first
// queue.
func NewType(cfg Config) *Type {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "local"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 8192
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 30 * time.Second
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 500 * time.Millisecond
	}
	if cfg.CompactIdle <= 0 {
		cfg.CompactIdle = 2 * time.Second
	}
	if cfg.BootstrapWait <= 0 {
		cfg.BootstrapWait = 7500 * time.Millisecond
	}
	return &Type{cfg: cfg, queues: map[uint64]*Queue{}, known: map[uint64]bool{}, byRaft: map[*raft.Raft]*Queue{}}
}

// Info implements queue.Type.
func (t *Type) Info() queue.TypeInfo { return quorumInfo }

func (t *Type) logErr(err error, msg string) {
	if err != nil && t.cfg.Log != nil {
		t.cfg.Log(err, msg)
	}
}

// raftStore opens the node's Raft store once.
func (t *Type) raftStore() (*raftstore.Store, error) {
	t.openOnce.Do(func() {
		if t.cfg.Raft != nil {
			t.store.Store(t.cfg.Raft)
			return
		}
		var st *raftstore.Store
		st, t.openErr = raftstore.Open(filepath.Join(t.cfg.Dir, "raft"), raftstore.Options{NoSync: t.cfg.NoSync,
			Logger: func(f string, a ...any) { t.logErr(fmt.Errorf(f, a...), "quorum raft store") }})
		if st != nil {
			t.store.Store(st)
		}
	})
	return t.store.Load(), t.openErr
}

// Store returns the node's Raft store once a queue opened it, else nil.
func (t *Type) Store() *raftstore.Store { return t.store.Load() }

// Close stops what is still open and closes the Raft store; call it
// after the queues were stopped (the broker's shutdown).
func (t *Type) Close() error {
	t.mu.Lock()
	t.closed = true
	if t.obsStop != nil {
		close(t.obsStop)
		t.obsStop = nil
	}
	qs := make([]*Queue, 0, len(t.queues))
	for _, q := range t.queues {
		qs = append(qs, q)
	}
	var leaving []chan struct{}
	for _, ch := range t.leaving {
		leaving = append(leaving, ch)
	}
	t.mu.Unlock()
	for _, q := range qs {
		q.Stop()
	}
	for _, ch := range leaving {
		select {
		case <-ch:
		case <-time.After(leaveWait):
		}
	}
	if st := t.store.Load(); st != nil && t.cfg.Raft == nil {
		return st.Close()
	}
	return nil
}

// New implements queue.Type: the declaration is stored first (its id is
// the group's), then a one-voter group is bootstrapped and elects itself.
func (t *Type) New(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	switch {
	case !d.Durable:
		return nil, &queue.PropertyError{Property: "non-durable"}
	case d.Exclusive:
		return nil, &queue.PropertyError{Property: "exclusive-owner"}
	case d.AutoDelete:
		return nil, &queue.PropertyError{Property: "auto-delete"}
	}
	q, err := t.create(d, l, h, func(id uint64) uint64 {
		if id == 0 {
			return 1<<63 | t.anon.Add(1) // not stored: ids of their own
		}
		return id
	}, nil)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// create stores a new queue's definition, then opens its group (id:
// group of the stored id) empty, whatever a crash left under that id. A
// failed start takes the definition back.
func (t *Type) create(d queue.Decl, l queue.Limits, h queue.Hooks, group func(storeID uint64) uint64, p *Placement) (*Queue, error) {
	st, err := t.raftStore()
	if err != nil {
		return nil, err
	}
	if t.cfg.Store != nil {
		rec := persist.QueueRecord{VHost: d.VHost, Name: d.Name, Durable: true, Args: persist.EncodeArgs(d.Args)}
		if err := t.cfg.Store.SaveQueue(&rec); err != nil {
			return nil, fmt.Errorf("cannot store queue: %w", err)
		}
		d.ID = rec.ID
	}
	gid := group(d.ID)
	if err := t.awaitLeft(gid); err != nil {
		return nil, err
	}
	if err := st.DeleteGroup(gid); err != nil {
		return nil, err
	}
	q, err := t.open(d, l, h, gid, true, p)
	if err != nil && t.cfg.Store != nil {
		t.logErr(t.cfg.Store.DeleteQueue(d.VHost, d.Name, d.ID), "durable store write failed")
	}
	return q, err
}

// Recover implements the broker's recovery of a stored quorum queue: its
// group restores its last snapshot and applies the committed log after
// it, its consumers from before the restart are detached (what they held
// comes back with x-delivery-count raised), and it elects itself.
func (t *Type) Recover(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, int, error) {
	if _, err := t.raftStore(); err != nil {
		return nil, 0, err
	}
	q, err := t.open(d, l, h, d.ID, false, nil)
	if err != nil {
		return nil, 0, err
	}
	// The group elects itself and applies its log; the count is then
	// the recovered state's.
	if err := q.Sync(); err != nil {
		q.Stop()
		return nil, 0, fmt.Errorf("quorum queue %q: %w", d.Name, err)
	}
	st := q.Stats()
	return q, st.Ready + st.Unacked, nil
}

// Recovered opens the Raft store if no recovered queue did, and removes
// the Raft data of groups no longer defined (a crash between a queue's
// deletion and its group's), once the broker recovered its definitions.
//
// Groups with ReplicatedGroups' bit are a cluster's, which the metadata
// group defines: DropUnknownReplicas removes theirs once it is applied.
func (t *Type) Recovered() {
	t.dropUnknown(func(id uint64) bool { return id&ReplicatedGroups == 0 })
}

// ReplicatedGroups marks the group ids of a cluster's quorum queues (the
// broker's choice: this bit and the metadata incarnation).
const ReplicatedGroups = 1 << 62

// DropUnknownReplicas removes the Raft data of replicated groups this node
// did not open since it started: call it once the cluster's metadata is
// applied up to the node's start (their queues were deleted, or this node
// removed from them, while it was down).
func (t *Type) DropUnknownReplicas() {
	t.dropUnknown(func(id uint64) bool { return id&ReplicatedGroups != 0 })
}

func (t *Type) dropUnknown(mine func(id uint64) bool) {
	st := t.Store()
	if st == nil {
		// No quorum queue was recovered: the store opens now (at the
		// broker's start, not in the middle of a first declaration)
		// where the data directory exists, else with the first queue.
		if _, err := os.Stat(filepath.Dir(filepath.Clean(t.cfg.Dir))); err != nil {
			return
		}
		var err error
		if st, err = t.raftStore(); err != nil {
			return
		}
	}
	ids, err := st.GroupIDs()
	t.logErr(err, "cannot list the quorum queues' raft groups")
	t.mu.Lock()
	var gone []uint64
	for _, id := range ids {
		if !t.known[id] && !raftstore.IsSystemGroup(id) && mine(id) {
			gone = append(gone, id)
		}
	}
	t.mu.Unlock()
	for _, id := range gone {
		t.logErr(st.DeleteGroup(id), "cannot remove a deleted quorum queue's raft data")
	}
}

// raftConfig is a group's raft configuration.
func (t *Type) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(t.cfg.NodeID)
	c.HeartbeatTimeout = t.cfg.Timeout
	c.ElectionTimeout = t.cfg.Timeout
	c.LeaderLeaseTimeout = t.cfg.Timeout
	// A follower with nothing new hears of the leader's commit index
	// only this often: about 1.5 AppendEntries per second and follower
	// for an idle group, not 13 (raft's 50 ms). What is applied tells
	// the followers at once instead (armNudge).
	c.CommitTimeout = t.cfg.CommitTimeout
	c.BatchApplyCh = true
	// A group has at most a few entries in flight (maxInflight, forwards,
	// nudges), so 64 bounds nothing in use; it is the capacity raft
	// allocates for the entries of every AppendEntries it sends.
	c.MaxAppendEntries = 64
	c.SnapshotThreshold = t.cfg.SnapshotThreshold
	c.SnapshotInterval = t.cfg.SnapshotInterval
	c.TrailingLogs = 256
	// A replica removed from its group (delete_member) keeps running
	// until its node applies the removal and drops it: meanwhile what it
	// proposes is forwarded to the leader, not failed.
	c.ShutdownOnRemove = false
	// Not RestoreCommittedLogs: raft 1.8.0 then skips the configuration
	// entries among the logs it restores (NewRaft scans for them only
	// after the last applied index), and a one-voter group would come
	// back with no voter. Recover waits for the election instead.
	c.NoLegacyTelemetry = true
	c.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: io.Discard})
	if t.cfg.RaftLogger != nil {
		c.Logger = t.cfg.RaftLogger
	} else if t.cfg.Log != nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: logWriter{t}})
	}
	return c
}

type logWriter struct{ t *Type }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.logErr(errors.New(string(p)), "quorum queue raft")
	return len(p), nil
}

func newPID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// Publish implements queue.Type: m is proposed to each queue's group;
// done runs once every enqueue is applied, with the first error (a
// reject-publish refusal, a lost leadership).
func (t *Type) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	if len(qs) == 1 {
		return qs[0].(*Queue).enqueue(m, done), false
	}
	var cb func(error)
	if done != nil {
		var left atomic.Int32
		var first atomic.Pointer[error]
		left.Store(int32(len(qs)) + 1)
		cb = func(err error) {
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
			if left.Add(-1) == 0 {
				if p := first.Load(); p != nil {
					done(*p)
				} else {
					done(nil)
				}
			}
		}
		defer cb(nil)
	}
	for _, x := range qs {
		if x.(*Queue).enqueue(m, cb) {
			routed = true
		}
	}
	return routed, false
}
