package clusterproc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The faults the Jepsen-style tests inject into broker processes: kill -9
// (procCluster.kill, restart), SIGSTOP/SIGCONT, a wiped data directory
// rejoining through --cluster-join, and partitions between chosen pairs
// (clusters made by newNetnsCluster only).

// pause stops nd with SIGSTOP: its sockets stay open, nothing answers.
func (c *procCluster) pause(nd *node) {
	c.t.Helper()
	if err := nd.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	nd.paused = true
}

// resume continues a paused nd.
func (c *procCluster) resume(nd *node) {
	c.t.Helper()
	if err := nd.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
	nd.paused = false
}

// wipe kills nd, deletes its data directory, and starts it again as a
// fresh member joining through via (--cluster-join).
func (c *procCluster) wipe(nd, via *node) {
	c.t.Helper()
	c.kill(nd)
	if err := os.RemoveAll(filepath.Join(nd.dir, "data")); err != nil {
		c.t.Fatal(err)
	}
	nd.join = via.clusterAddr
	c.restart(nd)
}

// partition cuts a and b apart (both ways).
func (c *procCluster) partition(a, b *node) {
	c.t.Helper()
	if err := c.net.Partition(a.i, b.i); err != nil {
		c.t.Fatal(err)
	}
}

// heal removes every partition.
func (c *procCluster) heal() {
	c.t.Helper()
	if err := c.net.Heal(); err != nil {
		c.t.Fatal(err)
	}
}

// httpClient reaches nd's management API.
func (c *procCluster) httpClient(nd *node) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if c.net != nil {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.net.Dial(ctx, nd.i, network, addr)
		}
	}
	return &http.Client{Transport: tr, Timeout: 3 * time.Second}
}

// clusterView is the part of /api/cluster the tests read.
type clusterView struct {
	Node           string `json:"node"`
	MetadataLeader string `json:"metadata_leader"`
	Nodes          []struct {
		Name    string `json:"name"`
		Running bool   `json:"running"`
	} `json:"nodes"`
}

// view asks nd for its /api/cluster.
func (c *procCluster) view(nd *node) (clusterView, error) {
	var v clusterView
	req, err := http.NewRequest("GET", "http://"+nd.mgmtAddr+"/api/cluster", nil)
	if err != nil {
		return v, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := c.httpClient(nd).Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("/api/cluster on %s: %s", nd.name, resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// metaLeader waits until every node in asked agrees on one metadata
// leader among them, and returns it.
func (c *procCluster) metaLeader(asked ...*node) *node {
	c.t.Helper()
	if len(asked) == 0 {
		asked = c.nodes
	}
	var leader *node
	waitFor(c.t, waitTimeout, "one metadata leader that every node names", func() (bool, string) {
		name := ""
		for _, nd := range asked {
			v, err := c.view(nd)
			if err != nil {
				return false, err.Error()
			}
			if v.MetadataLeader == "" || (name != "" && v.MetadataLeader != name) {
				return false, fmt.Sprintf("%s names %q, others %q", nd.name, v.MetadataLeader, name)
			}
			name = v.MetadataLeader
		}
		for _, nd := range asked {
			if nd.name == name {
				leader = nd
				return true, ""
			}
		}
		return false, "leader " + name + " is not among the nodes asked"
	})
	return leader
}

// others returns the nodes but those given.
func (c *procCluster) others(not ...*node) []*node {
	var out []*node
	for _, nd := range c.nodes {
		skip := false
		for _, n := range not {
			skip = skip || n == nd
		}
		if !skip {
			out = append(out, nd)
		}
	}
	return out
}
