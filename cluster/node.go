package cluster

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// MetadataGroup is the name of the metadata Raft group.
const MetadataGroup = "metadata"

// ErrClosed: the node is closed.
var ErrClosed = errors.New("cluster: node closed")

// Options are what the program (not the operator) gives a node.
type Options struct {
	// Log receives the node's logs (default: none).
	Log *zerolog.Logger
	// Metadata is the metadata group's state machine (nil: commands are
	// committed and ignored). It is needed at Start: Raft replays the log
	// into it from the first moment.
	Metadata StateMachine
	// Storage opens each Raft group's stores (nil: DefaultStorage).
	Storage Storage
	// Timing: a zero field is DefaultTiming's.
	Timing Timing
	// Listener, when set, is used instead of listening on Config.Listen
	// (tests pass one bound to a random port). Close closes it.
	Listener net.Listener
	// Dial opens the raw connection to another node's listener (default:
	// TCP); tests pass a fault-injecting one (clustertest.Net).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Started, when set, is called with the node once its listener is up
	// and before the metadata group starts (whose replay may need the
	// node: the broker opens quorum queues' groups on it).
	Started func(*Node)
	// ApplyEverywhere: Propose returns once every other member has
	// applied the command too (at most 5 s; a second for one not heard
	// from lately), not only a majority and this node.
	ApplyEverywhere bool
	// PeerRestarted, when set, is called with a node's name when a
	// connection to or from it shows another process than the one this
	// node last connected with: it restarted, perhaps too fast for its
	// members to see it down, and everything its old process held is
	// gone. It runs before any connection of the new process is served
	// (its RPCs wait), once per new process; it must not call the Node.
	PeerRestarted func(node string)
	// PeerLost, when set, is called with a node's name when its
	// connections to this node ended and its listener refuses: its
	// process is gone (lost.go). The metadata group already stands for
	// election here if it should (Campaign); the groups the caller runs
	// should too. It must not block.
	PeerLost func(node string)
	// PeerDown, when set, is called with a node's name when a member
	// has not answered this node's probes for two rounds in a row (2 to
	// 3 s; before MemberDown) with no sign that its process is gone
	// (PeerLost was not called for it): it hangs (SIGSTOP, a stalled
	// machine) or is cut off from this node. It is called once until
	// the member answers again. Running reports, from then on, that it
	// does not run, so that the caller's groups stand for election only
	// where this node is on the side of a majority of their voters. It
	// runs on the probe loop and must not block.
	PeerDown func(node string)
}

// Node is this process's member of a cluster: its listener, the RPC
// channel, the metadata Raft group and the membership view. Its methods
// are safe for concurrent use.
type Node struct {
	cfg       Config
	opts      Options
	timing    Timing
	log       zerolog.Logger
	hclog     hclog.Logger
	secret    []byte
	instance  instanceID
	ln        net.Listener
	tlsServer *tls.Config
	tlsClient *tls.Config
	advertise string
	inSeeds   bool // this node is one of Config.Seeds (at advertise)
	refusals  refusalLog
	pool      rpcPool

	// instMu serializes the instance check of handshakes (sawPeer),
	// which may run PeerRestarted; instances is each peer's last.
	instMu    sync.Mutex
	instances map[string]instanceID

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop, connection handlers, background loops

	// mu guards the fields below; a leaf lock.
	mu       sync.Mutex
	closing  bool
	conns    map[net.Conn]struct{}
	checking map[string]bool // peers connLost is dialling
	groups   map[string]*GroupTransport
	handlers map[string]Handler

	links sync.Map // address -> *raftLink: this node's Raft connection to each peer

	// ready is set once meta and advertise are: the RPC handlers run from
	// the start (findAdvertise dials this node itself) and look at them
	// only when it is.
	ready     atomic.Bool
	asking    atomic.Bool // standAfterRestart runs (its View says so)
	meta      *raft.Raft
	metaTrans *GroupTransport
	fsm       *fsm
	stores    []any // the metadata group's stores, closed by Close when io.Closers
	obs       *raft.Observer

	members  membership
	probeNow chan struct{} // a probe round now (peerLost)
}

