package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// deadLetter republishes messages that left q as rejected, expired or
// dropped for length to q's dead-letter exchange, with the x-death history
// RabbitMQ writes. It is queue.Hooks.DeadLetter, called with no locks held.
func (v *vhost) deadLetter(q queue.Queue, dead []queue.Dead) {
	name := q.Decl().Name
	for _, d := range dead {
		m, deaths, h := withDeath(d.Msg, name, d.Reason, time.Now(), d.HasRoutingKey)
		m.Exchange = d.Exchange
		// Without a dead-letter routing key the message keeps its routing
		// keys, its CC header's included (RabbitMQ's routing_keys also hold
		// the BCC keys, which Warren does not keep past the publish).
		var cc []string
		if d.HasRoutingKey {
			m.RoutingKey = d.RoutingKey
		} else {
			cc = ccKeys(h)
		}
		s := v.routePublish(m.Exchange, m.RoutingKey, cc, func() map[string]any { return h })
		targets := s.queues[:0:0]
		for _, target := range s.queues {
			if d.Reason == queue.Rejected || !isCycle(deaths, target.Decl().Name) {
				targets = append(targets, target)
			}
		}
		v.releaseScratch(s)
		m.StoreID = 0
		v.deliver(m, targets, nil, nil)
	}
}

// isCycle reports whether dead-lettering into queue name would loop with no
// client rejection in the loop; RabbitMQ drops the message then.
func isCycle(deaths []any, name string) bool {
	seen := false
	for _, x := range deaths {
		t, ok := x.(amqp.Table)
		if !ok {
			continue
		}
		if t["reason"] == string(queue.Rejected) {
			return false
		}
		if t["queue"] == name {
			seen = true
		}
	}
	return seen
}

// withDeath returns a copy of m whose headers record one more death in
// queue qname for reason r: the x-death entry for (queue, reason) is counted
// up and moved first, or a new one is put first; x-first-death-* are set
// on the first death. A per-message expiration moves into the entry's
// original-expiration, so the copy does not expire again. With dropCC (a
// dead-letter routing key replaces the routing keys) the CC header goes, as
// in RabbitMQ.
func withDeath(m *queue.Message, qname string, r queue.Reason, now time.Time, dropCC bool) (*queue.Message, []any, amqp.Table) {
	p, err := amqp.DecodeProperties(m.Props)
	if err != nil {
		p = amqp.Properties{}
	}
	h := amqp.Table{}
	for k, v := range p.Headers {
		h[k] = v
	}
	var deaths []any
	if old, ok := h["x-death"].([]any); ok {
		deaths = old
	}
	var entry amqp.Table
	rest := make([]any, 0, len(deaths)+1)
	for _, x := range deaths {
		t, ok := x.(amqp.Table)
		if ok && entry == nil && t["queue"] == qname && t["reason"] == string(r) {
			entry = amqp.Table{}
			for k, v := range t {
				entry[k] = v
			}
			continue
		}
		rest = append(rest, x)
	}
	if entry == nil {
		keys := []any{m.RoutingKey}
		if cc, ok := h["CC"].([]any); ok {
			keys = append(keys, cc...)
		}
		entry = amqp.Table{
			"queue":        qname,
			"reason":       string(r),
			"exchange":     m.Exchange,
			"routing-keys": keys,
			"count":        int64(0),
		}
		if p.Expiration != "" {
			entry["original-expiration"] = p.Expiration
		}
	}
	if dropCC {
		delete(h, "CC")
	}
	n, _ := entry["count"].(int64)
	entry["count"] = n + 1
	entry["time"] = now.UTC().Truncate(time.Second)
	deaths = append([]any{entry}, rest...)
	h["x-death"] = deaths
	if _, ok := h["x-first-death-reason"]; !ok {
		h["x-first-death-reason"] = string(r)
		h["x-first-death-queue"] = qname
		h["x-first-death-exchange"] = m.Exchange
	}
	p.Headers = h
	p.Expiration = ""
	p.Flags &^= amqp.FlagExpiration
	props, err := p.Append(nil)
	if err != nil {
		props = m.Props
	}
	c := &queue.Message{
		Exchange: m.Exchange, RoutingKey: m.RoutingKey, Props: props, Body: m.Body,
		Persistent: m.Persistent, Priority: m.Priority,
	}
	return c, deaths, h
}
