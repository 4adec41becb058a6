package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/cluster"
)

// The cluster node (issue 14): started with the listeners when
// Config.Cluster.Listen is set, stopped after the last connection. Its
// metadata group holds the broker's definitions (cluster_meta.go,
// cluster_admin.go); its RPC channel carries the queue operations between
// a queue's home and the other nodes (cluster_remote.go,
// cluster_home.go). Raft's state is kept under <data-dir>/cluster
// (cluster_storage.go).

// startWait bounds how long Listen waits for this node to have applied
// the metadata log up to its own start (its node.started command).
const startWait = 60 * time.Second

// initCluster makes the cluster state of a server in cluster mode (New).
func (s *Server) initCluster() {
	if s.cfg.Cluster.Listen == "" {
		return
	}
	s.meta = newMeta(s)
	s.remote = newRemoteSide(s)
	s.home = newHomeSide(s)
	s.restarted = make(chan struct{}, 1)
	s.clusterCtx, s.clusterStop = context.WithCancel(context.Background())
}

// startCluster starts the cluster node, if configured.
func (s *Server) startCluster() error {
	if s.cfg.Cluster.Listen == "" {
		return nil
	}
	n, err := cluster.Start(s.cfg.Cluster, cluster.Options{
		Log:      &s.log,
		Metadata: s.meta,
		Storage:  s.raftStorage(),
		Started:  func(n *cluster.Node) { s.cluster = n },
		// Before the new process's RPCs: its consumers of this node's
		// queues must not meet its old process's.
		PeerRestarted: s.peerRestarted,
		// A killed node's quorum queues elect new leaders at once.
		PeerLost: s.quorum.PeerLost,
		// A hung or cut-off node's quorum queues elect new leaders on
		// the majority's side once the probes find it down.
		PeerDown: func(node string) {
			if n := s.cluster; n != nil {
				_ = s.quorum.PeerDown(node, n.Running)
			}
		},
		// A definition change is answered once every node applied it,
		// as RabbitMQ's (declare on one node, use on another at once).
		ApplyEverywhere: true,
	})
	var ce *cluster.ConfigError
	if errors.As(err, &ce) {
		return &ConfigError{"Cluster." + ce.Field, ce.Value, ce.Want}
	}
	if err != nil {
		return fmt.Errorf("cluster node: %w", err)
	}
	s.cluster = n
	n.Handle("warren.ops", s.whenReady(s.home.handleOps))
	n.Handle("warren.consume", s.whenReady(s.home.handleConsume))
	n.Handle("warren.get", s.whenReady(s.home.handleGet))
	n.Handle("warren.stats", s.whenReady(s.home.handleStats))
	n.Handle("warren.purge", s.whenReady(s.home.handlePurge))
	n.Handle("warren.qdelete", s.whenReady(s.home.handleDelete))
	n.Handle("warren.deliver", s.remote.handleDeliver)
	n.Handle("warren.ready", s.handleReady)
	s.startQuorumCluster(n)
	s.auth.SetReplicator(func(op auth.Op) error {
		_, err := s.propose(&metaCmd{Op: opAdmin, Admin: &op})
		return err
	})
	s.clusterWG.Add(2)
	go s.watchMembers(n)
	go s.announceStart()
	select {
	case <-s.meta.started:
		s.log.Info().Uint64("applied", n.AppliedIndex()).Msg("cluster metadata applied up to this node's start")
		// Replicas of quorum queues and streams the log no longer has
		// here go.
		s.quorum.DropUnknownReplicas()
		s.streams.Recovered()
	case <-time.After(startWait):
		s.log.Warn().Msg("cluster metadata not caught up yet (no quorum?): serving what this node has")
	}
	return nil
}

// announceStart proposes node.started (with the first start's users, in
// case the cluster has none yet) until it is committed.
func (s *Server) announceStart() {
	defer s.clusterWG.Done()
	seed, err := auth.SeedOp(s.cfg.Users)
	if err != nil {
		s.log.Error().Err(err).Msg("hashing the default users")
		return
	}
	for s.clusterCtx.Err() == nil {
		_, err := s.propose(&metaCmd{Op: opNodeStarted, Node: s.meta.self, Admin: &seed, Features: nodeFeatures})
		if err == nil {
			return
		}
		select {
		case <-time.After(time.Second):
		case <-s.clusterCtx.Done():
		}
	}
}

