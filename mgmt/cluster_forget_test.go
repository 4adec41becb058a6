package mgmt_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// forget_cluster_node (DELETE /api/cluster/nodes/NODE): a running node is
// refused (409), an unknown one is 404; a stopped one leaves the cluster
// on every node and the queues homed on it are deleted everywhere, while
// the other nodes' queues stay.
func TestForgetClusterNode(t *testing.T) {
	addrs := clusterAddrs(t, 3)
	names := []string{"n1", "n2", "n3"}
	cfg := func(i int) server.Config {
		return server.Config{Cluster: cluster.Config{NodeName: names[i], Listen: addrs[i], Seeds: addrs, Secret: "s3cret-s3cret"}}
	}
	envs := make([]*env, 2)
	var n3 *servertest.Broker
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 2 {
				n3 = servertest.StartBroker(t, cfg(i))
				return
			}
			envs[i] = startBroker(t, cfg(i), mgmt.Options{})
		}()
	}
	wg.Wait()
	if envs[0] == nil || envs[1] == nil || n3 == nil {
		t.Fatal("a node did not start")
	}
	declare := func(url, name string) {
		t.Helper()
		c, err := amqp091.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ch, _ := c.Channel()
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v", name, err)
		}
	}
	declare(n3.URL(), "on-n3")
	declare(n3.URL(), "on-n3-too")
	declare(envs[0].amqp, "on-n1")

	// Running: refused, the node answering included.
	envs[0].expect("DELETE", "/api/cluster/nodes/n2", nil, 409)
	envs[0].expect("DELETE", "/api/cluster/nodes/n1", nil, 409)
	envs[0].expect("DELETE", "/api/cluster/nodes/nosuch", nil, 404)

	n3.Stop()
	waitCluster(t, envs[0], func(c clusterView) bool { return c.running("n3") == false && len(c.Nodes) == 3 })
	out := envs[0].expect("DELETE", "/api/cluster/nodes/n3", nil, 200)
	var res struct {
		QueuesDeleted int `json:"queues_deleted"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.QueuesDeleted != 2 {
		t.Fatalf("forget answered %s (%v); want 2 queues deleted", out, err)
	}
	for i, e := range envs {
		waitCluster(t, e, func(c clusterView) bool { return len(c.Nodes) == 2 })
		c, err := amqp091.Dial(e.amqp)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"on-n3", "on-n3-too"} {
			ch, _ := c.Channel()
			_, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			var ae *amqp091.Error
			if !errAs(err, &ae) || ae.Code != 404 || !strings.Contains(ae.Reason, "no queue") {
				t.Fatalf("node %d: queue %s of the forgotten node: %v", i, q, err)
			}
		}
		ch, _ := c.Channel()
		if _, err := ch.QueueDeclarePassive("on-n1", true, false, false, false, nil); err != nil {
			t.Fatalf("node %d: n1's queue: %v", i, err)
		}
		c.Close()
	}
	// Forgotten already: not a member any more.
	envs[1].expect("DELETE", "/api/cluster/nodes/n3", nil, 404)
}

type clusterView struct {
	Nodes []struct {
		Name    string `json:"name"`
		Running bool   `json:"running"`
	} `json:"nodes"`
}

func (c clusterView) running(name string) bool {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n.Running
		}
	}
	return false
}

// waitCluster waits until e's /api/cluster satisfies ok.
func waitCluster(t *testing.T, e *env, ok func(clusterView) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var c clusterView
		e.getJSON("/api/cluster", &c)
		if ok(c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/cluster: %+v", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func errAs(err error, ae **amqp091.Error) bool {
	e, ok := err.(*amqp091.Error)
	*ae = e
	return ok
}
