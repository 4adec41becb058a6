package clusterproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// A quorum queue on three broker processes: declared on n1 (which leads
// it), published to through a follower, consumed on the third; then its
// leader is killed with SIGKILL while a consumer on n3 holds deliveries:
// another replica leads, the confirmed messages are all there, publishing
// through the survivors goes on, and the killed node comes back as a
// replica that has everything.
func TestQuorumThreeNodes(t *testing.T) {
	c := newCluster(t, 3)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	t.Cleanup(func() { c.logEvents(t) })
	args := amqp091.Table{"x-queue-type": "quorum"}

	ch := c.channel(n1)
	if _, err := ch.QueueDeclare("qq", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*node{n2, n3} {
		waitFor(t, waitTimeout, "qq visible on "+nd.name, func() (bool, string) {
			_, err := c.passive(nd, "qq")
			return err == nil, errString(err)
		})
	}

	// The declaring node leads (x-queue-leader-locator client-local).
	var leader string
	waitFor(t, waitTimeout, "qq's leader known on n2", func() (bool, string) {
		leader = c.queueLeader(n2, "qq")
		return leader != "", "no leader"
	})
	if leader != "n1" {
		t.Fatalf("qq is led by %s, want n1, the declaring node", leader)
	}

	// Through a follower, consumed on the third node.
	msgs := bodies("a", 200)
	acked, nacked := publishConfirmed(t, c.channel(n2), "qq", msgs)
	if len(nacked) > 0 || len(acked) != len(msgs) {
		t.Fatalf("acked %d nacked %d of %d", len(acked), len(nacked), len(msgs))
	}
	for _, nd := range c.nodes {
		waitFor(t, waitTimeout, "200 ready on "+nd.name, func() (bool, string) {
			q, err := c.passive(nd, "qq")
			return err == nil && q.Messages == 200, fmt.Sprintf("%d %s", q.Messages, errString(err))
		})
	}
	got := consumeN(t, c.channel(n3), "qq", len(msgs), true)
	for _, m := range msgs {
		if _, ok := got[m]; !ok {
			t.Fatalf("%s not delivered", m)
		}
	}

	// A consumer on n3 holds 20 deliveries unacked; the leader dies.
	second := bodies("b", 100)
	if acked, nacked := publishConfirmed(t, c.channel(n1), "qq", second); len(acked) != len(second) || len(nacked) > 0 {
		t.Fatalf("acked %d nacked %d of %d", len(acked), len(nacked), len(second))
	}
	hold := c.channel(n3)
	if err := hold.Qos(20, 0, false); err != nil {
		t.Fatal(err)
	}
	held, err := hold.Consume("qq", "holder", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var holding []amqp091.Delivery
	for len(holding) < 20 {
		select {
		case d := <-held:
			holding = append(holding, d)
		case <-time.After(waitTimeout):
			t.Fatalf("holder got %d of 20", len(holding))
		}
	}
	// (n2 counts a replica as running once its probes reached it.)
	waitFor(t, waitTimeout, "n2 not quorum-critical with three replicas running", func() (bool, string) {
		code, body := c.mgmtCall(n2, "GET", "/api/health/checks/node-is-quorum-critical", "")
		return code == 200, fmt.Sprint(code, body)
	})
	c.kill(n1)
	start := time.Now()

	// Publishing through n2 goes on once another replica leads; what is
	// nacked during the election is published again.
	third := bodies("c", 100)
	confirmed := map[string]bool{}
	for _, m := range second {
		confirmed[m] = true
	}
	left := third
	for try := 0; len(left) > 0; try++ {
		if try > 20 {
			t.Fatalf("still %d unconfirmed after %d rounds", len(left), try)
		}
		a, n := publishConfirmed(t, c.channel(n2), "qq", left)
		for _, m := range a {
			confirmed[m] = true
		}
		left = n
	}
	t.Logf("publishing confirmed again %v after the leader's kill", time.Since(start).Round(time.Millisecond))
	if l := c.queueLeader(n2, "qq"); l == "n1" || l == "" {
		t.Fatalf("leader after n1's kill: %q", l)
	}

	// The holder's deliveries are still its own: acked now, they are
	// gone; everything else confirmed is delivered on n2.
	for _, d := range holding {
		delete(confirmed, string(d.Body))
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	// What the holder was given after its acks and before its cancel
	// stays its own until its channel closes (basic.cancel keeps a
	// quorum consumer's unacked messages, as RabbitMQ's): the close
	// gives it back.
	hold.Cancel("holder", false)
	hold.Close()
	rest := consumeN(t, c.channel(n2), "qq", len(confirmed), true)
	for m := range confirmed {
		if _, ok := rest[m]; !ok {
			t.Fatalf("confirmed %s not delivered after the failover", m)
		}
	}

	// With n1 down, stopping n2 too would leave qq without a majority.
	waitFor(t, waitTimeout, "n2 quorum-critical", func() (bool, string) {
		code, body := c.mgmtCall(n2, "GET", "/api/health/checks/node-is-quorum-critical", "")
		return code == 503 && strings.Contains(body, `"qq"`), fmt.Sprint(code, body)
	})

	// n1 comes back as a follower with the queue's state.
	c.restart(n1)
	waitFor(t, waitTimeout, "qq empty on the restarted n1", func() (bool, string) {
		q, err := c.passive(n1, "qq")
		return err == nil && q.Messages == 0, fmt.Sprintf("%d %s", q.Messages, errString(err))
	})
	last := bodies("d", 50)
	if acked, _ := publishConfirmed(t, c.channel(n1), "qq", last); len(acked) != len(last) {
		t.Fatalf("after n1's restart: %d of %d confirmed", len(acked), len(last))
	}
	got = consumeN(t, c.channel(n1), "qq", len(last), true)
	for _, m := range last {
		if _, ok := got[m]; !ok {
			t.Fatalf("%s not delivered on n1", m)
		}
	}

	// The whole cluster killed and restarted: what was confirmed is there.
	kept := bodies("e", 30)
	if acked, _ := publishConfirmed(t, c.channel(n3), "qq", kept); len(acked) != len(kept) {
		t.Fatalf("before the restart: %d of %d confirmed", len(acked), len(kept))
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
	got = consumeN(t, c.channel(n2), "qq", len(kept), true)
	for _, m := range kept {
		if _, ok := got[m]; !ok {
			t.Fatalf("%s lost in the whole cluster's restart", m)
		}
	}
}

// logEvents logs, when t failed, each node's log without its connection
// lines.
func (c *procCluster) logEvents(t *testing.T) {
	if !t.Failed() {
		return
	}
	for _, nd := range c.nodes {
		b, _ := os.ReadFile(filepath.Join(nd.dir, "broker.log"))
		var keep [][]byte
		for _, l := range bytes.Split(b, []byte("\n")) {
			if !bytes.Contains(l, []byte(`"connection opened"`)) && !bytes.Contains(l, []byte(`"connection closed"`)) &&
				!bytes.Contains(l, []byte(`"cluster connection refused"`)) {
				keep = append(keep, l)
			}
		}
		t.Logf("--- %s events:\n%s", nd.name, tail(bytes.Join(keep, []byte("\n")), 8000))
	}
}

// queueLeader asks nd's management API for a queue's leader ("" when it
// does not answer or knows none).
func (c *procCluster) queueLeader(nd *node, name string) string {
	req, _ := http.NewRequest("GET", "http://"+nd.mgmtAddr+"/api/queues/%2F/"+name, nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var q struct {
		Leader  string   `json:"leader"`
		Members []string `json:"members"`
	}
	if json.NewDecoder(resp.Body).Decode(&q) != nil {
		return ""
	}
	return q.Leader
}

// Quorum queue membership: a queue of two members is served through the
// node without a replica; its first leader n1 is deleted as a member (it
// hands the leadership over first, so publishing goes on), and the other
// nodes' stand-ins forward to the member left, also when n1 is down;
// members are added back;
// every confirmed message is delivered.
func TestQuorumMembership(t *testing.T) {
	c := newCluster(t, 3)
	n1 := c.nodes[0]
	t.Cleanup(func() { c.logEvents(t) })
	args := amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int32(2)}
	if _, err := c.channel(n1).QueueDeclare("qm", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	members := c.queueMembers(n1, "qm")
	if len(members) != 2 || members[0] != "n1" && members[1] != "n1" {
		t.Fatalf("members %v, want n1 and one other", members)
	}
	var outside, other *node
	for _, nd := range c.nodes {
		switch {
		case nd.name != members[0] && nd.name != members[1]:
			outside = nd
		case nd != n1:
			other = nd
		}
	}
	// The node without a replica serves the queue through a member.
	waitFor(t, waitTimeout, "qm visible on "+outside.name, func() (bool, string) {
		_, err := c.passive(outside, "qm")
		return err == nil, errString(err)
	})
	confirmed := publishAll(t, c, outside, bodies("m", 50))

	// n1, the leader, is deleted as a member: it serves the queue as a
	// stand-in, and so does outside, through the member left.
	if code, body := c.mgmtCall(outside, "DELETE", "/api/quorum-queues/%2F/qm/members/n1", ""); code != 204 {
		t.Fatalf("delete_member: %d %s", code, body)
	}
	waitFor(t, waitTimeout, "n1 not a member", func() (bool, string) {
		m := c.queueMembers(outside, "qm")
		return len(m) == 1 && m[0] == other.name, fmt.Sprint(m)
	})
	confirmed = append(confirmed, publishAll(t, c, n1, bodies("n", 50))...)
	confirmed = append(confirmed, publishAll(t, c, outside, bodies("o", 50))...)
	// outside's stand-in forwarded to n1 (the first leader), which relays;
	// with n1 down it forwards to the member left instead.
	c.kill(n1)
	confirmed = append(confirmed, publishAll(t, c, outside, bodies("k", 50))...)
	c.restart(n1)

	// Members added back.
	for _, nd := range []*node{outside, n1} {
		waitFor(t, waitTimeout, "add_member "+nd.name, func() (bool, string) {
			code, body := c.mgmtCall(other, "POST", "/api/quorum-queues/%2F/qm/members", `{"node":"`+nd.name+`"}`)
			return code == 201, fmt.Sprint(code, body)
		})
	}
	waitFor(t, waitTimeout, "three members", func() (bool, string) {
		m := c.queueMembers(n1, "qm")
		return len(m) == 3, fmt.Sprint(m)
	})
	if code, body := c.mgmtCall(n1, "POST", "/api/quorum-queues/%2F/nope/members", `{"node":"n2"}`); code != 404 {
		t.Fatalf("add_member of a missing queue: %d %s", code, body)
	}
	if code, body := c.mgmtCall(n1, "POST", "/api/quorum-queues/%2F/qm/members", `{"node":"n9"}`); code != 400 || !bytes.Contains([]byte(body), []byte("node_not_running")) {
		t.Fatalf("add_member on an unknown node: %d %s", code, body)
	}
	confirmed = append(confirmed, publishAll(t, c, n1, bodies("p", 50))...)
	consumeAll(t, c.channel(outside), "qm", confirmed)
}

// consumeAll consumes q until every one of want was delivered, failing
// with those missing after waitTimeout.
func consumeAll(t *testing.T, ch *amqp091.Channel, q string, want []string) {
	t.Helper()
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q, "consumeAll", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Cancel("consumeAll", false)
	missing := map[string]bool{}
	for _, m := range want {
		missing[m] = true
	}
	timeout := time.After(waitTimeout)
	for len(missing) > 0 {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("consumer closed with %d of %d missing", len(missing), len(want))
			}
			delete(missing, string(d.Body))
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			var ms []string
			for m := range missing {
				ms = append(ms, m)
			}
			sort.Strings(ms)
			t.Fatalf("%d of %d confirmed not delivered after %v: %v", len(ms), len(want), waitTimeout, ms)
		}
	}
}

// publishAll publishes bodies through nd with confirms, publishing again
// what is nacked (a nack is allowed, a loss is not), until all are
// confirmed or waitTimeout; it logs how many nacks there were.
func publishAll(t *testing.T, c *procCluster, nd *node, bodies []string) []string {
	t.Helper()
	var confirmed []string
	left := bodies
	nacks := 0
	deadline := time.Now().Add(waitTimeout)
	for len(left) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("through %s: %d of %d still unconfirmed after %v", nd.name, len(left), len(bodies), waitTimeout)
		}
		acked, nacked := publishConfirmed(t, c.channel(nd), "qm", left)
		confirmed = append(confirmed, acked...)
		nacks += len(nacked)
		left = nacked
	}
	if nacks > 0 {
		t.Logf("through %s: %d nacks before %d confirmed", nd.name, nacks, len(bodies))
	}
	return confirmed
}

// mgmtCall makes a request to nd's management API as guest.
func (c *procCluster) mgmtCall(nd *node, method, path, body string) (int, string) {
	req, _ := http.NewRequest(method, "http://"+nd.mgmtAddr+path, strings.NewReader(body))
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	// Through nd's network namespace, if it has one (its address is
	// not the host's then).
	hc := c.httpClient(nd)
	hc.Timeout = time.Minute
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// queueMembers asks nd's management API for a quorum queue's members.
func (c *procCluster) queueMembers(nd *node, name string) []string {
	_, body := c.mgmtCall(nd, "GET", "/api/queues/%2F/"+name, "")
	var q struct {
		Members []string `json:"members"`
	}
	json.Unmarshal([]byte(body), &q)
	return q.Members
}
