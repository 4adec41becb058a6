package clusterconf

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// More cluster cases: quorum queues' limits, dead-lettering and single
// active consumer, and streams, each with its parts on different nodes.

// headerValue is a header's value as a transcript reads it: strings as
// they are, other values with their Go type (the wire type the client
// decoded: int64 is a long-long, int32 a long...), tables by sorted key
// and without the "time" fields (x-death's).
func headerValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var s []string
		for _, y := range x {
			s = append(s, headerValue(y))
		}
		return "[" + strings.Join(s, " ") + "]"
	case amqp.Table:
		var ks []string
		for k := range x {
			if k != "time" {
				ks = append(ks, k)
			}
		}
		sort.Strings(ks)
		var s []string
		for _, k := range ks {
			s = append(s, k+"="+headerValue(x[k]))
		}
		return "{" + strings.Join(s, " ") + "}"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v:%T", v, v)
}

// headers is a delivery's headers, sorted by name, as one string.
func headers(h amqp.Table) string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var s []string
	for _, k := range ks {
		s = append(s, k+"="+headerValue(h[k]))
	}
	if len(s) == 0 {
		return "headers none"
	}
	return "headers " + strings.Join(s, " ")
}

// getLine is a basic.get (no-ack) of queue on node i: "get-empty",
// "get-ok ..." with the delivery and its headers, or the error.
func (e *env) getLine(i int, queue string) string {
	var line string
	o := e.try(i, func(ch *amqp.Channel) error {
		d, ok, err := ch.Get(queue, true)
		switch {
		case err != nil:
		case !ok:
			line = "get-empty"
		default:
			line = fmt.Sprintf("get-ok %s message_count=%d %s", delivery(d), d.MessageCount, headers(d.Headers))
		}
		return err
	})
	if o != "ok" {
		return o
	}
	return line
}

// consumeTag starts a consumer of queue on node i as consume does, with
// the consumer tag given.
func (e *env) consumeTag(i int, queue, tag string, prefetch int, args amqp.Table) (*consumer, string) {
	e.t.Helper()
	ch := e.ch(i)
	if prefetch > 0 {
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return nil, "basic.qos: " + outcome(err)
		}
	}
	c := &consumer{ch: ch, tag: tag, cancels: ch.NotifyCancel(make(chan string, 4)),
		closes: ch.NotifyClose(make(chan *amqp.Error, 1))}
	ds, err := ch.Consume(queue, c.tag, false, false, false, false, args)
	if err != nil {
		return nil, outcome(err)
	}
	c.ds = ds
	return c, "ok"
}

// deleteQueue deletes q on node i: its outcome.
func (e *env) deleteQueue(i int, q string) string {
	return e.try(i, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
}

// quorumRejectPublish: a quorum queue with x-max-length=2 and
// reject-publish, published to one message at a time from another node,
// read from a third.
func quorumRejectPublish(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false,
		amqp.Table{"x-queue-type": "quorum", "x-max-length": int32(2), "x-overflow": "reject-publish"}))
	// RabbitMQ's limit is soft: the publish that takes the queue over it
	// is accepted, the next refused.
	for _, b := range []string{"r1", "r2", "r3", "r4"} {
		e.say("publish %s on node2: %s", b, e.publish(1, "", q, true, b))
	}
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=3 consumers=0" }))
	for range 4 {
		e.say("get on node3: %s", e.getLine(2, q))
	}
	e.say("publish r5 on node2 after the gets: %s", e.publish(1, "", q, true, "r5"))
	e.say("get on node1: %s", e.eventually(func() string { return e.getLine(0, q) },
		func(s string) bool { return s != "get-empty" }))
	e.say("delete on node3: %s", e.deleteQueue(2, q))
}

// quorumDeliveryLimit: a quorum queue with x-delivery-limit=1 whose
// consumer on another node returns each delivery, dead-lettered to a
// classic queue on a third node.
func quorumDeliveryLimit(e *env) {
	q, dlq := e.name("qq"), e.name("dlq")
	e.say("declare dlq on node3: %s", e.declare(2, dlq, true, false, nil))
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum",
		"x-delivery-limit": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "d1"))
	c, o := e.consume(1, q, 10, nil)
	e.say("consume on node2: %s", o)
	if c == nil {
		return
	}
	// Each delivery is returned; after each, the next delivery or the
	// message in the dlq, whichever comes.
	e.nackUntilDead(c, 1, 0, dlq, 6)
	e.say("then: %s", c.quiet())
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	e.say("get dlq on node1: %s", e.getLine(0, dlq))
	c.ch.Close()
	e.say("delete on node1: %s %s", e.deleteQueue(0, q), e.deleteQueue(0, dlq))
}

