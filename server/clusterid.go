package server

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
)

// clusterIDFile holds the node's permanent cluster id, in the data
// directory (beside the store's files, which the store leaves alone).
const clusterIDFile = "cluster_id"

// ClusterPermanentID is the id RabbitMQ calls the persistent cluster id
// (rabbitmq_identity_info's rabbitmq_cluster_permanent_id): made at the
// first call on a data directory, "warren-cluster-id-" and 22 random
// characters, and the same from then on, across restarts. When the data
// directory cannot hold it the id lasts only as long as the process.
func (s *Server) ClusterPermanentID() string {
	s.clusterID.once.Do(func() {
		path := filepath.Join(s.cfg.DataDir, clusterIDFile)
		if b, err := os.ReadFile(path); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				s.clusterID.id = id
				return
			}
		}
		var r [16]byte
		rand.Read(r[:])
		s.clusterID.id = "warren-cluster-id-" + base64.RawURLEncoding.EncodeToString(r[:])
		if err := os.WriteFile(path, []byte(s.clusterID.id+"\n"), 0o644); err != nil {
			s.log.Warn().Err(err).Str("file", path).Msg("cluster id not saved: it changes at the next start")
		}
	})
	return s.clusterID.id
}
