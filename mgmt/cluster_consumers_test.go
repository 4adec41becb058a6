package mgmt_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// /api/consumers lists the cluster's consumers, as RabbitMQ's does: a
// consumer on a channel of n2 is in n1's list, with n2 as its channel's
// node.
func TestClusterConsumers(t *testing.T) {
	addrs := clusterAddrs(t, 2)
	names := []string{"n1", "n2"}
	envs := make([]*env, 2)
	var wg sync.WaitGroup
	for i := range 2 {
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
	c, err := amqp091.Dial(envs[1].amqp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("cq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(7, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("cq", "tag-n2", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	type consumer struct {
		Tag           string `json:"consumer_tag"`
		PrefetchCount int    `json:"prefetch_count"`
		Queue         struct {
			Name string `json:"name"`
		} `json:"queue"`
		Channel struct {
			Node string `json:"node"`
		} `json:"channel_details"`
	}
	var cs []consumer
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, out := envs[0].do("GET", "/api/consumers", nil)
		if st != 200 {
			t.Fatalf("GET /api/consumers on n1: %d %s", st, out)
		}
		if err := json.Unmarshal(out, &cs); err != nil {
			t.Fatal(err)
		}
		if len(cs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(cs) != 1 || cs[0].Tag != "tag-n2" || cs[0].Queue.Name != "cq" || cs[0].PrefetchCount != 7 || cs[0].Channel.Node != "n2" {
		t.Fatalf("GET /api/consumers on n1: %+v, want n2's consumer tag-n2 of cq", cs)
	}
}