// Start starts a node: its listener, the metadata group (from its stored
// state, if any), and in the background the cluster's formation: with
// no stored state, a node with Seeds learns every seed's name and then
// bootstraps the metadata group with all of them (as every seed does,
// with the same configuration, which hashicorp/raft allows), or joins
// through a seed already in a cluster; a node with Join asks that member
// to add it; a node with neither forms a cluster of one. It returns once
// the listener is up; WaitLeader waits for the cluster.
func Start(cfg Config, opts Options) (*Node, error) {
	if cfg.Listen == "" && opts.Listener == nil {
		return nil, errors.New("cluster: no Listen address")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, opts: opts, timing: opts.Timing,
		secret: []byte(cfg.Secret), instance: newInstance(),
		conns: map[net.Conn]struct{}{}, groups: map[string]*GroupTransport{}, handlers: map[string]Handler{},
		instances: map[string]instanceID{}, checking: map[string]bool{}, probeNow: make(chan struct{}, 1),
	}
	n.pool.idle = map[string][]*rpcConn{}
	n.timing.setDefaults()
	if opts.Log != nil {
		n.log = opts.Log.With().Str("node", cfg.NodeName).Logger()
	} else {
		n.log = zerolog.Nop()
	}
	n.hclog = newHCLog(n.log)
	if n.opts.Dial == nil {
		var d net.Dialer
		n.opts.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if n.opts.Storage == nil {
		n.opts.Storage = DefaultStorage()
	}
	if cfg.TLS.Enabled() {
		var err error
		if n.tlsServer, n.tlsClient, err = loadTLS(cfg.TLS); err != nil {
			return nil, err
		}
	}
	if err := n.listen(); err != nil {
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.members.init()
	n.registerHandlers()
	n.wg.Add(1)
	go n.acceptLoop()
	n.findAdvertise()
	if opts.Started != nil {
		opts.Started(n)
	}
	if err := n.startMetadata(); err != nil {
		n.Close()
		return nil, err
	}
	n.log.Info().Str("listen", n.ln.Addr().String()).Str("advertise", n.advertise).
		Strs("seeds", cfg.Seeds).Str("join", cfg.Join).Bool("tls", n.tlsServer != nil).Msg("cluster node started")
	return n, nil
}

// Name is this node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// Addr is the address other nodes reach this node at (its Raft address).
func (n *Node) Addr() string { return n.advertise }

// ListenAddr is the listener's address.
func (n *Node) ListenAddr() net.Addr { return n.ln.Addr() }

func (n *Node) self() peer { return peer{name: n.cfg.NodeName, instance: n.instance} }

// Close stops the node at once, as a process that dies would (no
// leadership transfer, no leave): its groups, listener and connections.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closing {
		n.mu.Unlock()
		return nil
	}
	n.closing = true
	n.mu.Unlock()
	n.cancel()
	var err error
	if n.meta != nil {
		n.meta.DeregisterObserver(n.obs)
		err = n.meta.Shutdown().Error()
	}
	n.ln.Close()
	n.pool.close()
	n.mu.Lock()
	for c := range n.conns {
		c.Close()
	}
	groups := make([]*GroupTransport, 0, len(n.groups))
	for _, l := range n.groups {
		groups = append(groups, l)
	}
	n.mu.Unlock()
	for _, l := range groups {
		l.Close()
	}
	n.wg.Wait()
	for _, s := range n.stores {
		if c, ok := s.(io.Closer); ok {
			if e := c.Close(); e != nil && err == nil {
				err = e
			}
		}
	}
	n.members.closeWatchers()
	return err
}

