package clusterconf

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A case drives the cluster and writes what it sees to the transcript;
// RabbitMQ's transcript is the expectation. Node indexes are 0-based in
// code, node1..node3 in transcripts.
type clusterCase struct {
	name string
	// kills: the case kills and restarts a node (slower).
	kills bool
	run   func(e *env)
}

var cases = []clusterCase{
	{"ClassicAcrossNodes", false, func(e *env) { acrossNodes(e, nil) }},
	{"QuorumAcrossNodes", false, func(e *env) { acrossNodes(e, amqp.Table{"x-queue-type": "quorum"}) }},
	{"BasicGetAcrossNodes", false, func(e *env) { getAcrossNodes(e, nil) }},
	{"QuorumBasicGetAcrossNodes", false, func(e *env) { getAcrossNodes(e, amqp.Table{"x-queue-type": "quorum"}) }},
	{"ExclusiveFromOtherNode", false, exclusiveFromOtherNode},
	{"DeletePurgeFromOtherNode", false, func(e *env) { deletePurge(e, nil) }},
	{"QuorumDeletePurgeFromOtherNode", false, func(e *env) { deletePurge(e, amqp.Table{"x-queue-type": "quorum"}) }},
	{"ExchangeToExchangeAcrossNodes", false, exchangeToExchange},
	{"AccessAcrossNodes", false, accessAcrossNodes},
	{"PolicyAcrossNodes", false, policyAcrossNodes},
	{"MgmtNodesAndQueues", false, mgmtNodesAndQueues},
	{"ClassicHomeDown", true, classicHomeDown},
	{"MgmtNodeDown", true, mgmtNodeDown},
	{"QuorumLeaderKilled", true, quorumLeaderKilled},
	{"QuorumDeleteMember", false, quorumDeleteMember},
	{"QuorumRejectPublishAcrossNodes", false, quorumRejectPublish},
	{"QuorumDeliveryLimitAcrossNodes", false, quorumDeliveryLimit},
	{"QuorumSingleActiveAcrossNodes", false, quorumSingleActive},
	{"QuorumTTLAcrossNodes", false, quorumTTL},
	{"StreamAcrossNodes", false, streamAcrossNodes},
	{"QuorumRedeclareAcrossNodes", false, quorumRedeclare},
	{"StreamMgmtAcrossNodes", false, streamMgmt},
	{"QuorumDropHeadDLXAcrossNodes", false, quorumDropHeadDLX},
	{"QuorumPolicyAcrossNodes", false, quorumPolicy},
	{"QuorumTxAcrossNodes", false, quorumTx},
	{"QuorumConsumerPriorityAcrossNodes", false, quorumConsumerPriority},
	{"QuorumMandatoryAndPropertiesAcrossNodes", false, quorumProperties},
	{"QuorumDeleteIfUnusedIfEmptyAcrossNodes", false, quorumConditionalDelete},
	{"StreamRetentionAndOffsetsAcrossNodes", false, streamRetention},
	{"MgmtConsumersAcrossNodes", false, mgmtConsumers},
}

// acrossNodes: declare on node 1, publish on node 2, consume on node 3.
func acrossNodes(e *env, args amqp.Table) {
	q := e.name("q")
	e.say("declare on node1: %s", e.declare(0, q, true, false, args))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "m1", "m2", "m3"))
	e.say("passive on node3: %s", e.passive(2, q))
	c, o := e.consume(2, q, 10, nil)
	e.say("consume on node3: %s", o)
	if c == nil {
		return
	}
	ds := e.take(c, "node3", 3)
	for _, d := range ds {
		e.say("ack: %s", outcome(d.Ack(false)))
	}
	e.say("then: %s", c.quiet())
	e.say("passive on node2 with the consumer: %s", e.passive(1, q))
	e.say("cancel: %s", outcome(c.ch.Cancel(c.tag, false)))
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return strings.HasSuffix(s, "consumers=0") }))
	e.say("delete on node2: %s", e.try(1, func(ch *amqp.Channel) error {
		n, err := ch.QueueDelete(q, false, false, false)
		e.say("deleted messages=%d", n)
		return err
	}))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s != "ok messages=0 consumers=0" }))
}

