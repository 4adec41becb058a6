package clusterproc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestThreeNodes runs one 3-node cluster through the first path of issue
// 14: definitions declared on one node are on every node, a classic queue
// homed on one node is published to from a second and consumed from a
// third, its home's death and return, a consumer node's death, and a
// restart of the whole cluster.
func TestThreeNodes(t *testing.T) {
	c := newCluster(t, 3)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	steps := []struct {
		name string
		f    func(t *testing.T)
	}{
		{"DeclareVisibleEverywhere", func(t *testing.T) {
			ch := c.channel(n1)
			if _, err := ch.QueueDeclare("q1", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch.ExchangeDeclare("x1", "direct", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch.QueueBind("q1", "k1", "x1", false, nil); err != nil {
				t.Fatal(err)
			}
			// At once, as RabbitMQ's: a declare answered is applied on
			// every running node.
			for _, nd := range []*node{n2, n3} {
				if _, err := c.passive(nd, "q1"); err != nil {
					t.Fatalf("q1 right after its declare-ok, on %s: %v", nd.name, err)
				}
			}
			for i := range 10 {
				name := fmt.Sprint("vis", i)
				if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := c.passive(c.nodes[1+i%2], name); err != nil {
					t.Fatalf("%s right after its declare-ok, on %s: %v", name, c.nodes[1+i%2].name, err)
				}
			}
		}},
		{"ConflictingRedeclare406", func(t *testing.T) {
			ch := c.channel(n2)
			_, err := ch.QueueDeclare("q1", false, false, false, false, nil)
			code, text := amqpCode(err)
			if code != 406 || text != "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q1' in vhost '/': received 'false' but current is 'true'" {
				t.Fatalf("re-declare on n2: %d %q", code, text)
			}
			ch = c.channel(n3)
			err = ch.ExchangeDeclare("x1", "fanout", true, false, false, false, nil)
			code, text = amqpCode(err)
			if code != 406 {
				t.Fatalf("exchange re-declare on n3: %d %q", code, text)
			}
			mustContain(t, text, "inequivalent arg 'type' for exchange 'x1' in vhost '/'")
		}},
		{"PublishOnTwoConsumeOnThree", func(t *testing.T) {
			pub := c.channel(n2)
			msgs := bodies("a", 300)
			acked, nacked := publishConfirmed(t, pub, "q1", msgs)
			if len(nacked) > 0 || len(acked) != len(msgs) {
				t.Fatalf("acked %d nacked %d of %d", len(acked), len(nacked), len(msgs))
			}
			// Through the exchange too.
			if err := pub.Publish("x1", "k1", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("via-x1")}); err != nil {
				t.Fatal(err)
			}
			got := consumeN(t, c.channel(n3), "q1", len(msgs)+1, true)
			for _, m := range append(msgs, "via-x1") {
				if _, ok := got[m]; !ok {
					t.Fatalf("%s not delivered", m)
				}
			}
			waitFor(t, waitTimeout, "q1 empty, no unacked, on its home", func() (bool, string) {
				q, err := c.passive(n1, "q1")
				return err == nil && q.Messages == 0, errString(err)
			})
		}},
		{"StreamAcrossNodes", func(t *testing.T) {
			// A stream lives on its declaring node; any node serves it.
			args := amqp091.Table{"x-queue-type": "stream"}
			if _, err := c.channel(n1).QueueDeclare("s1", true, false, false, false, args); err != nil {
				t.Fatal(err)
			}
			msgs := bodies("s", 20)
			if acked, _ := publishConfirmed(t, c.channel(n2), "s1", msgs); len(acked) != len(msgs) {
				t.Fatalf("%d of %d confirmed", len(acked), len(msgs))
			}
			readStream(t, c.channel(n3), "s1", msgs)
			readStream(t, c.channel(n2), "s1", msgs) // every reader reads it all
			// A partition header out of range: 406 through any node, as
			// on the stream's home.
			if _, err := c.channel(n1).QueueDeclare("ps1", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-stream-partitions": 3}); err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, nd := range []*node{n1, n2} {
				ch := c.channel(nd)
				closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
				if err := ch.Publish("", "ps1", false, false, amqp091.Publishing{Headers: amqp091.Table{"x-stream-partition": 7}, Body: []byte("x")}); err != nil {
					t.Fatal(err)
				}
				select {
				case e := <-closed:
					if e == nil || e.Code != 406 {
						t.Fatalf("publish to partition 7 of 3 through %s: %v", nd.name, e)
					}
					texts = append(texts, e.Reason)
				case <-time.After(waitTimeout):
					t.Fatalf("publish to partition 7 of 3 through %s: the channel stayed open", nd.name)
				}
			}
			if texts[0] != texts[1] {
				t.Fatalf("the home says %q, another node %q", texts[0], texts[1])
			}
		}},
		{"RequeueOnChannelClose", func(t *testing.T) {
			msgs := bodies("b", 20)
			if _, nacked := publishConfirmed(t, c.channel(n2), "q1", msgs); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			ch := c.channel(n3)
			first := consumeN(t, ch, "q1", 10, false) // prefetch 10, none acked
			for _, d := range first {
				if d.Redelivered {
					t.Fatalf("%s redelivered on first delivery", d.Body)
				}
			}
			ch.Close()
			got := consumeN(t, c.channel(n3), "q1", 20, true)
			redelivered := 0
			for b := range first {
				if !got[b].Redelivered {
					t.Fatalf("%s came back without redelivered", b)
				}
				redelivered++
			}
			if redelivered != 10 {
				t.Fatalf("%d redelivered", redelivered)
			}
		}},
		{"BasicGetFromOtherNode", func(t *testing.T) {
			if _, nacked := publishConfirmed(t, c.channel(n1), "q1", []string{"g1"}); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			ch := c.channel(n3)
			var d amqp091.Delivery
			var ok bool
			waitFor(t, waitTimeout, "basic.get on n3", func() (bool, string) {
				var err error
				d, ok, err = ch.Get("q1", false)
				return ok || err != nil, errString(err)
			})
			if string(d.Body) != "g1" {
				t.Fatalf("got %q", d.Body)
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		}},
		{"ConsumerNodeDies", func(t *testing.T) {
			ch := c.channel(n1)
			if _, err := ch.QueueDeclare("q3", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if _, nacked := publishConfirmed(t, ch, "q3", bodies("c", 10)); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			waitFor(t, waitTimeout, "q3 on n2", func() (bool, string) {
				_, err := c.passive(n2, "q3")
				return err == nil, errString(err)
			})
			consumeN(t, c.channel(n2), "q3", 10, false)
			q, _ := c.passive(n1, "q3")
			if q.Messages != 0 {
				t.Fatalf("q3 has %d ready while n2 holds them", q.Messages)
			}
			c.kill(n2)
			waitFor(t, waitTimeout, "q3's deliveries to n2 requeued on n1", func() (bool, string) {
				q, err := c.passive(n1, "q3")
				return err == nil && q.Messages == 10, errString(err)
			})
			c.restart(n2)
		}},
		{"ConsumerNodeRestartsAtOnce", func(t *testing.T) {
			// Back before its members could see it down: the home still
			// learns that its old process's consumer and deliveries are
			// gone (cluster.Options.PeerRestarted).
			ch := c.channel(n1)
			if _, err := ch.QueueDeclare("q4", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if _, nacked := publishConfirmed(t, ch, "q4", bodies("r", 10)); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			consumeN(t, c.channel(n2), "q4", 10, false)
			c.kill(n2)
			c.restart(n2)
			waitFor(t, waitTimeout, "q4's deliveries to n2's old process requeued, its consumer gone", func() (bool, string) {
				q, err := c.passive(n1, "q4")
				return err == nil && q.Messages == 10 && q.Consumers == 0, fmt.Sprintf("%+v %v", q, err)
			})
			got := consumeN(t, c.channel(n2), "q4", 10, true)
			for b, d := range got {
				if !d.Redelivered {
					t.Fatalf("%s came back without redelivered", b)
				}
			}
		}},
		{"HomeDown404AndBack", func(t *testing.T) {
			ch := c.channel(n1)
			if _, err := ch.QueueDeclare("q2", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			msgs := bodies("d", 50)
			waitFor(t, waitTimeout, "q2 on n2", func() (bool, string) {
				_, err := c.passive(n2, "q2")
				return err == nil, errString(err)
			})
			if _, nacked := publishConfirmed(t, c.channel(n2), "q2", msgs); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			// An exclusive queue of a connection on n1, durable and
			// bound: locked on the other nodes, which route to it.
			owner := c.channel(n1)
			if _, err := owner.QueueDeclare("ex1", true, false, true, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := owner.QueueBind("ex1", "kx", "x1", false, nil); err != nil {
				t.Fatal(err)
			}
			_, err := c.passive(n3, "ex1")
			if code, _ := amqpCode(err); code != 405 {
				t.Fatalf("passive ex1 on n3: %v", err)
			}
			if err := c.channel(n2).Publish("x1", "kx", false, false, amqp091.Publishing{Body: []byte("to-ex1")}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, waitTimeout, "ex1's owner gets what n2 published", func() (bool, string) {
				d, ok, err := owner.Get("ex1", true)
				return ok && string(d.Body) == "to-ex1", errString(err)
			})
			c.kill(n1)
			want := "NOT_FOUND - home node 'n1' of durable queue 'q2' in vhost '/' is down or inaccessible"
			waitFor(t, waitTimeout, "q2 down on n2 and n3", func() (bool, string) {
				for _, nd := range []*node{n2, n3} {
					_, err := c.passive(nd, "q2")
					if code, text := amqpCode(err); code != 404 || text != want {
						return false, text
					}
				}
				return true, ""
			})
			// No route, as RabbitMQ 3.10 (conformance/clusterconf's
			// recording): confirmed, returned when mandatory.
			if _, nacked := publishConfirmed(t, c.channel(n2), "q2", []string{"lost"}); len(nacked) != 0 {
				t.Fatal("a publish to a queue whose home is down was nacked; RabbitMQ 3.10 acks it (no route)")
			}
			c.restart(n1)
			for _, nd := range []*node{n2, n3} {
				waitFor(t, waitTimeout, "q2 back on "+nd.name+" with its messages", func() (bool, string) {
					q, err := c.passive(nd, "q2")
					return err == nil && q.Messages == len(msgs), errString(err)
				})
			}
			got := consumeN(t, c.channel(n3), "q2", len(msgs), true)
			for _, m := range msgs {
				if _, ok := got[m]; !ok {
					t.Fatalf("%s lost", m)
				}
			}
			// The exclusive queue went with its connection's node, and
			// its binding with it.
			for _, nd := range c.nodes {
				waitFor(t, waitTimeout, "ex1 gone on "+nd.name, func() (bool, string) {
					_, err := c.passive(nd, "ex1")
					code, _ := amqpCode(err)
					return code == 404, errString(err)
				})
			}
			if _, err := c.channel(n2).QueueDeclare("ex1", false, false, true, false, nil); err != nil {
				t.Fatalf("ex1 declared again by another connection: %v", err)
			}
		}},
		{"WholeClusterRestart", func(t *testing.T) {
			if _, nacked := publishConfirmed(t, c.channel(n2), "q1", bodies("e", 5)); len(nacked) > 0 {
				t.Fatal("nacked")
			}
			for _, nd := range c.nodes {
				c.kill(nd)
			}
			for _, nd := range c.nodes {
				c.spawn(nd)
			}
			for _, nd := range c.nodes {
				c.waitReady(nd)
			}
			if t.Failed() {
				t.FailNow()
			}
			for _, nd := range c.nodes {
				waitFor(t, waitTimeout, "q1 with its 5 messages on "+nd.name, func() (bool, string) {
					q, err := c.passive(nd, "q1")
					return err == nil && q.Messages == 5, errString(err)
				})
			}
			// The exchange and binding are there too.
			ch := c.channel(n3)
			if err := ch.ExchangeDeclarePassive("x1", "direct", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if _, nacked := publishConfirmed(t, ch, "q1", nil); len(nacked) > 0 {
				t.Fatal()
			}
			got := consumeN(t, c.channel(n2), "q1", 5, true)
			keys := make([]string, 0, len(got))
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, bodies("e", 5)) {
				t.Fatalf("got %v", keys)
			}
			readStream(t, c.channel(n3), "s1", bodies("s", 20))
		}},
	}
	for _, s := range steps {
		start := time.Now()
		if !t.Run(s.name, s.f) {
			t.FailNow()
		}
		t.Logf("%s: %v", s.name, time.Since(start).Round(time.Millisecond))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// readStream reads stream q from its first offset through ch and checks
// it holds want, in order, each delivery with its x-stream-offset.
func readStream(t *testing.T, ch *amqp091.Channel, q string, want []string) {
	t.Helper()
	if err := ch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q, "readStream", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Cancel("readStream", false)
	timeout := time.After(waitTimeout)
	for i := range want {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("consumer closed after %d of %d", i, len(want))
			}
			if string(d.Body) != want[i] || d.Headers["x-stream-offset"] != int64(i) {
				t.Fatalf("delivery %d: %q at offset %v, want %q at %d", i, d.Body, d.Headers["x-stream-offset"], want[i], i)
			}
			d.Ack(false)
		case <-timeout:
			t.Fatalf("read %d of %d after %v", i, len(want), waitTimeout)
		}
	}
}