// RaftConfig is the raft.Config of a group on this node: its ID (the node
// name), the Timing, the node's logger. Groups other than the metadata
// one (quorum queues) start from it.
func (n *Node) RaftConfig(group string) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.NodeName)
	c.HeartbeatTimeout = n.timing.HeartbeatTimeout
	c.ElectionTimeout = n.timing.ElectionTimeout
	c.LeaderLeaseTimeout = n.timing.LeaderLeaseTimeout
	c.CommitTimeout = n.timing.CommitTimeout
	c.SnapshotThreshold = n.timing.SnapshotThreshold
	c.SnapshotInterval = n.timing.SnapshotInterval
	c.TrailingLogs = n.timing.TrailingLogs
	c.Logger = n.hclog.Named(group)
	return c
}

// findAdvertise settles the address this node is known by: Config's
// Advertise, else its entry in Seeds (textually its Listen, else the seed
// that answers with this process's instance), else Listen with a host
// name for an unspecified host.
func (n *Node) findAdvertise() {
	if n.cfg.Advertise != "" {
		n.advertise = n.cfg.Advertise
		n.inSeeds = slices.Contains(n.cfg.Seeds, n.advertise)
		return
	}
	listen := n.cfg.Listen
	if listen == "" {
		listen = n.ln.Addr().String()
	}
	if slices.Contains(n.cfg.Seeds, listen) {
		n.advertise, n.inSeeds = listen, true
		return
	}
	if len(n.cfg.Seeds) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		defer cancel()
		found := make(chan string, len(n.cfg.Seeds))
		var wg sync.WaitGroup
		for _, s := range n.cfg.Seeds {
			wg.Go(func() {
				if h, err := n.hello(ctx, s); err == nil && h.Instance == hex.EncodeToString(n.instance[:]) {
					found <- s
				}
			})
		}
		wg.Wait()
		close(found)
		if s, ok := <-found; ok {
			n.advertise, n.inSeeds = s, true
			return
		}
	}
	host, port, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	n.advertise = net.JoinHostPort(host, port)
}

// startMetadata opens the metadata group's stores and starts its Raft.
func (n *Node) startMetadata() error {
	logs, stable, snaps, err := n.opts.Storage(MetadataGroup)
	if err != nil {
		return fmt.Errorf("cluster: metadata group storage: %w", err)
	}
	n.stores = []any{logs, stable, snaps}
	hasState, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("cluster: metadata group storage: %w", err)
	}
	trans, err := n.Transport(MetadataGroup)
	if err != nil {
		return err
	}
	n.fsm = newFSM(n.opts.Metadata)
	r, err := raft.NewRaft(n.RaftConfig(MetadataGroup), n.fsm, logs, stable, snaps, trans)
	if err != nil {
		trans.Close()
		return fmt.Errorf("cluster: metadata group: %w", err)
	}
	n.meta, n.metaTrans = r, trans
	n.fsm.nudger.Set(r)
	n.ready.Store(true)
	obsCh := make(chan raft.Observation, 16)
	n.obs = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.obs)
	n.wg.Add(2)
	go n.watchLeader(obsCh)
	go n.probeLoop()
	if !hasState {
		n.wg.Add(1)
		go n.form()
	} else {
		n.log.Info().Msg("cluster node restarted from its stored state")
		n.wg.Add(1)
		n.asking.Store(true)
		go n.standAfterRestart()
	}
	return nil
}

// Bootstrapped reports whether the metadata group has any state here: a
// configuration from a bootstrap, a leader's log or a snapshot.
func (n *Node) Bootstrapped() bool {
	return n.meta.LastIndex() > 0 || len(n.meta.GetConfiguration().Configuration().Servers) > 0
}

// helloInfo is the answer to cluster.hello: who a node is and whether it
// is in a cluster already.
type helloInfo struct {
	Name     string   `json:"name"`
	Instance string   `json:"instance"`
	HasState bool     `json:"has_state"`
	Seeds    []string `json:"seeds"`
}