// getAcrossNodes: basic.get on another node than the declaring one,
// reject with requeue from a third, get the redelivery.
func getAcrossNodes(e *env, args amqp.Table) {
	q := e.name("q")
	e.say("declare on node1: %s", e.declare(0, q, true, false, args))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "g1", "g2"))
	get := func(i int, ack bool) (amqp.Delivery, *amqp.Channel, string) {
		ch := e.ch(i)
		d, ok, err := ch.Get(q, ack)
		switch {
		case err != nil:
			return d, nil, outcome(err)
		case !ok:
			ch.Close()
			return d, nil, "get-empty"
		}
		return d, ch, fmt.Sprintf("get-ok %s message_count=%d", delivery(d), d.MessageCount)
	}
	d, ch, o := get(2, false)
	e.say("get on node3: %s", o)
	if ch != nil {
		e.say("reject requeue on node3: %s", outcome(d.Reject(true)))
		e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
			func(s string) bool { return s == "ok messages=2 consumers=0" }))
		ch.Close()
	}
	d, ch, o = get(1, false)
	e.say("get on node2: %s", o)
	if ch != nil {
		e.say("ack on node2: %s", outcome(d.Ack(false)))
		ch.Close()
	}
	_, ch, o = get(0, true)
	e.say("get no-ack on node1: %s", o)
	if ch != nil {
		ch.Close()
	}
	_, _, o = get(2, true)
	e.say("get on node3: %s", o)
	e.say("delete on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }))
	e.say("get on node2 after the delete: %s", e.eventually(func() string { _, _, o := get(1, true); return o },
		func(s string) bool { return s != "get-empty" }))
}

