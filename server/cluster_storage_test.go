package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/raftstore"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// freeClusterAddr is a loopback address nothing listens on.
func freeClusterAddr(t *testing.T) string {
	t.Helper()
	return testaddr.Free(t)
}

// A node whose metadata group an earlier Warren kept in a Raft store of
// its own (<data-dir>/cluster/raft, group 1) keeps its definitions after
// the upgrade: the group is moved into the node's one Raft store (where
// the quorum queues' groups are, and which their cleanup at start leaves
// alone), and the old directory is removed.
func TestClusterMetadataMovedIntoSharedRaftStore(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, Cluster: cluster.Config{NodeName: "n1", Listen: freeClusterAddr(t), Secret: "s3cret-s3cret"}}
	b := servertest.StartBroker(t, cfg)
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("kept-x", "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	b.Stop()

	// Put the data directory back into the old layout: the metadata group
	// as group 1 of a store under cluster/raft, none in the shared one.
	shared, err := raftstore.Open(filepath.Join(dir, "quorum", "raft"), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old, err := raftstore.Open(filepath.Join(dir, "cluster", "raft"), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := raftstore.CopyGroup(shared, raftstore.MetadataGroup, old, 1); err != nil {
		t.Fatal(err)
	}
	if err := shared.DeleteGroup(raftstore.MetadataGroup); err != nil {
		t.Fatal(err)
	}
	shared.Close()
	old.Close()

	b = servertest.StartBroker(t, cfg)
	conn, err = amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ = conn.Channel()
	if _, err := ch.QueueDeclarePassive("kept", true, false, false, false, nil); err != nil {
		t.Fatalf("the queue declared before the upgrade: %v", err)
	}
	ch, _ = conn.Channel()
	if err := ch.ExchangeDeclarePassive("kept-x", "topic", true, false, false, false, nil); err != nil {
		t.Fatalf("the exchange declared before the upgrade: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "cluster", "raft"), filepath.Join(dir, "cluster", "raft.migrated")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s after the upgrade: %v", p, err)
		}
	}
	// A second start finds the metadata where it now lives.
	b.Restart()
	conn2, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	ch, _ = conn2.Channel()
	if _, err := ch.QueueDeclarePassive("kept", true, false, false, false, nil); err != nil {
		t.Fatalf("after a second start: %v", err)
	}
}

// The quorum queues' cleanup at start (groups of no queue) leaves the
// groups that are not queues' alone: a node's metadata group shares the
// store with them.
func TestQuorumCleanupKeepsSystemGroups(t *testing.T) {
	dir := t.TempDir()
	st, err := raftstore.Open(filepath.Join(dir, "quorum", "raft"), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{raftstore.MetadataGroup, 42} { // 42: no queue has it
		g, _ := st.Group(id)
		if err := g.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	b := servertest.StartBroker(t, server.Config{DataDir: dir})
	b.Stop()
	st, err = raftstore.Open(filepath.Join(dir, "quorum", "raft"), raftstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids, err := st.GroupIDs()
	if err != nil || len(ids) != 1 || ids[0] != raftstore.MetadataGroup {
		t.Fatalf("groups after a start: %v, %v; want only the metadata group", ids, err)
	}
}