func (n *Node) hello(ctx context.Context, addr string) (helloInfo, error) {
	var h helloInfo
	b, err := n.CallAddr(ctx, addr, "cluster.hello", nil)
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(b, &h)
	return h, err
}

var errStarting = errors.New("cluster: node still starting")

// joinRequest asks the leader to add a node as a voter.
type joinRequest struct {
	Name      string `json:"name"`
	Addr      string `json:"addr"`
	Forwarded bool   `json:"forwarded"`
}

func (n *Node) registerHandlers() {
	n.Handle("cluster.ping", func(context.Context, string, []byte) ([]byte, error) { return nil, nil })
	n.Handle("cluster.hello", func(context.Context, string, []byte) ([]byte, error) {
		h := helloInfo{Name: n.cfg.NodeName, Instance: hex.EncodeToString(n.instance[:]), Seeds: sortedSeeds(n.cfg.Seeds)}
		if n.ready.Load() {
			h.HasState = n.Bootstrapped()
		}
		return json.Marshal(h)
	})
	n.Handle("cluster.join", func(ctx context.Context, from string, b []byte) ([]byte, error) {
		if !n.ready.Load() {
			return nil, errStarting
		}
		var req joinRequest
		if err := json.Unmarshal(b, &req); err != nil {
			return nil, err
		}
		return nil, n.addVoter(ctx, req)
	})
	n.Handle("cluster.remove", func(ctx context.Context, from string, b []byte) ([]byte, error) {
		if !n.ready.Load() {
			return nil, errStarting
		}
		return nil, n.removeLocal(ctx, string(b))
	})
	n.Handle("cluster.propose", n.handlePropose)
	n.Handle("cluster.applied", n.handleApplied)
	// A restarted member asks what this node knows of the metadata group
	// (standAfterRestart).
	n.Handle("cluster.view", func(_ context.Context, from string, _ []byte) ([]byte, error) {
		if !n.ready.Load() {
			return EncodeViews([]View{{}}), nil
		}
		return EncodeViews([]View{ViewOf(n.meta, from, n.asking.Load())}), nil
	})
}

func sortedSeeds(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// addVoter adds req's node as a voter: here if this node leads the
// metadata group, else through the leader.
func (n *Node) addVoter(ctx context.Context, req joinRequest) error {
	if err := CheckNodeName(req.Name); err != nil {
		return fmt.Errorf("node name %q: %w", req.Name, err)
	}
	if n.meta.State() != raft.Leader {
		if req.Forwarded {
			return ErrNotLeader
		}
		req.Forwarded = true
		b, _ := json.Marshal(req)
		_, err := n.callLeader(ctx, "cluster.join", b)
		return err
	}
	for _, s := range n.meta.GetConfiguration().Configuration().Servers {
		if string(s.ID) == req.Name && string(s.Address) != req.Addr && n.members.running(req.Name) {
			return fmt.Errorf("node %s is running at %s: a second node cannot take its name", req.Name, s.Address)
		}
	}
	f := n.meta.AddVoter(raft.ServerID(req.Name), raft.ServerAddress(req.Addr), 0, n.timing.IOTimeout)
	if err := waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return ErrNotLeader
		}
		return err
	}
	n.log.Info().Str("member", req.Name).Str("addr", req.Addr).Msg("cluster member added")
	return nil
}

// Remove takes the named node out of the cluster (the metadata group's
// configuration): rabbitmqctl forget_cluster_node. The node should be
// stopped first; a running node that is removed stops taking part.
func (n *Node) Remove(ctx context.Context, name string) error {
	if n.meta.State() == raft.Leader {
		return n.removeLocal(ctx, name)
	}
	_, err := n.callLeader(ctx, "cluster.remove", []byte(name))
	return err
}

func (n *Node) removeLocal(ctx context.Context, name string) error {
	if n.meta.State() != raft.Leader {
		return ErrNotLeader
	}
	if _, ok := n.memberAddr(name); !ok {
		return fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	if err := waitFuture(ctx, n.meta.RemoveServer(raft.ServerID(name), 0, n.timing.IOTimeout)); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return ErrNotLeader
		}
		return err
	}
	n.log.Info().Str("member", name).Msg("cluster member removed")
	return nil
}

