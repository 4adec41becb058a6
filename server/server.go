// Package server is the broker: the listener, connections with their reader
// and writer goroutines, the channel state machine, one handler per AMQP
// method, and vhosts holding exchanges and queues.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/classic"
	"github.com/warrenmq/warren/queue/quorum"
	"github.com/warrenmq/warren/queue/replyto"
	"github.com/warrenmq/warren/queue/stream"
	"github.com/warrenmq/warren/raftstore"
)

// storeCloseTimeout bounds how long shutdown waits for the store to close.
const storeCloseTimeout = 30 * time.Second

// handOverTimeout bounds how long shutdown waits for the quorum queues
// this node leads to have leaders elsewhere.
const handOverTimeout = 3 * time.Second

// Server is one broker node.
type Server struct {
	cfg Config
	log zerolog.Logger

	vhostsMu sync.RWMutex
	vhosts   map[string]*vhost
	// firstStart is set by loadAuth when it seeded vhost / and the users.
	firstStart bool
	// unclean: the last stop was not clean (durable.go's runningBlob).
	unclean bool

	ln     net.Listener
	nextID atomic.Uint64

	tlsCfg *tls.Config  // nil without a TLS listener
	tlsLn  net.Listener // the amqps listener (raw TCP; see tls.go)

	store persist.Store
	msgID atomic.Uint64 // last message id handed to the store
	// publishers counts the open channels that have published.
	publishers atomic.Int64
	// types are the queue types by x-queue-type; classic is the classic
	// one, replies the direct reply-to pseudo-queues.
	types   *queue.Registry
	classic *classic.Type
	streams *stream.Type
	quorum  *quorum.Type
	raft    *raftstore.Store // every Raft group's storage (cluster_storage.go)
	replies *replyto.Type

	maxMessageSize atomic.Uint64

	auth    *auth.DB // users, vhost records, permissions, limits
	refused refusedLog
	churn   churn
	// clusterID is ClusterPermanentID's, read or made once.
	clusterID struct {
		once sync.Once
		id   string
	}
	// outMaxBuffered bounds a connection's unsent bytes (see limits.go).
	outMaxBuffered int
	// heartbeatUnit is what one unit of the negotiated heartbeat lasts:
	// a second, as the protocol has it; tests shorten it.
	heartbeatUnit time.Duration
	// closeOkWait is how long the broker waits for close-ok after a
	// connection.close it sent from outside the reader (conn.abort) before
	// it cuts the socket; tests lengthen it.
	closeOkWait time.Duration

	alarms *alarmState
	// cluster is the cluster node (cluster.go); nil for a single node.
	cluster        *cluster.Node
	clusterStopped atomic.Bool // stopCluster ran
	// In cluster mode (cluster.go): the metadata state machine, the
	// stand-ins of other nodes' queues, the home side of this node's,
	// and the context and goroutines of the node's links.
	meta        *meta
	remote      *remoteSide
	home        *homeSide
	clusterCtx  context.Context
	clusterStop context.CancelFunc
	clusterWG   sync.WaitGroup
	// restarted wakes watchMembers after a peer's new process was seen
	// (peerRestarted; buffered, 1).
	restarted chan struct{}
	// alarmPoke wakes the alarm monitor for a check now (buffered, 1).
	alarmPoke chan struct{}
	// openReplicaHook, when set (by a test, before Listen), is asked
	// right before this node opens its replica of a quorum queue; an
	// error fails the open as a disk error would. Nil in production.
	openReplicaHook func(vhost, name string) error

	connsMu sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// New returns a broker configured by cfg; Listen opens its socket.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	tlsCfg, err := newTLSConfig(&cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		log:     *cfg.Log,
		vhosts:  map[string]*vhost{},
		conns:   map[*conn]struct{}{},
		replies: replyto.NewType(),
		tlsCfg:  tlsCfg,

		outMaxBuffered: outMaxBuffered,
		alarmPoke:      make(chan struct{}, 1),
		heartbeatUnit:  time.Second,
		closeOkWait:    2 * time.Second,
	}
	if cfg.hooks.Store == nil {
		st, err := persist.Open(cfg.DataDir, persist.Options{
			Logger:      func(format string, args ...any) { s.log.Warn().Msgf(format, args...) },
			RepairLog:   cfg.RepairMessageLog,
			RepairStore: cfg.RepairStore,
			// The log's own look at the disk raises the alarm between
			// two polls.
			DiskFreeLimit: cfg.DiskFreeLimit,
			OnDiskLow:     func(uint64) { s.pokeAlarms() },
		})
		if err != nil {
			return nil, fmt.Errorf("open store in %s: %w", cfg.DataDir, err)
		}
		cfg.hooks.Store = st
		s.cfg.hooks.Store = st
	}
	s.store = cfg.hooks.Store
	s.maxMessageSize.Store(cfg.MaxMessageSize)
	limit := cfg.MemoryHighWatermarkBytes
	if limit == 0 {
		limit = memoryLimit(cfg.MemoryHighWatermark)
	}
	s.alarms = newAlarmState(limit)
	if err := s.openRaftStore(); err != nil {
		s.store.Close()
		return nil, err
	}
	if s.unclean, err = s.markRunning(); err != nil {
		s.closeRaftStore()
		s.store.Close()
		return nil, err
	}
	s.registerTypes()
	s.initCluster()
	// What non-durable queues spilled before a restart is gone for good.
	if err := os.RemoveAll(s.spillDir()); err != nil {
		s.store.Close()
		return nil, fmt.Errorf("empty the spill directory: %w", err)
	}
	if err := s.loadAuth(); err != nil {
		s.quorum.Close()
		s.closeRaftStore()
		s.store.Close()
		return nil, err
	}
	if err := s.recoverDefinitions(); err != nil {
		s.quorum.Close()
		s.closeRaftStore()
		s.store.Close()
		return nil, err
	}
	if s.cfg.Cluster.Listen == "" {
		// In a cluster the streams open at their declarations in the
		// metadata log, after this: the unknown ones go once it is
		// caught up (startCluster).
		s.streams.Recovered()
	}
	s.quorum.Recovered()
	return s, nil
}

