package clusterconf

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A second batch of cluster cases: quorum queues' drop-head
// dead-lettering, policies, transactions, consumer priorities, message
// properties and conditional deletes; streams' retention and offsets;
// the management API's consumers. Each has its parts on different nodes.

// quorumDropHeadDLX: a quorum queue with x-max-length=2 (drop-head)
// dead-lettering what it drops to a classic queue of another node; how
// many copies land there matters (one per dropped message, not one per
// replica).
func quorumDropHeadDLX(e *env) {
	q, dlq := e.name("qq"), e.name("dlq")
	e.say("declare dlq on node3: %s", e.declare(2, dlq, true, false, nil))
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum",
		"x-max-length": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "h1", "h2", "h3", "h4"))
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=2 consumers=0" }))
	e.say("dlq on node2: %s", e.eventually(func() string { return e.passive(1, dlq) },
		func(s string) bool { return s == "ok messages=2 consumers=0" }))
	for range 3 {
		e.say("get on node3: %s", e.getLine(2, q))
	}
	// Whatever the dlq holds: two messages, then nothing.
	for range 3 {
		e.say("get dlq on node1: %s", e.getLine(0, dlq))
	}
	e.say("delete on node2: %s %s", e.deleteQueue(1, q), e.deleteQueue(1, dlq))
}

// queuePolicy is node i's management view of q's policy.
func (e *env) queuePolicy(i int, q string) string {
	st, v := e.mgmt(i, "GET", "/api/queues/%2F/"+url.PathEscape(q), nil)
	m, _ := v.(map[string]any)
	return fmt.Sprintf("%d policy=%v effective_policy_definition=%v", st, m["policy"], m["effective_policy_definition"])
}