// callLeader calls method on the metadata leader, waiting for one to be
// known (within ctx); a leader that answers ErrNotLeader (it lost the
// leadership before acting) is asked again once the new one is known.
func (n *Node) callLeader(ctx context.Context, method string, req []byte) ([]byte, error) {
	for {
		addr, err := n.waitLeaderAddr(ctx)
		if err != nil {
			return nil, err
		}
		if addr == n.advertise {
			// This node leads now: the caller's local path.
			return nil, ErrNotLeader
		}
		b, err := n.CallAddr(ctx, addr, method, req)
		var ns *NotSentError
		if errors.Is(err, ErrNotLeader) || errors.As(err, &ns) {
			// Nothing was done: the leader lost its leadership, or the
			// one this node knows is gone. Again once another is known.
			select {
			case <-time.After(50 * time.Millisecond):
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w (last: %v)", ErrNoLeader, ctx.Err(), err)
			}
		}
		return b, err
	}
}

// ErrNoLeader: no leader was known within the context.
var ErrNoLeader = errors.New("cluster: no leader")

// waitLeaderAddr waits for a known metadata leader and returns its
// address.
func (n *Node) waitLeaderAddr(ctx context.Context) (string, error) {
	for {
		ch := n.members.leaderChanged()
		if addr, id := n.meta.LeaderWithID(); id != "" {
			if a, ok := n.memberAddr(string(id)); ok {
				return a, nil
			}
			return string(addr), nil
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-n.ctx.Done():
			return "", ErrClosed
		}
	}
}

// WaitLeader waits until the metadata group has a leader known to this
// node and returns its name.
func (n *Node) WaitLeader(ctx context.Context) (string, error) {
	if _, err := n.waitLeaderAddr(ctx); err != nil {
		return "", err
	}
	return n.Leader(), nil
}

// Leader is the name of the metadata group's leader as this node knows
// it ("" while there is none).
func (n *Node) Leader() string {
	_, id := n.meta.LeaderWithID()
	return string(id)
}

// IsLeader reports whether this node leads the metadata group.
func (n *Node) IsLeader() bool { return n.meta.State() == raft.Leader }

// memberAddr is the named member's address in the metadata group's
// latest configuration.
func (n *Node) memberAddr(name string) (string, bool) {
	if n.meta == nil {
		return "", false
	}
	for _, s := range n.meta.GetConfiguration().Configuration().Servers {
		if string(s.ID) == name {
			return string(s.Address), true
		}
	}
	return "", false
}

// Snapshot makes the metadata group take a snapshot now (and compact
// its log to Timing.TrailingLogs).
func (n *Node) Snapshot(ctx context.Context) error {
	return waitFuture(ctx, n.meta.Snapshot())
}

// waitFuture waits for f within ctx.
func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sawPeer records the process p is after a handshake with it, and calls
// Options.PeerRestarted when it is not the one seen before. A member that
// just completed a handshake runs: it counts as having answered a probe
// now (Members, Running), so that a peer restarted too fast for the
// probes to see it down is running here before its clients' requests
// (a consumer's attach) reach this node over a connection like this one.
func (n *Node) sawPeer(p peer) {
	if p.name == n.cfg.NodeName {
		return
	}
	if n.ready.Load() && slices.ContainsFunc(n.meta.GetConfiguration().Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == p.name }) {
		n.members.answered(p.name, time.Now())
	}
	n.instMu.Lock()
	defer n.instMu.Unlock()
	old, ok := n.instances[p.name]
	n.instances[p.name] = p.instance
	if ok && old != p.instance && n.opts.PeerRestarted != nil {
		n.log.Info().Str("peer_node", p.name).Msg("cluster peer restarted: a new process")
		n.opts.PeerRestarted(p.name)
	}
}
