package server

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/cluster"
)

// The cluster node (issue 14): started with the listeners when
// Config.Cluster.Listen is set, stopped after the last connection. It
// forms or joins the cluster and logs its membership; the broker's
// definitions are not in its metadata group yet.

// startCluster starts the cluster node, if configured.
func (s *Server) startCluster() error {
	if s.cfg.Cluster.Listen == "" {
		return nil
	}
	n, err := cluster.Start(s.cfg.Cluster, cluster.Options{
		Log: &s.log,
		// Metadata: the definitions' state machine goes here (issue 14);
		// until then the metadata group's commands are ignored.
		// Storage: cluster.DefaultStorage, in memory until raftstore lands.
	})
	var ce *cluster.ConfigError
	if errors.As(err, &ce) {
		return &ConfigError{"Cluster." + ce.Field, ce.Value, ce.Want}
	}
	if err != nil {
		return fmt.Errorf("cluster node: %w", err)
	}
	s.cluster = n
	return nil
}

// stopCluster stops the cluster node, if one runs.
func (s *Server) stopCluster() {
	if s.cluster == nil {
		return
	}
	if err := s.cluster.Close(); err != nil {
		s.log.Warn().Err(err).Msg("closing the cluster node")
	}
	s.cluster = nil
}

// Cluster is the cluster node, nil for a single node (no
// Config.Cluster.Listen) or before Listen.
func (s *Server) Cluster() *cluster.Node { return s.cluster }