// quorumPolicy: a policy's delivery-limit and dead-letter settings on a
// quorum queue declared after it on another node, its consumer on a
// third returning each delivery.
func quorumPolicy(e *env) {
	q, dlq, pol := e.name("pqq"), e.name("dlq"), e.name("pol")
	e.say("declare dlq on node1: %s", e.declare(0, dlq, true, false, nil))
	st, _ := e.mgmt(0, "PUT", "/api/policies/%2F/"+pol, map[string]any{"pattern": "^" + q + "$", "apply-to": "queues",
		"definition": map[string]any{"delivery-limit": 1, "dead-letter-exchange": "", "dead-letter-routing-key": dlq}, "priority": 3})
	e.say("PUT policy on node1: %d", st)
	e.say("declare on node2: %s", e.declare(1, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	e.say("queue's policy on node3: %s", e.eventually(func() string { return e.queuePolicy(2, q) },
		func(s string) bool { return strings.Contains(s, "policy="+pol) }))
	e.say("publish on node1: %s", e.publish(0, "", q, true, "p1"))
	c, o := e.consume(2, q, 10, nil)
	e.say("consume on node3: %s", o)
	if c == nil {
		return
	}
	e.nackUntilDead(c, 2, 1, dlq, 4)
	e.say("then: %s", c.quiet())
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	e.say("get dlq on node2: %s", e.getLine(1, dlq))
	c.ch.Close()
	st, _ = e.mgmt(2, "DELETE", "/api/policies/%2F/"+pol, nil)
	e.say("DELETE policy on node3: %d", st)
	e.say("delete on node1: %s %s", e.deleteQueue(0, q), e.deleteQueue(0, dlq))
}

// quorumTx: publishes and an ack in transactions on other nodes than
// the quorum queue's.
func quorumTx(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	tx := e.ch(1)
	e.say("tx.select on node2: %s", outcome(tx.Tx()))
	pub := func(ch *amqp.Channel, body string) string {
		return outcome(ch.PublishWithContext(context.Background(), "", q, false, false,
			amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}))
	}
	e.say("publish t1 t2 in the transaction: %s %s", pub(tx, "t1"), pub(tx, "t2"))
	e.say("get on node3 before the commit: %s", e.getLine(2, q))
	e.say("tx.commit: %s", outcome(tx.TxCommit()))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=2 consumers=0" }))
	for range 3 {
		e.say("get on node3: %s", e.getLine(2, q))
	}
	e.say("publish t3 in the transaction: %s", pub(tx, "t3"))
	e.say("tx.rollback: %s", outcome(tx.TxRollback()))
	e.say("tx.commit of nothing: %s", outcome(tx.TxCommit()))
	// A confirmed publish after it: the get finds it, not t3.
	e.say("publish t4 on node1: %s", e.publish(0, "", q, true, "t4"))
	e.say("passive on node2: %s", e.passive(1, q))
	tx.Close()

	// An ack in a transaction, rolled back: the message stays unacked
	// and returns to the queue when the channel closes.
	ach := e.ch(2)
	e.say("tx.select on node3: %s", outcome(ach.Tx()))
	d, ok, err := ach.Get(q, false)
	switch {
	case err != nil:
		e.say("get on node3: %s", outcome(err))
		return
	case !ok:
		e.say("get on node3: get-empty")
		return
	}
	e.say("get on node3: get-ok %s message_count=%d", delivery(d), d.MessageCount)
	e.say("ack in the transaction: %s", outcome(d.Ack(false)))
	e.say("tx.rollback: %s", outcome(ach.TxRollback()))
	e.say("passive on node1 with the message unacked: %s", e.passive(0, q))
	e.say("close the channel: %s", outcome(ach.Close()))
	e.say("get on node1: %s", e.eventually(func() string { return e.getLine(0, q) },
		func(s string) bool { return s != "get-empty" }))
	e.say("get on node2: %s", e.getLine(1, q))
	e.say("delete on node3: %s", e.deleteQueue(2, q))
}

// quorumConsumerPriority: two consumers of a quorum queue on other nodes
// than its own, with x-priority 10 and 0, one delivery in flight each.
func quorumConsumerPriority(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	hi, o := e.consumeTag(2, q, "hi-"+q, 1, amqp.Table{"x-priority": int32(10)})
	e.say("consume x-priority 10 on node3: %s", o)
	if hi == nil {
		return
	}
	lo, o := e.consumeTag(1, q, "lo-"+q, 1, amqp.Table{"x-priority": int32(0)})
	e.say("consume x-priority 0 on node2: %s", o)
	if lo == nil {
		return
	}
	e.say("passive on node1: %s", e.eventually(func() string { return e.passive(0, q) },
		func(s string) bool { return s == "ok messages=0 consumers=2" }))
	e.say("publish on node1: %s", e.publish(0, "", q, true, "c1", "c2", "c3", "c4"))
	hd := e.take(hi, "hi", 1)
	ld := e.take(lo, "lo", 1)
	e.say("hi then: %s", hi.quiet())
	e.say("lo then: %s", lo.quiet())
	for range 2 {
		if len(hd) == 0 {
			break
		}
		e.say("hi acks %s: %s", hd[0].Body, outcome(hd[0].Ack(false)))
		hd = e.take(hi, "hi", 1)
		e.say("lo then: %s", lo.quiet())
	}
	if len(ld) > 0 {
		e.say("lo acks %s: %s", ld[0].Body, outcome(ld[0].Ack(false)))
	}
	e.say("lo then: %s", lo.quiet())
	if len(hd) > 0 {
		e.say("hi acks %s: %s", hd[0].Body, outcome(hd[0].Ack(false)))
	}
	e.say("hi then: %s", hi.quiet())
	e.say("passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return s == "ok messages=0 consumers=2" }))
	hi.ch.Close()
	lo.ch.Close()
	e.say("delete on node3: %s", e.deleteQueue(2, q))
}

// properties is a delivery's or a return's properties as one line.
func properties(p amqp.Publishing, h amqp.Table) string {
	return fmt.Sprintf("content_type=%q content_encoding=%q delivery_mode=%d priority=%d correlation_id=%q reply_to=%q expiration=%q message_id=%q timestamp=%d type=%q user_id=%q app_id=%q %s",
		p.ContentType, p.ContentEncoding, p.DeliveryMode, p.Priority, p.CorrelationId, p.ReplyTo, p.Expiration,
		p.MessageId, p.Timestamp.Unix(), p.Type, p.UserId, p.AppId, headers(h))
}

// quorumProperties: a message with every property, published mandatory
// on one node to a quorum queue of another, consumed on a third; and a
// mandatory publish nothing routes.
func quorumProperties(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	ch := e.ch(1)
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		e.say("confirm.select: %s", outcome(err))
		return
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 4))
	msg := amqp.Publishing{
		Headers: amqp.Table{"h-str": "v", "h-int": int32(7), "h-bool": true,
			"h-nested": amqp.Table{"a": int32(1), "b": "x", "c": amqp.Table{"d": int64(-2)}}, "h-array": []any{"e", int32(3)}},
		ContentType: "text/plain", ContentEncoding: "utf-8", DeliveryMode: amqp.Persistent, Priority: 5,
		CorrelationId: "corr-1", ReplyTo: "reply-q", Expiration: "60000", MessageId: "mid-1",
		Timestamp: time.Unix(1700000000, 0), Type: "type-1", UserId: "guest", AppId: "app-1", Body: []byte("props"),
	}
	pub := func(key string) string {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", key, true, false, msg)
		if err != nil {
			return outcome(err)
		}
		ok, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			return outcome(err)
		case ok:
			return "ack"
		}
		return "nack"
	}
	e.say("publish mandatory on node2: %s", pub(q))
	c, o := e.consume(2, q, 10, nil)
	e.say("consume on node3: %s", o)
	if c == nil {
		return
	}
	_, ds := c.next(1)
	for _, d := range ds {
		p := amqp.Publishing{ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, DeliveryMode: d.DeliveryMode,
			Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo, Expiration: d.Expiration,
			MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId, AppId: d.AppId}
		e.say("node3 got body=%s redelivered=%v exchange=%q key=%q", d.Body, d.Redelivered, d.Exchange, d.RoutingKey)
		e.say("properties: %s", properties(p, d.Headers))
		e.say("ack: %s", outcome(d.Ack(false)))
	}
	if len(ds) == 0 {
		e.say("no delivery within %v", deliverWait)
	}
	e.say("then: %s", c.quiet())
	e.say("publish mandatory unroutable on node2: %s", pub("cc-nowhere-"+q))
	select {
	case r := <-returns:
		e.say("basic.return %d %s exchange=%q key=%q body=%s", r.ReplyCode, r.ReplyText, r.Exchange, r.RoutingKey, r.Body)
		p := amqp.Publishing{ContentType: r.ContentType, ContentEncoding: r.ContentEncoding, DeliveryMode: r.DeliveryMode,
			Priority: r.Priority, CorrelationId: r.CorrelationId, ReplyTo: r.ReplyTo, Expiration: r.Expiration,
			MessageId: r.MessageId, Timestamp: r.Timestamp, Type: r.Type, UserId: r.UserId, AppId: r.AppId}
		e.say("returned properties: %s", properties(p, r.Headers))
	case <-time.After(waitTimeout):
		e.say("no basic.return within %v", waitTimeout)
	}
	c.ch.Close()
	e.say("delete on node2: %s", e.deleteQueue(1, q))
}

