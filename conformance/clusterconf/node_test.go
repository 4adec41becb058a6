package clusterconf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// runNode runs one Warren node of the local cluster in this process (the
// test binary re-executed with CLUSTERCONF_NODE_* set), as cmd/warren
// would with --node-name, --listen, --mgmt-listen, --cluster-listen and
// --cluster-seeds.
func runNode(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	log := zerolog.New(f).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	srv, err := server.New(server.Config{
		Listen: os.Getenv("CLUSTERCONF_NODE_ADDR"), DataDir: filepath.Join(dir, "data"), Log: &log,
		Cluster: cluster.Config{
			NodeName: os.Getenv("CLUSTERCONF_NODE_NAME"),
			Listen:   os.Getenv("CLUSTERCONF_NODE_CLUSTER"),
			Seeds:    strings.Split(os.Getenv("CLUSTERCONF_NODE_SEEDS"), ","),
			Secret:   "cluster-conformance-secret",
		},
	})
	if err != nil {
		fmt.Fprintln(f, "node:", err)
		os.Exit(2)
	}
	// Listen first (as cmd/warren does): the cluster node runs once it
	// returns, and the management server registers its cluster calls
	// (other nodes' /api/nodes entries) when it is made.
	if err := srv.Listen(); err != nil {
		fmt.Fprintln(f, "node:", err)
		os.Exit(2)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	mg := mgmt.New(srv, mgmt.Options{Listen: os.Getenv("CLUSTERCONF_NODE_MGMT"), Log: &log})
	if err := mg.Listen(); err != nil {
		fmt.Fprintln(f, "node: management:", err)
		os.Exit(2)
	}
	go mg.Serve(ctx)
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintln(f, "node:", err)
		os.Exit(2)
	}
}