// nackUntilDead returns (nack, requeue) each delivery consumer c on node
// cons gets, at most max times, until the dead-letter queue dlq, asked on
// node at, holds the message: each delivery's line, then the dlq's (or
// why the wait ended).
func (e *env) nackUntilDead(c *consumer, cons, at int, dlq string, max int) {
	for n := 0; n < max; n++ {
		var d amqp.Delivery
		got, done := false, ""
		deadline := time.Now().Add(waitTimeout)
		for !got && done == "" {
			select {
			case x, ok := <-c.ds:
				if !ok {
					done = "deliveries ended"
				}
				d, got = x, ok
			case <-time.After(100 * time.Millisecond):
				if p := e.passive(at, dlq); p == "ok messages=1 consumers=0" {
					done = fmt.Sprintf("dlq on node%d: %s", at+1, p)
				} else if time.Now().After(deadline) {
					done = fmt.Sprintf("neither a delivery nor the dlq's message within %v", waitTimeout)
				}
			}
		}
		if done != "" {
			e.say("%s", done)
			return
		}
		e.say("node%d got %s %s", cons+1, delivery(d), headers(d.Headers))
		e.say("nack requeue: %s", outcome(d.Nack(false, true)))
	}
}

// sacTag is node i's management view of q's single active consumer:
// its consumers figure and single_active_consumer_tag (or "absent").
func (e *env) sacTag(i int, q string) string {
	st, v := e.mgmt(i, "GET", "/api/queues/%2F/"+url.PathEscape(q), nil)
	m, _ := v.(map[string]any)
	tag, ok := m["single_active_consumer_tag"]
	t := "absent"
	if ok {
		t = fmt.Sprint(tag)
	}
	return e.norm(fmt.Sprintf("%d consumers=%v single_active_consumer_tag=%s", st, m["consumers"], t))
}

// quorumSingleActive: a quorum queue with a single active consumer, its
// two consumers on other nodes than the queue's; the first cancelled,
// then its channel closed with the deliveries unacknowledged.
func quorumSingleActive(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false,
		amqp.Table{"x-queue-type": "quorum", "x-single-active-consumer": true}))
	a, o := e.consumeTag(1, q, "A-"+q, 10, nil)
	e.say("consume A on node2: %s", o)
	if a == nil {
		return
	}
	b, o := e.consumeTag(2, q, "B-"+q, 10, nil)
	e.say("consume B on node3: %s", o)
	if b == nil {
		return
	}
	// RabbitMQ counts the active consumer only.
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	e.say("publish on node1: %s", e.publish(0, "", q, true, "s1", "s2", "s3"))
	e.take(a, "A", 3)
	e.say("A then: %s", a.quiet())
	e.say("B: %s", b.quiet())
	// RabbitMQ 3.10 has no single_active_consumer_tag for a quorum queue;
	// its consumers figure counts the waiting consumer too (2), once its
	// figures are in.
	e.say("mgmt on node3: %s", e.eventually(func() string { return e.sacTag(2, q) },
		func(s string) bool { return strings.Contains(s, "consumers=1 ") || strings.Contains(s, "consumers=2 ") }))
	e.say("cancel A: %s", outcome(a.ch.Cancel(a.tag, false)))
	e.say("B after the cancel: %s", b.quiet())
	// The cancelled consumer counts while it holds its deliveries
	// (RabbitMQ: 2).
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=0 consumers=2" }))
	e.say("close A's channel: %s", outcome(a.ch.Close()))
	ds := e.take(b, "B", 3)
	for _, d := range ds {
		e.say("ack %s: %s", d.Body, outcome(d.Ack(false)))
	}
	e.say("B then: %s", b.quiet())
	// Until the closed channel's consumer is gone from the figure.
	e.say("mgmt on node2: %s", e.eventually(func() string { return e.sacTag(1, q) },
		func(s string) bool { return !strings.Contains(s, "consumers=2 ") }))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	b.ch.Close()
	e.say("delete on node2: %s", e.deleteQueue(1, q))
}

// quorumTTL: a quorum queue's message TTL, its dead-letter queue on
// another node.
func quorumTTL(e *env) {
	q, dlq := e.name("qq"), e.name("dlq")
	e.say("declare dlq on node3: %s", e.declare(2, dlq, true, false, nil))
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum",
		"x-message-ttl": int32(500), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "t1"))
	e.say("dlq on node1: %s", e.eventually(func() string { return e.passive(0, dlq) },
		func(s string) bool { return s == "ok messages=1 consumers=0" }))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=0" }))
	e.say("get dlq on node2: %s", e.getLine(1, dlq))
	e.say("delete on node3: %s %s", e.deleteQueue(2, q), e.deleteQueue(2, dlq))
}

// streamDelivery is a stream delivery with its x-stream-offset.
func streamDelivery(d amqp.Delivery) string {
	return fmt.Sprintf("body=%s redelivered=%v x-stream-offset=%s", d.Body, d.Redelivered, headerValue(d.Headers["x-stream-offset"]))
}