// quorumConditionalDelete: queue.delete if-unused and if-empty of a
// quorum queue from another node than its own and its consumer's.
func quorumConditionalDelete(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	c, o := e.consume(1, q, 10, nil)
	e.say("consume on node2: %s", o)
	if c == nil {
		return
	}
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=1" }))
	del := func(i int, ifUnused, ifEmpty bool) string {
		return e.try(i, func(ch *amqp.Channel) error {
			n, err := ch.QueueDelete(q, ifUnused, ifEmpty, false)
			if err == nil {
				e.say("deleted messages=%d", n)
			}
			return err
		})
	}
	e.say("delete if-unused on node3: %s", del(2, true, false))
	e.say("passive on node1: %s", e.passive(0, q))
	e.say("cancel on node2: %s", outcome(c.ch.Cancel(c.tag, false)))
	e.say("passive on node3: %s", e.eventually(func() string { return e.passive(2, q) },
		func(s string) bool { return s == "ok messages=0 consumers=0" }))
	e.say("publish on node2: %s", e.publish(1, "", q, true, "x1"))
	e.say("delete if-empty on node3: %s", del(2, false, true))
	e.say("passive on node1: %s", e.passive(0, q))
	e.say("purge on node3: %s", e.try(2, func(ch *amqp.Channel) error {
		n, err := ch.QueuePurge(q, false)
		if err == nil {
			e.say("purged %d", n)
		}
		return err
	}))
	e.say("delete if-unused if-empty on node3: %s", del(2, true, true))
	e.say("delete on node3: %s", del(2, false, false))
	e.say("passive on node2: %s", e.eventually(func() string { return e.passive(1, q) },
		func(s string) bool { return strings.HasPrefix(s, "404") }))
	c.ch.Close()
}