// exclusiveFromOtherNode: an exclusive queue of a connection on node 1,
// used from node 2.
func exclusiveFromOtherNode(e *env) {
	q := e.name("q")
	owner, err := e.dial(0)
	if err != nil {
		e.t.Fatal(err)
	}
	och, err := owner.Channel()
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = och.QueueDeclare(q, false, false, true, false, nil)
	e.say("exclusive declare on node1: %s", outcome(err))
	e.say("passive on node2: %s", e.passive(1, q))
	e.say("declare on node2: %s", e.declare(1, q, false, false, nil))
	e.say("exclusive declare on node2: %s", e.declare(1, q, false, true, nil))
	_, o := e.consume(1, q, 0, nil)
	e.say("consume on node2: %s", o)
	e.say("get on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, _, err := ch.Get(q, true); return err }))
	e.say("purge on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, err := ch.QueuePurge(q, false); return err }))
	e.say("delete on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }))
	e.say("bind on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.QueueBind(q, q, "amq.direct", false, nil) }))
	e.say("publish on node2: %s", e.publish(1, "", q, false, "x1"))
	_, ok, err := och.Get(q, true)
	e.say("get on node1 (owner): %v %s", ok, outcome(err))
	dq, err := och.QueueDeclare(q, false, false, true, false, nil)
	e.say("exclusive declare again on node1 (owner): %s messages=%d consumers=%d", outcome(err), dq.Messages, dq.Consumers)
	e.say("bind on node1 (owner): %s", outcome(och.QueueBind(q, "k-"+q, "amq.direct", false, nil)))
	e.say("publish to amq.direct on node2: %s", e.publish(1, "amq.direct", "k-"+q, false, "x2"))
	m, ok, err := och.Get(q, true)
	e.say("get on node1 (owner): %v %q %s", ok, m.Body, outcome(err))
	e.say("unbind on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.QueueUnbind(q, "k-"+q, "amq.direct", nil) }))
	e.say("unbind on node1 (owner): %s", outcome(och.QueueUnbind(q, "k-"+q, "amq.direct", nil)))
	e.say("publish to amq.direct on node2 after the unbind: %s", e.publish(1, "amq.direct", "k-"+q, false, "x3"))
	owner.Close()
	e.say("owner closed; passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return strings.HasPrefix(s, "404") }))
}

// deletePurge: purge and delete (plain, then if-empty and if-unused on
// a second queue) from other nodes than the declaring one; the
// consumer's view of the delete.
func deletePurge(e *env, args amqp.Table) {
	q := e.name("q")
	e.say("declare on node1: %s", e.declare(0, q, true, false, args))
	e.say("publish on node1: %s", e.publish(0, "", q, true, "p1", "p2", "p3"))
	e.say("purge on node2: %s", e.try(1, func(ch *amqp.Channel) error {
		n, err := ch.QueuePurge(q, false)
		e.say("purged %d", n)
		return err
	}))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=0" }))
	e.say("publish on node3: %s", e.publish(2, "", q, true, "p4", "p5"))
	c, o := e.consume(0, q, 1, nil)
	e.say("consume on node1: %s", o)
	if c != nil {
		e.take(c, "node1", 1)
	}
	e.say("delete on node2: %s", e.try(1, func(ch *amqp.Channel) error {
		n, err := ch.QueueDelete(q, false, false, false)
		e.say("deleted messages=%d", n)
		return err
	}))
	if c != nil && args == nil {
		e.say("consumer on node1: %s", c.waitCancel())
	}
	// (A quorum queue's consumer: RabbitMQ 3.10 sent it basic.cancel in
	// one run and nothing within a minute in the next; not compared.)
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return strings.HasPrefix(s, "404") }))
	e.say("delete again on node3: %s", e.try(2, func(ch *amqp.Channel) error {
		n, err := ch.QueueDelete(q, false, false, false)
		e.say("deleted messages=%d", n)
		return err
	}))
	e.say("purge on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueuePurge(q, false); return err }))

	q2 := e.name("q2")
	e.say("declare on node1: %s", e.declare(0, q2, true, false, args))
	e.say("publish on node2: %s", e.publish(1, "", q2, true, "r1"))
	e.say("delete if-empty on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q2, false, true, false); return err }))
	c, o = e.consume(0, q2, 1, nil)
	e.say("consume on node1: %s", o)
	e.say("delete if-unused on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q2, true, false, false); return err }))
	if c != nil {
		c.ch.Close()
	}
	e.say("delete on node1: %s", e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q2, false, false, false); return err }))
}

// exchangeToExchange: exchanges declared on different nodes, bound to
// each other from a third, the queue on the first.
func exchangeToExchange(e *env) {
	src, dst, q := e.name("src"), e.name("dst"), e.name("q")
	e.say("declare topic on node1: %s", e.try(0, func(ch *amqp.Channel) error { return ch.ExchangeDeclare(src, "topic", true, false, false, false, nil) }))
	e.say("declare fanout on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.ExchangeDeclare(dst, "fanout", true, false, false, false, nil) }))
	e.say("declare queue on node1: %s", e.declare(0, q, true, false, nil))
	e.say("bind queue to fanout on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.QueueBind(q, "", dst, false, nil) }))
	e.say("exchange.bind on node3: %s", e.try(2, func(ch *amqp.Channel) error { return ch.ExchangeBind(dst, "a.*", src, false, nil) }))
	e.say("publish a.b on node2: %s", e.publish(1, src, "a.b", true, "e1"))
	e.say("publish b.c on node3: %s", e.publish(2, src, "b.c", true, "e2"))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=1 consumers=0" }))
	e.say("get on node3: %s", e.try(2, func(ch *amqp.Channel) error {
		d, ok, err := ch.Get(q, true)
		if ok {
			e.say("got %s", delivery(d))
		}
		return err
	}))
	e.say("bind to a missing source on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.ExchangeBind(dst, "x", src+"-missing", false, nil) }))
	e.say("delete source if-unused on node3: %s", e.try(2, func(ch *amqp.Channel) error { return ch.ExchangeDelete(src, true, false) }))
	e.say("delete destination if-unused on node1: %s", e.try(0, func(ch *amqp.Channel) error { return ch.ExchangeDelete(dst, true, false) }))
	e.say("exchange.unbind on node1: %s", e.try(0, func(ch *amqp.Channel) error { return ch.ExchangeUnbind(dst, "a.*", src, false, nil) }))
	e.say("publish a.b on node2: %s", e.publish(1, src, "a.b", true, "e3"))
	e.say("delete source on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.ExchangeDelete(src, false, false) }))
	e.say("delete destination on node3: %s", e.try(2, func(ch *amqp.Channel) error { return ch.ExchangeDelete(dst, false, false) }))
	e.say("publish to the deleted source on node1: %s", e.eventually(func() string { return e.publish(0, src, "a.b", true, "e4") },
		func(s string) bool { return strings.Contains(s, "404") }))
	e.say("delete queue on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }))
}

// accessAcrossNodes: vhost, user and permissions made through one node's
// management API, used through the others.
func accessAcrossNodes(e *env) {
	vh, user := e.name("vh"), e.name("user")
	pv := url.PathEscape(vh)
	st, _ := e.mgmt(0, "PUT", "/api/vhosts/"+pv, map[string]any{})
	e.say("PUT vhost on node1: %d", st)
	st, _ = e.mgmt(0, "PUT", "/api/users/"+user, map[string]any{"password": "secret", "tags": ""})
	e.say("PUT user on node1: %d", st)
	dial := func(i int) string {
		c, err := e.dialAs(i, user, "secret", vh)
		if err != nil {
			return outcome(err)
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return "channel: " + outcome(err)
		}
		_, err = ch.QueueDeclare("", false, true, true, false, nil)
		return "declare: " + outcome(err)
	}
	e.say("connect on node2 without permissions: %s", dial(1))
	st, _ = e.mgmt(1, "PUT", "/api/permissions/"+pv+"/"+user, map[string]any{"configure": ".*", "write": ".*", "read": ".*"})
	e.say("PUT permissions on node2: %d", st)
	e.say("connect on node3: %s", e.eventually(func() string { return dial(2) }, func(s string) bool { return s == "declare: ok" }))
	e.say("connect on node1: %s", dial(0))
	st, _ = e.mgmt(2, "PUT", "/api/permissions/"+pv+"/"+user, map[string]any{"configure": "^amq\\.gen", "write": ".*", "read": ".*"})
	e.say("PUT narrower permissions on node3: %d", st)
	e.say("declare a named queue on node1: %s", e.eventually(func() string {
		c, err := e.dialAs(0, user, "secret", vh)
		if err != nil {
			return outcome(err)
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return outcome(err)
		}
		_, err = ch.QueueDeclare("named", false, true, false, false, nil)
		return outcome(err)
	}, func(s string) bool { return s != "ok" }))
	// A connection that stays open while its vhost is deleted elsewhere.
	held, err := e.dialAs(2, user, "secret", vh)
	e.say("connection on node3: %s", outcome(err))
	var closed chan *amqp.Error
	if held != nil {
		closed = held.NotifyClose(make(chan *amqp.Error, 1))
		defer held.Close()
	}
	st, _ = e.mgmt(1, "DELETE", "/api/permissions/"+pv+"/"+user, nil)
	e.say("DELETE permissions on node2: %d", st)
	e.say("connect on node1: %s", e.eventually(func() string { return dial(0) }, func(s string) bool { return s != "declare: ok" }))
	st, _ = e.mgmt(0, "DELETE", "/api/vhosts/"+pv, nil)
	e.say("DELETE vhost on node1: %d", st)
	if closed != nil {
		select {
		case err := <-closed:
			// RabbitMQ closes it with "vhost 'V' is deleted" or "vhost 'V'
			// is down", whichever of its two events comes first.
			o := strings.Replace(outcome(err), "' is down", "' is deleted", 1)
			e.say("held connection on node3 closed: %s", o)
		case <-time.After(waitTimeout):
			e.say("held connection on node3 stays open")
		}
	}
	e.say("connect on node2: %s", e.eventually(func() string { return dial(1) }, func(s string) bool { return s != "declare: ok" }))
	st, _ = e.mgmt(2, "DELETE", "/api/users/"+user, nil)
	e.say("DELETE user on node3: %d", st)
	st, _ = e.mgmt(1, "GET", "/api/users/"+user, nil)
	e.say("GET user on node2: %d", st)
}

// policyAcrossNodes: a policy set on one node applies to a queue
// declared on another, published to from a third.
func policyAcrossNodes(e *env) {
	q := e.name("pq")
	pol := e.name("pol")
	st, _ := e.mgmt(0, "PUT", "/api/policies/%2F/"+pol, map[string]any{"pattern": "^" + q + "$", "apply-to": "queues",
		"definition": map[string]any{"max-length": 2}, "priority": 7})
	e.say("PUT policy on node1: %d", st)
	e.say("declare on node2: %s", e.declare(1, q, true, false, nil))
	e.say("publish on node3: %s", e.publish(2, "", q, true, "a", "b", "c", "d"))
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=2 consumers=0" }))
	e.say("queue's policy on node3: %s", e.eventually(func() string {
		st, v := e.mgmt(2, "GET", "/api/queues/%2F/"+q, nil)
		m, _ := v.(map[string]any)
		return fmt.Sprintf("%d policy=%v effective_policy_definition=%v", st, m["policy"], m["effective_policy_definition"])
	}, func(s string) bool { return strings.Contains(s, "policy="+pol) }))
	st, _ = e.mgmt(2, "DELETE", "/api/policies/%2F/"+pol, nil)
	e.say("DELETE policy on node3: %d", st)
	e.say("publish on node1: %s", e.publish(0, "", q, true, "e", "f"))
	e.say("passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return s == "ok messages=4 consumers=0" }))
	e.say("delete on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }))
}

// nodeFields are /api/nodes fields whose presence and JSON type the
// cases record (RabbitMQ has more; these are the ones tools read).
var nodeFields = []string{"name", "type", "running", "uptime", "mem_used", "mem_limit", "mem_alarm", "disk_free",
	"disk_free_limit", "disk_free_alarm", "fd_used", "fd_total", "sockets_used", "sockets_total", "proc_used",
	"proc_total", "partitions", "os_pid", "processors", "run_queue", "being_drained"}

// queueFields likewise for /api/queues/{vhost}/{name}.
var queueFields = []string{"name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "node", "type", "state",
	"leader", "members", "online", "messages", "consumers", "policy"}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func sortedStrings(v any) string {
	a, ok := v.([]any)
	if !ok {
		return fmt.Sprint(v)
	}
	var s []string
	for _, x := range a {
		s = append(s, fmt.Sprint(x))
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}

// describeNodes is node i's /api/nodes as transcript lines.
func (e *env) describeNodes(i int) []string {
	st, v := e.mgmt(i, "GET", "/api/nodes", nil)
	out := []string{fmt.Sprintf("GET /api/nodes on node%d: %d", i+1, st)}
	ns, _ := v.([]any)
	sort.Slice(ns, func(a, b int) bool {
		ma, _ := ns[a].(map[string]any)
		mb, _ := ns[b].(map[string]any)
		return fmt.Sprint(ma["name"]) < fmt.Sprint(mb["name"])
	})
	for _, n := range ns {
		m, _ := n.(map[string]any)
		var fs []string
		for _, f := range nodeFields {
			if x, ok := m[f]; ok {
				fs = append(fs, f+":"+jsonType(x))
			}
		}
		out = append(out, e.norm(fmt.Sprintf("  %v running=%v type=%v partitions=%v fields %s", m["name"], m["running"], m["type"],
			sortedStrings(m["partitions"]), strings.Join(fs, " "))))
	}
	return out
}

// describeQueue is node i's /api/queues/%2F/q as a transcript line.
func (e *env) describeQueue(i int, q string) string {
	st, v := e.mgmt(i, "GET", "/api/queues/%2F/"+url.PathEscape(q), nil)
	m, _ := v.(map[string]any)
	var fs []string
	for _, f := range queueFields {
		if x, ok := m[f]; ok {
			fs = append(fs, f+":"+jsonType(x))
		}
	}
	// Normalised here, so that the cases' conditions read node1..3.
	return e.norm(fmt.Sprintf("GET /api/queues/%%2F/%s on node%d: %d node=%v type=%v state=%v leader=%v members=%v online=%v fields %s",
		q, i+1, st, m["node"], m["type"], m["state"], m["leader"], sortedStrings(m["members"]), sortedStrings(m["online"]),
		strings.Join(fs, " ")))
}

func mgmtNodesAndQueues(e *env) {
	for i := range 3 {
		for _, l := range e.describeNodes(i) {
			e.say("%s", l)
		}
	}
	cq, qq := e.name("cq"), e.name("qq")
	e.say("declare classic on node1: %s", e.declare(0, cq, true, false, nil))
	e.say("declare quorum on node2: %s", e.declare(1, qq, true, false, amqp.Table{"x-queue-type": "quorum"}))
	for i := range 3 {
		e.say("%s", e.eventually(func() string { return e.describeQueue(i, cq) }, func(s string) bool { return strings.Contains(s, "state=running") }))
		// A quorum queue's figures come in RabbitMQ's management a while
		// after its declaration.
		e.say("%s", e.eventually(func() string { return e.describeQueue(i, qq) }, func(s string) bool {
			return strings.Contains(s, "state=running") && strings.Contains(s, "messages:number")
		}))
	}
	st, v := e.mgmt(2, "GET", "/api/queues/%2F", nil)
	var names []string
	if qs, ok := v.([]any); ok {
		for _, x := range qs {
			if m, _ := x.(map[string]any); m["name"] == cq || m["name"] == qq {
				names = append(names, fmt.Sprintf("%v@%v", m["name"], m["node"]))
			}
		}
	}
	sort.Strings(names)
	e.say("GET /api/queues/%%2F on node3: %d %s", st, e.norm(strings.Join(names, " ")))
	e.say("delete on node3: %s %s",
		e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(cq, false, false, false); return err }),
		e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(qq, false, false, false); return err }))
}

// classicHomeDown: a durable classic queue whose home node is killed,
// used from the others, then back with its persistent messages.
func classicHomeDown(e *env) {
	q, qd := e.name("q"), e.name("qd")
	e.say("declare on node1: %s %s", e.declare(0, q, true, false, nil), e.declare(0, qd, true, false, nil))
	e.say("publish persistent on node1: %s", e.publish(0, "", q, true, "d1", "d2"))
	e.say("publish transient on node1: %s", e.publish(0, "", q, false, "t1"))
	c, o := e.consume(1, q, 1, nil)
	e.say("consume on node2: %s", o)
	if c != nil {
		e.take(c, "node2", 1) // left unacknowledged
	}
	e.kill(0)
	if c != nil {
		e.say("consumer on node2: %s", c.waitCancel())
	}
	e.say("passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return !strings.HasPrefix(s, "ok") }))
	// Each node finds out for itself (RabbitMQ at once, as the killed
	// node's distribution link drops).
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return !strings.HasPrefix(s, "ok") }))
	e.say("declare on node2: %s", e.declare(1, q, true, false, nil))
	e.say("declare transient on node2: %s", e.declare(1, q, false, false, nil))
	_, o = e.consume(2, q, 0, nil)
	e.say("consume on node3: %s", o)
	e.say("get on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, _, err := ch.Get(q, true); return err }))
	e.say("purge on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueuePurge(q, false); return err }))
	e.say("bind on node2: %s", e.try(1, func(ch *amqp.Channel) error { return ch.QueueBind(q, "k", "amq.direct", false, nil) }))
	e.say("publish on node3: %s", e.publish(2, "", q, true, "lost"))
	e.say("delete on node2: %s", e.try(1, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(qd, false, false, false); return err }))
	st, v := e.mgmt(1, "GET", "/api/queues/%2F/"+url.PathEscape(q), nil)
	m, _ := v.(map[string]any)
	e.say("GET queue on node2: %d node=%v state=%v", st, m["node"], m["state"])
	e.restart(0)
	e.say("passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return strings.HasPrefix(s, "ok") }))
	// Warren's other nodes take a restarted home's queues up again once
	// their probes see it running (up to a few seconds after it serves;
	// RabbitMQ at once): waited for, not compared.
	e.say("passive on node3 (the delete refused while down): %s", e.eventually(func() string { return e.passive(2, qd) },
		func(s string) bool { return strings.HasPrefix(s, "ok") }))
	c, o = e.consume(2, q, 10, nil)
	e.say("consume on node3: %s", o)
	if c != nil {
		ds := e.take(c, "node3", 2)
		for _, d := range ds {
			d.Ack(false)
		}
		e.say("then: %s", c.quiet())
		c.ch.Close()
	}
	e.say("delete on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }))
	e.say("delete on node1: %s", e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(qd, false, false, false); return err }))
}

// survivor hides which of the nodes other than dead leads a quorum
// queue (an election's outcome): their names in leader= and node= read
// <survivor>.
func survivor(s string, dead int) string {
	for i := range 3 {
		if i != dead {
			n := fmt.Sprintf("node%d", i+1)
			s = strings.ReplaceAll(s, "leader="+n, "leader=<survivor>")
			s = strings.ReplaceAll(s, "node="+n, "node=<survivor>")
		}
	}
	return s
}

// mgmtNodeDown: /api/nodes and /api/queues while a node is down.
func mgmtNodeDown(e *env) {
	cq, qq := e.name("cq"), e.name("qq")
	e.say("declare classic on node3: %s", e.declare(2, cq, true, false, nil))
	e.say("declare quorum on node3: %s", e.declare(2, qq, true, false, amqp.Table{"x-queue-type": "quorum"}))
	e.kill(2)
	for i := range 2 {
		// Until the others' figures are in too (RabbitMQ's management
		// lists a node without them for a while).
		l := e.eventually(func() string { return strings.Join(e.describeNodes(i), "\n") },
			func(s string) bool {
				return strings.Contains(s, "node3 running=false") && strings.Count(s, "uptime:number") == 2
			})
		for _, x := range strings.Split(l, "\n") {
			e.say("%s", x)
		}
	}
	e.say("%s", e.eventually(func() string { return e.describeQueue(0, cq) }, func(s string) bool { return !strings.Contains(s, "state=running") }))
	e.say("%s", e.eventually(func() string { return survivor(e.describeQueue(1, qq), 2) }, func(s string) bool {
		return strings.Contains(s, "leader=<survivor>") && strings.Contains(s, "state=running") && strings.Contains(s, "online=[node1 node2]")
	}))
	e.say("%s", e.eventually(func() string {
		st, v := e.mgmt(1, "GET", "/api/queues/%2F", nil)
		if qs, ok := v.([]any); ok {
			for _, x := range qs {
				if m, _ := x.(map[string]any); m["name"] == cq {
					return e.norm(fmt.Sprintf("GET /api/queues/%%2F on node2: %d %s node=%v state=%v", st, cq, m["node"], m["state"]))
				}
			}
		}
		return fmt.Sprintf("GET /api/queues/%%2F on node2: %d, no %s", st, cq)
	}, func(s string) bool { return strings.HasSuffix(s, "state=down") }))
	e.restart(2)
	e.say("%s", e.eventually(func() string { return e.describeQueue(0, cq) }, func(s string) bool { return strings.Contains(s, "state=running") }))
	e.say("%s", e.eventually(func() string { return survivor(e.describeQueue(1, qq), 2) }, func(s string) bool {
		return strings.Contains(s, "online=[node1 node2 node3]") && strings.Contains(s, "state=running")
	}))
	e.say("delete on node1: %s %s",
		e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(cq, false, false, false); return err }),
		e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(qq, false, false, false); return err }))
}

// quorumLeaderKilled: a consumer on node 2 of a quorum queue whose
// leader (node 1) is killed; a publisher on node 3 across the kill.
func quorumLeaderKilled(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	e.say("passive on node2: %s", e.passive(1, q))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "k1", "k2", "k3"))
	c, o := e.consume(1, q, 10, nil)
	e.say("consume on node2: %s", o)
	if c == nil {
		return
	}
	ds := e.take(c, "node2", 3)
	// Publishes in flight across the kill, to a second queue led by node 1.
	fq := e.name("fq")
	e.say("declare on node1: %s", e.declare(0, fq, true, false, amqp.Table{"x-queue-type": "quorum"}))
	e.say("passive on node3: %s", e.passive(2, fq))
	inflight := e.inflight(2, fq)
	e.kill(0)
	// The publisher runs across the election (a publish on node3 below
	// waits for it too: its confirm comes from the new leader).
	// Acked or nacked as the election goes (RabbitMQ did both).
	either := strings.NewReplacer("nack", "answered", "ack", "answered")
	e.say("publish on node3 after the kill: %s", either.Replace(e.publish(2, "", fq, true, "f-after")))
	acked, answered := inflight()
	e.say("in flight on node3: every publish acked or nacked: %v", answered)
	e.say("in flight: queue holds every acked one: %s", e.eventually(func() string {
		st := e.passive(2, fq)
		var m, c int
		if _, err := fmt.Sscanf(st, "ok messages=%d consumers=%d", &m, &c); err != nil {
			return st
		}
		return fmt.Sprint(m >= acked)
	}, func(s string) bool { return s == "true" }))
	e.say("publish on node3 after the kill: %s", e.publish(2, "", q, true, "k4", "k5"))
	// What the consumer sees: a cancel, redeliveries, or the new
	// messages only.
	more := e.take(c, "node2", 2)
	e.say("then: %s", c.quiet())
	for _, d := range append(ds, more...) {
		if err := d.Ack(false); err != nil {
			e.say("ack: %s", outcome(err))
		}
	}
	e.say("after the acks: %s", func() string {
		select {
		case err := <-c.closes:
			return "channel closed: " + outcome(err)
		case <-time.After(quietPeriod):
			return "channel open"
		}
	}())
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return strings.HasPrefix(s, "ok messages=0") }))
	e.restart(0)
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return strings.HasPrefix(s, "ok") }))
	e.say("delete on node1: %s %s", e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }),
		e.try(0, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(fq, false, false, false); return err }))
}