// streamAcrossNodes: a stream declared on node 1, published to on node
// 2, read on node 3 from the first offset and on node 2 from the next;
// basic.get, a consumer without basic.qos and a no-ack one.
func streamAcrossNodes(e *env) {
	s := e.name("st")
	e.say("declare on node1: %s", e.declare(0, s, true, false, amqp.Table{"x-queue-type": "stream"}))
	e.say("publish on node2: %s", e.publish(1, "", s, true, "s1", "s2", "s3", "s4", "s5"))
	first, o := e.consumeTag(2, s, "first-"+s, 10, amqp.Table{"x-stream-offset": "first"})
	e.say("consume first on node3: %s", o)
	if first == nil {
		return
	}
	takeStream := func(c *consumer, who string, n int) {
		_, ds := c.next(n)
		for _, d := range ds {
			e.say("%s got %s", who, streamDelivery(d))
			if err := d.Ack(false); err != nil {
				e.say("ack: %s", outcome(err))
			}
		}
		if len(ds) < n {
			e.say("%s: only %d of %d deliveries", who, len(ds), n)
		}
	}
	takeStream(first, "first", 5)
	e.say("first then: %s", first.quiet())
	next, o := e.consumeTag(1, s, "next-"+s, 10, amqp.Table{"x-stream-offset": "next"})
	e.say("consume next on node2: %s", o)
	if next == nil {
		return
	}
	e.say("next: %s", next.quiet())
	e.say("publish on node1: %s", e.publish(0, "", s, true, "s6"))
	takeStream(next, "next", 1)
	takeStream(first, "first", 1)
	e.say("next then: %s", next.quiet())
	e.say("get on node3: %s", e.try(2, func(ch *amqp.Channel) error { _, _, err := ch.Get(s, false); return err }))
	_, o = e.consumeTag(2, s, "noqos-"+s, 0, nil)
	e.say("consume without basic.qos on node3: %s", o)
	e.say("consume no-ack on node2: %s", e.try(1, func(ch *amqp.Channel) error {
		if err := ch.Qos(10, 0, false); err != nil {
			return err
		}
		_, err := ch.Consume(s, "noack-"+s, true, false, false, false, nil)
		return err
	}))
	first.ch.Close()
	next.ch.Close()
	e.say("delete on node2: %s", e.deleteQueue(1, s))
}

// quorumRedeclare: a quorum queue redeclared from the other nodes with
// other arguments.
func quorumRedeclare(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "q1", "q2"))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=2 consumers=0" }))
	decl := func(i int, durable bool, args amqp.Table) string {
		var dq amqp.Queue
		o := e.try(i, func(ch *amqp.Channel) error {
			var err error
			dq, err = ch.QueueDeclare(q, durable, false, false, false, args)
			return err
		})
		if o == "ok" {
			return fmt.Sprintf("ok messages=%d consumers=%d", dq.Messages, dq.Consumers)
		}
		return o
	}
	e.say("redeclare on node2: %s", decl(1, true, amqp.Table{"x-queue-type": "quorum"}))
	e.say("redeclare with x-max-length on node2: %s", decl(1, true, amqp.Table{"x-queue-type": "quorum", "x-max-length": int32(10)}))
	e.say("redeclare without x-queue-type on node3: %s", decl(2, true, nil))
	e.say("redeclare as classic on node3: %s", decl(2, true, amqp.Table{"x-queue-type": "classic"}))
	e.say("redeclare non-durable on node2: %s", decl(1, false, amqp.Table{"x-queue-type": "quorum"}))
	e.say("passive on node3: %s", e.passive(2, q))
	e.say("delete on node2: %s", e.deleteQueue(1, q))
}

// streamMgmt: the management API's view of a stream from another node
// than the declaring one. The members, leader and online line differs
// (Warren's streams are not replicated: knownDifferences).
func streamMgmt(e *env) {
	s := e.name("st")
	e.say("declare on node1: %s", e.declare(0, s, true, false, amqp.Table{"x-queue-type": "stream"}))
	var m map[string]any
	st := e.eventually(func() string {
		code, v := e.mgmt(1, "GET", "/api/queues/%2F/"+url.PathEscape(s), nil)
		m, _ = v.(map[string]any)
		return fmt.Sprint(code)
	}, func(string) bool {
		// Until the queue's figures are in (RabbitMQ's management shows
		// them, and the members, a while after the declaration).
		_, ok := m["messages"].(float64)
		return m["type"] == "stream" && m["state"] == "running" && ok
	})
	e.say("GET on node2: %s type=%v node=%v state=%v durable=%v arguments=%v", st, m["type"], m["node"], m["state"], m["durable"], m["arguments"])
	have := func(k string) string {
		v, ok := m[k]
		if !ok {
			return "absent"
		}
		return sortedStrings(v)
	}
	e.say("members=%s leader=%s online=%s", have("members"), have("leader"), have("online"))
	e.say("delete on node3: %s", e.deleteQueue(2, s))
}