// SetMaxMessageSize changes the largest accepted message body at run time
// (RabbitMQ's max_message_size).
func (s *Server) SetMaxMessageSize(n uint64) { s.maxMessageSize.Store(n) }

// Close releases what New opened, for a server whose Serve was never
// called; Serve does it itself when it returns.
func (s *Server) Close() error {
	s.vhostsMu.RLock()
	for _, v := range s.vhosts {
		v.setTracing(false)
	}
	s.vhostsMu.RUnlock()
	if s.ln != nil {
		s.ln.Close()
	}
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	s.stopCluster()
	s.quorum.Close()
	s.closeRaftStore()
	s.markStopped()
	return s.store.Close()
}

// Listen opens the AMQP listener, and the amqps one when configured.
// Serve accepts on them. In a cluster the node starts first and waits
// until it has applied the metadata log up to its start (startWait):
// only then do its ports open, as RabbitMQ opens its listeners once it
// has booted, so that a client meanwhile is refused and tries again (or
// another node) instead of waiting in the listener's backlog past its
// handshake deadline. On an error the caller closes the server (Close),
// which stops the cluster node too.
func (s *Server) Listen() error {
	if err := s.startCluster(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	if err := s.listenTLS(); err != nil {
		ln.Close()
		return err
	}
	s.ln = ln
	return nil
}

// Addr is the listener's address, once Listen has returned.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts connections until ctx is done, then closes every
// connection with 320 CONNECTION_FORCED and waits for their goroutines.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.log.Info().Str("listen", s.ln.Addr().String()).Msg("accepting AMQP connections")
	closeListeners := func() {
		s.ln.Close()
		if s.tlsLn != nil {
			s.tlsLn.Close()
		}
	}
	stop := context.AfterFunc(ctx, closeListeners)
	defer stop()
	alarmCtx, stopAlarms := context.WithCancel(ctx)
	alarmsDone := make(chan struct{})
	go func() { defer close(alarmsDone); s.runAlarms(alarmCtx) }()
	defer func() { stopAlarms(); <-alarmsDone }()
	tlsDone := make(chan struct{})
	if s.tlsLn != nil {
		s.log.Info().Str("listen", s.tlsLn.Addr().String()).Msg("accepting AMQPS (TLS) connections")
		go func() { defer close(tlsDone); s.acceptLoop(ctx, s.tlsLn, s.tlsCfg) }()
	} else {
		close(tlsDone)
	}
	s.acceptLoop(ctx, s.ln, nil)
	closeListeners()
	<-tlsDone
	s.shutdown()
	return nil
}