// quorumMembers is node i's /api/queues/%2F/q as "leader=L members=[..]
// online=[..]" (normalised).
func (e *env) quorumMembers(i int, q string) string {
	st, v := e.mgmt(i, "GET", "/api/queues/%2F/"+url.PathEscape(q), nil)
	m, _ := v.(map[string]any)
	return e.norm(fmt.Sprintf("%d leader=%v members=%v online=%v", st, m["leader"], sortedStrings(m["members"]), sortedStrings(m["online"])))
}

// quorumDeleteMember: a quorum queue declared on node 1 whose replica on
// node 3, the node of its consumer (holding unacknowledged deliveries),
// is removed (delete_member): what the consumer sees, its acks, the
// queue's figures and members on each node, and a publish after.
func quorumDeleteMember(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	all := "200 leader=node1 members=[node1 node2 node3] online=[node1 node2 node3]"
	e.say("members on node1: %s", e.eventually(func() string { return e.quorumMembers(0, q) },
		func(s string) bool { return s == all }))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "k1", "k2", "k3", "k4", "k5"))
	c, o := e.consume(2, q, 3, nil)
	e.say("consume on node3 (prefetch 3): %s", o)
	if c == nil {
		return
	}
	ds := e.take(c, "node3", 3)
	e.say("then: %s", c.quiet())
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=2 consumers=1" }))

	err := e.c.DeleteMember(2, q)
	e.say("delete_member node3: %s", outcome(err))
	two := "200 leader=node1 members=[node1 node2] online=[node1 node2]"
	for i := range 3 {
		e.say("members on node%d: %s", i+1, e.eventually(func() string { return e.quorumMembers(i, q) },
			func(s string) bool { return s == two }))
	}
	e.say("consumer on node3 after the removal: %s", c.quiet())
	for _, d := range ds {
		e.say("ack %s: %s", d.Body, outcome(d.Ack(false)))
	}
	more := e.take(c, "node3", 2)
	for _, d := range more {
		e.say("ack %s: %s", d.Body, outcome(d.Ack(false)))
	}
	e.say("then: %s", c.quiet())
	for i := range 3 {
		e.say("passive on node%d: %s", i+1, e.eventually(func() string { return e.passive(i, q) },
			func(s string) bool { return s == "ok messages=0 consumers=1" }))
	}
	e.say("publish on node2 after the removal: %s", e.publish(1, "", q, true, "k6"))
	more = e.take(c, "node3", 1)
	for _, d := range more {
		e.say("ack %s: %s", d.Body, outcome(d.Ack(false)))
	}
	e.say("then: %s", c.quiet())
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	// Anything the consumer's channel was told meanwhile.
	e.say("consumer on node3: %s", func() string {
		select {
		case tag := <-c.cancels:
			return "basic.cancel " + tag
		case err := <-c.closes:
			return "channel closed: " + outcome(err)
		default:
		}
		if c.ch.IsClosed() {
			return "channel closed"
		}
		return "no basic.cancel, channel open"
	}())
	e.say("cancel: %s", outcome(c.ch.Cancel(c.tag, false)))
	e.say("delete on node1: %s", e.try(0, func(ch *amqp.Channel) error {
		n, err := ch.QueueDelete(q, false, false, false)
		e.say("deleted messages=%d", n)
		return err
	}))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return strings.HasPrefix(s, "404") }))
}