// watchMembers follows which nodes run: a home that stops takes its
// queues' stand-ins down here; a node that stops loses its consumers of
// this node's queues (their deliveries requeued).
func (s *Server) watchMembers(n *cluster.Node) {
	defer s.clusterWG.Done()
	ch := n.Watch(s.clusterCtx)
	probing := map[string]bool{}
	upc := make(chan string)
	for {
		for _, m := range n.Members() {
			if m.Name == s.meta.self {
				continue
			}
			if !m.Running && !s.remote.isDown(m.Name) {
				s.log.Warn().Str("node", m.Name).Msg("node down: its classic queues are unavailable here")
				s.remote.setDown(m.Name, true)
				s.home.peerDown(m.Name)
			} else if m.Running && s.remote.isDown(m.Name) && !probing[m.Name] {
				probing[m.Name] = true
				name := m.Name
				s.clusterWG.Add(1)
				go func() {
					defer s.clusterWG.Done()
					s.awaitReady(n, name)
					select {
					case upc <- name:
					case <-s.clusterCtx.Done():
						// watchMembers is gone: nobody reads upc.
					}
				}()
			}
		}
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case name := <-upc:
			delete(probing, name)
		case <-s.restarted:
		}
	}
}

// peerRestarted: node runs a new process, perhaps restarted too fast for
// its members to see it down (cluster.Options.PeerRestarted). What its
// old process had goes as at a MemberDown: its consumers of this node's
// queues (their deliveries requeued), and its queues' consumers here
// (cancelled), whose attachments on its old process are gone; it is
// down here until it answers warren.ready again (watchMembers probes).
func (s *Server) peerRestarted(node string) {
	if node == s.meta.self || s.home == nil {
		return
	}
	s.log.Warn().Str("node", node).Msg("node restarted: its old process's consumers and queues' consumers are gone")
	s.remote.setDown(node, true)
	s.home.peerDown(node)
	if s.quorum != nil {
		s.quorum.NodeRestarted(node)
	}
	select {
	case s.restarted <- struct{}{}:
	default:
	}
}

// awaitReady returns once node answers warren.ready (it has applied the
// metadata log up to its start, so it has its queues again), then marks
// it up; or when the server stops.
func (s *Server) awaitReady(n *cluster.Node, node string) {
	for s.clusterCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(s.clusterCtx, time.Second)
		_, err := n.Call(ctx, node, "warren.ready", nil)
		cancel()
		if err == nil {
			if s.remote.isDown(node) {
				s.log.Info().Str("node", node).Msg("node up: its classic queues are available here again")
				s.remote.setDown(node, false)
			}
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-s.clusterCtx.Done():
		}
	}
}

// notReadyText is the error of a queue call to a node still catching up
// with the metadata log at its start: its queues are not back yet.
const notReadyText = "catching up with the cluster's metadata"

// handleReady is warren.ready: an error until this node has applied the
// metadata log up to its own start.
func (s *Server) handleReady(context.Context, string, []byte) ([]byte, error) {
	select {
	case <-s.meta.started:
		return nil, nil
	default:
		return nil, errors.New(notReadyText)
	}
}

// whenReady refuses queue calls until this node is ready (handleReady).
func (s *Server) whenReady(h cluster.Handler) cluster.Handler {
	return func(ctx context.Context, from string, req []byte) ([]byte, error) {
		if _, err := s.handleReady(ctx, from, req); err != nil {
			return nil, err
		}
		return h(ctx, from, req)
	}
}

// stopCluster stops the cluster node, if one runs, once. s.cluster stays
// set (quorum queues still forwarding meanwhile read it: a closed node
// answers them with an error).
func (s *Server) stopCluster() {
	if s.cluster == nil || !s.clusterStopped.CompareAndSwap(false, true) {
		return
	}
	s.clusterStop()
	if err := s.cluster.Close(); err != nil {
		s.log.Warn().Err(err).Msg("closing the cluster node")
	}
	s.clusterWG.Wait()
}

// Cluster is the cluster node, nil for a single node (no
// Config.Cluster.Listen) or before Listen.
func (s *Server) Cluster() *cluster.Node { return s.cluster }