// acceptLoop accepts on ln until it is closed, starting a connection for
// each client; with tlsCfg, each is wrapped for TLS and handshakes on its
// own goroutine (conn.tlsHandshake).
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener, tlsCfg *tls.Config) {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary trouble such as too many open files: back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn().Err(err).Dur("retry_in", delay).Msg("accept failed")
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
			continue
		}
		delay = 0
		if tlsCfg != nil {
			nc = tls.Server(nc, tlsCfg)
		}
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) {
	s.connsMu.Lock()
	if s.closing || !s.admitSocket(nc) {
		s.connsMu.Unlock()
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.connsMu.Unlock()
	go func() {
		defer s.wg.Done()
		c.serve()
		s.connsMu.Lock()
		delete(s.conns, c)
		s.connsMu.Unlock()
	}()
}

func (s *Server) shutdown() {
	s.connsMu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connsMu.Unlock()
	s.log.Info().Int("connections", len(conns)).Msg("shutting down")
	for _, c := range conns {
		c.forceClose("broker shutdown")
	}
	s.wg.Wait()
	if s.cluster != nil {
		s.handOverQuorum()
	}
	s.stopCluster()
	s.stopQueues()
	// A store that cannot flush (its directory gone, a dead disk) may
	// retry for ever; shutdown does not wait for it beyond a bound.
	closed := make(chan error, 1)
	go func() {
		s.markStopped()
		closed <- s.store.Close()
	}()
	select {
	case err := <-closed:
		if err != nil {
			s.log.Error().Err(err).Msg("closing the store")
		}
	case <-time.After(storeCloseTimeout):
		s.log.Error().Dur("waited", storeCloseTimeout).Msg("the store did not close; exiting without it (unconfirmed writes may be lost)")
		return
	}
	st := s.store.Stats()
	s.log.Info().Uint64("commits", st.Commits).Float64("messages_per_commit", st.MessagesPerCommit()).Msg("store closed")
}

// handOverQuorum steps this node aside as the leader of its quorum
// queues before the cluster node closes: while its links are up, each
// leadership goes to an up-to-date replica at once, with what this
// leader had in flight. Closed first, the links would leave those
// entries unconfirmed until the leader's lease ran out, and the other
// replicas leaderless until they found this node gone.
func (s *Server) handOverQuorum() {
	ctx, cancel := context.WithTimeout(context.Background(), handOverTimeout)
	defer cancel()
	start := time.Now()
	led, moved := s.quorum.HandOverAll(ctx, func(node string) bool { return !s.cluster.KnownDown(node) })
	if led == 0 {
		return
	}
	ev := s.log.Info()
	if moved < led {
		ev = s.log.Warn()
	}
	ev.Int("led", led).Int("handed_over", moved).Dur("took", time.Since(start).Round(time.Millisecond)).Msg("quorum queue leaderships handed over before stopping")
}

func (s *Server) vhost(name string) *vhost {
	s.vhostsMu.RLock()
	defer s.vhostsMu.RUnlock()
	return s.vhosts[name]
}

// registerTypes sets up the queue types. Quorum queues are Raft groups
// on the node's shared Raft store under <data dir>/quorum; streams keep
// their logs under <data dir>/streams.
func (s *Server) registerTypes() {
	s.classic = classic.NewType(classic.Config{
		Store:         s.store,
		Window:        s.cfg.QueueWindow,
		SpillDir:      s.spillDir(),
		NextMessageID: func() uint64 { return s.msgID.Add(1) },
		Log:           func(err error, msg string) { s.log.Error().Err(err).Msg(msg) },
		Unclean:       s.unclean,
	})
	s.types = queue.NewRegistry()
	s.types.Register(s.classic)
	qc := quorum.Config{
		Dir:   filepath.Join(s.cfg.DataDir, "quorum"),
		Raft:  s.raft,
		Store: s.store,
		Log:   func(err error, msg string) { s.log.Error().Err(err).Msg(msg) },
	}
	if s.cfg.Cluster.Listen != "" {
		s.clusterQuorumConfig(&qc)
	}
	s.quorum = quorum.NewType(qc)
	s.types.Register(s.quorum)
	s.streams = stream.NewType(stream.Config{
		Dir:   filepath.Join(s.cfg.DataDir, "streams"),
		Store: s.store,
		Log:   func(err error, msg string) { s.log.Error().Err(err).Msg(msg) },
	})
	s.types.Register(s.streams)
}

// spillDir is where non-durable queues spill: a directory under the data
// directory, emptied at every start.
func (s *Server) spillDir() string { return filepath.Join(s.cfg.DataDir, "spill") }

// stopQueues stops the queues' timers, before the store closes: nothing
// expires or is settled into a closed store.
func (s *Server) stopQueues() {
	s.vhostsMu.RLock()
	defer s.vhostsMu.RUnlock()
	for _, v := range s.vhosts {
		for _, q := range v.queueList() {
			if st, ok := q.(queue.Stopper); ok {
				st.Stop()
			}
		}
	}
	if err := s.quorum.Close(); err != nil {
		s.log.Error().Err(err).Msg("closing the quorum queues' raft store")
	}
	s.closeRaftStore()
}
