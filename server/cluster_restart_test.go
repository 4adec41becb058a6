package server_test

import (
	"fmt"
	"testing"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// A restarted cluster node serves once it applied the metadata log up to
// its own start: every queue declared before is there at once. (The
// node.started commands of the node's earlier runs, replayed from the log
// before the declarations after them, do not count as this run's.)
func TestClusterRestartServesOnlyCaughtUp(t *testing.T) {
	cfg := server.Config{Cluster: cluster.Config{NodeName: "n1", Listen: freeClusterAddr(t), Secret: "s3cret-s3cret"}}
	b := servertest.StartBroker(t, cfg)
	conn, err := amqp091.Dial(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := conn.Channel()
	const n = 100
	for i := range n {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	for round := range 2 {
		b.Restart()
		conn, err := amqp091.Dial(b.URL())
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := conn.Channel()
		_, err = ch.QueueDeclarePassive(fmt.Sprintf("q%d", n-1), true, false, false, false, nil)
		conn.Close()
		if err != nil {
			t.Fatalf("restart %d: the last queue declared: %v", round, err)
		}
	}
}