// streamRetention: a stream with small segments and a length limit in
// bytes, read from "first", "last", offset 50 and a timestamp an hour
// ago, on other nodes than its own.
func streamRetention(e *env) {
	s := e.name("st")
	e.say("declare on node1: %s", e.declare(0, s, true, false, amqp.Table{"x-queue-type": "stream",
		"x-stream-max-segment-size-bytes": int32(10000), "x-max-length-bytes": int32(20000)}))
	bodies := make([]string, 100)
	for n := range bodies {
		bodies[n] = fmt.Sprintf("m%03d", n) + strings.Repeat(".", 1020)
	}
	res := e.publish(1, "", s, true, bodies...)
	acks := strings.Count(res, "ack")
	if acks == 100 && res == strings.TrimSpace(strings.Repeat("ack ", 100)) {
		res = "100 acks"
	}
	e.say("publish 100 of 1 KB on node2: %s", res)
	// read consumes from offset spec until the last message (m099) or
	// deliverWait without one: the first offset and body, the count, the
	// last offset and body.
	read := func(i int, label string, offset any) {
		c, o := e.consumeTag(i, s, label+"-"+s, 200, amqp.Table{"x-stream-offset": offset})
		e.say("consume %s on node%d: %s", label, i+1, o)
		if c == nil {
			return
		}
		defer c.ch.Close()
		var first, last string
		n := 0
		timer := time.NewTimer(deliverWait)
		defer timer.Stop()
	loop:
		for {
			select {
			case d, ok := <-c.ds:
				if !ok {
					e.say("%s: deliveries ended", label)
					break loop
				}
				l := fmt.Sprintf("%s x-stream-offset=%s", d.Body[:min(4, len(d.Body))], headerValue(d.Headers["x-stream-offset"]))
				if n == 0 {
					first = l
				}
				last = l
				n++
				d.Ack(false)
				if strings.HasPrefix(string(d.Body), "m099") {
					break loop
				}
				timer.Reset(deliverWait)
			case <-timer.C:
				e.say("%s: no more within %v", label, deliverWait)
				break loop
			}
		}
		e.say("%s: %d deliveries, first %s, last %s", label, n, first, last)
		e.say("%s then: %s", label, c.quiet())
	}
	read(2, "first", "first")
	read(2, "last", "last")
	read(1, "offset50", int64(50))
	read(2, "timestamp", time.Now().Add(-time.Hour))
	e.say("delete on node2: %s", e.deleteQueue(1, s))
}

// mgmtConsumers: GET /api/consumers on node1 with a quorum queue's two
// consumers on node2 and node3.
func mgmtConsumers(e *env) {
	q := e.name("qq")
	e.say("declare on node1: %s", e.declare(0, q, true, false, amqp.Table{"x-queue-type": "quorum"}))
	a, o := e.consumeTag(1, q, "a-"+q, 5, nil)
	e.say("consume on node2: %s", o)
	if a == nil {
		return
	}
	ch := e.ch(2)
	if err := ch.Qos(7, 0, false); err != nil {
		e.say("basic.qos on node3: %s", outcome(err))
		return
	}
	_, err := ch.Consume(q, "b-"+q, true, true, false, false, nil)
	e.say("consume no-ack exclusive on node3: %s", outcome(err))
	var lines []string
	st := e.eventually(func() string {
		st, v := e.mgmt(0, "GET", "/api/consumers", nil)
		cs, _ := v.([]any)
		lines = nil
		for _, x := range cs {
			m, _ := x.(map[string]any)
			qm, _ := m["queue"].(map[string]any)
			if qm["name"] != q {
				continue
			}
			cd, _ := m["channel_details"].(map[string]any)
			lines = append(lines, e.norm(fmt.Sprintf("queue=%v vhost=%v consumer_tag=%v ack_required=%v prefetch_count=%v exclusive=%v active=%v activity_status=%v arguments=%v channel node=%v user=%v",
				qm["name"], qm["vhost"], m["consumer_tag"], m["ack_required"], m["prefetch_count"], m["exclusive"], m["active"],
				m["activity_status"], m["arguments"], cd["node"], cd["user"])))
		}
		sort.Strings(lines)
		return fmt.Sprint(st)
	}, func(string) bool { return len(lines) == 2 })
	e.say("GET /api/consumers on node1: %s, %d of the queue", st, len(lines))
	for _, l := range lines {
		e.say("  %s", l)
	}
	a.ch.Close()
	ch.Close()
	e.say("delete on node2: %s", e.deleteQueue(1, q))
}
