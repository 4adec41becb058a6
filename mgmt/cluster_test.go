package mgmt_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/testaddr"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// clusterAddrs returns n free loopback addresses.
func clusterAddrs(t *testing.T, n int) []string {
	t.Helper()
	return testaddr.FreeN(t, n)
}

// In a cluster of three, /api/nodes on any node lists all three with
// their own figures (asked over the cluster), /api/cluster names the
// metadata leader, and a stopped node is listed as not running.
func TestClusterNodes(t *testing.T) {
	addrs := clusterAddrs(t, 3)
	names := []string{"n1", "n2", "n3"}
	// The nodes start together, as a cluster's do: each waits for the
	// metadata to catch up before it serves.
	envs := make([]*env, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := server.Config{Cluster: cluster.Config{NodeName: names[i], Listen: addrs[i], Seeds: addrs, Secret: "s3cret-s3cret"}}
			envs[i] = startBroker(t, cfg, mgmt.Options{})
		}()
	}
	wg.Wait()
	for i, e := range envs {
		if e == nil {
			t.Fatalf("node %d did not start", i)
		}
	}
	var c struct {
		Node           string `json:"node"`
		MetadataLeader string `json:"metadata_leader"`
		Nodes          []struct {
			Name    string `json:"name"`
			Running bool   `json:"running"`
		} `json:"nodes"`
	}
	// Each node learns that the others run from its own probes: wait
	// until every node sees three running nodes and a leader.
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 3; {
		envs[i].getJSON("/api/cluster", &c)
		running := 0
		for _, n := range c.Nodes {
			if n.Running {
				running++
			}
		}
		if len(c.Nodes) == 3 && running == 3 && c.MetadataLeader != "" {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not see a cluster of three running nodes with a leader: %+v", i, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	envs[0].getJSON("/api/cluster", &c)
	if c.Node != "n1" {
		t.Fatalf("/api/cluster answered by %q", c.Node)
	}
	var nodes []map[string]any
	envs[1].getJSON("/api/nodes", &nodes)
	if len(nodes) != 3 {
		t.Fatalf("/api/nodes lists %d nodes", len(nodes))
	}
	for i, n := range nodes {
		if n["name"] != names[i] || n["running"] != true || n["os_pid"] == nil || n["os_pid"] == "" || n["uptime"] == nil {
			t.Fatalf("node %d: %v", i, n)
		}
	}
	var one map[string]any
	envs[0].getJSON("/api/nodes/n3", &one)
	if one["name"] != "n3" || one["running"] != true {
		t.Fatalf("/api/nodes/n3: %v", one)
	}
	envs[0].expect("GET", "/api/nodes/nosuch", nil, 404)

	// A quorum queue declared on n1 is listed by every node's
	// /api/cluster with its leader and three replicas, all online.
	envs[0].expect("PUT", "/api/queues/%2F/orders", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}, 201)
	envs[0].expect("PUT", "/api/queues/%2F/plain", map[string]any{"durable": true}, 201)
	var qc struct {
		QuorumQueues []struct {
			VHost   string   `json:"vhost"`
			Name    string   `json:"name"`
			Leader  string   `json:"leader"`
			Members []string `json:"members"`
			Online  []string `json:"online"`
		} `json:"quorum_queues"`
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		envs[2].getJSON("/api/cluster", &qc)
		if len(qc.QuorumQueues) == 1 && len(qc.QuorumQueues[0].Online) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/cluster on n3 does not list the quorum queue with three replicas online: %+v", qc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	q := qc.QuorumQueues[0]
	if q.VHost != "/" || q.Name != "orders" || q.Leader != "n1" || strings.Join(q.Members, ",") != "n1,n2,n3" {
		t.Fatalf("/api/cluster's quorum queue: %+v", q)
	}
}
