package mgmt_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// A stream declared on n1, as another node's management API shows it:
// n1 is its node, its leader and its only member (Warren's streams are
// not replicated), not the node answering.
func TestClusterStreamMembers(t *testing.T) {
	addrs := clusterAddrs(t, 3)
	names := []string{"n1", "n2", "n3"}
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
	c, err := amqp091.Dial(envs[0].amqp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("st", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	var q struct {
		Node    string   `json:"node"`
		Leader  string   `json:"leader"`
		Members []string `json:"members"`
		Online  []string `json:"online"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, out := envs[1].do("GET", "/api/queues/%2F/st", nil)
		if st == 200 {
			if err := json.Unmarshal(out, &q); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET on n2: %d %s", st, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if q.Node != "n1" || q.Leader != "n1" || !slices.Equal(q.Members, []string{"n1"}) || !slices.Equal(q.Online, []string{"n1"}) {
		t.Fatalf("GET on n2: node=%s leader=%s members=%v online=%v, want n1 for each", q.Node, q.Leader, q.Members, q.Online)
	}
}
