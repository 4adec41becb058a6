package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A single node is a cluster of one: cluster_status names it as the
// disk, running and leading node; --formatter json is /api/cluster.
func TestClusterStatus(t *testing.T) {
	base, _ := broker(t)
	out := ctl(t, base, "cluster_status")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 15 || !strings.HasPrefix(lines[0], "Cluster status of node warren@") || lines[1] != "Basics" {
		t.Fatalf("cluster_status:\n%s", out)
	}
	node := strings.TrimSuffix(strings.TrimPrefix(lines[0], "Cluster status of node "), " ...")
	for _, section := range []string{"Disk Nodes", "Running Nodes", "Metadata leader"} {
		i := strings.Index(out, section+"\n\n")
		if i < 0 || !strings.HasPrefix(out[i+len(section)+2:], node+"\n") {
			t.Fatalf("section %s does not list %s:\n%s", section, node, out)
		}
	}
	if !strings.Contains(out, "Cluster listeners\n\n(none)") {
		t.Fatalf("a single node has no cluster listener:\n%s", out)
	}
	if !strings.HasSuffix(out, "Quorum queues\n\n(none)\n") {
		t.Fatalf("no quorum queue yet:\n%s", out)
	}
	ctl(t, base, "declare", "queue", "orders", "--arg", "x-queue-type=quorum")
	ctl(t, base, "declare", "queue", "plain")
	out = ctl(t, base, "cluster_status")
	want := fmt.Sprintf("Quorum queues\n\nVhost: /, queue: orders, leader: %s, members: %s, online: %s\n", node, node, node)
	if !strings.HasSuffix(out, want) {
		t.Fatalf("cluster_status does not end with %q:\n%s", want, out)
	}
	var c struct {
		Node  string `json:"node"`
		Nodes []struct {
			Name    string `json:"name"`
			Running bool   `json:"running"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(ctl(t, base, "cluster_status", "--formatter", "json")), &c); err != nil {
		t.Fatal(err)
	}
	if c.Node != node || len(c.Nodes) != 1 || !c.Nodes[0].Running {
		t.Fatalf("json: %+v", c)
	}
}

// forget_cluster_node on a single node is refused: there is no cluster
// to remove a node from.
func TestForgetClusterNodeSingle(t *testing.T) {
	base, _ := broker(t)
	out, err := ctlErr(base, "", "forget_cluster_node", "warren@elsewhere")
	if err == nil || !strings.Contains(err.Error(), "not in a cluster") || !strings.HasPrefix(out, "Removing node warren@elsewhere from the cluster\n") {
		t.Fatalf("forget_cluster_node on a single node: %q, %v", out, err)
	}
}
