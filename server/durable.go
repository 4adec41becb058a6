package server

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/warrenmq/warren/ack"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// This file connects the broker to the durable store: definitions are
// written when they change, persistent messages routed to durable queues
// are written before they become visible (their confirms wait for the
// fsync), settlements are written behind, and everything is read back at
// start-up.

func encodeArgs(args map[string]any) []byte {
	if len(args) == 0 {
		return nil
	}
	b, err := amqp.AppendTable(nil, amqp.Table(args))
	if err != nil {
		return nil
	}
	return b
}

func decodeArgs(b []byte) map[string]any {
	if len(b) == 0 {
		return nil
	}
	t, _, err := amqp.DecodeTable(b)
	if err != nil {
		return nil
	}
	return map[string]any(t)
}

// storeExchange writes a durable exchange's declaration.
func (v *vhost) storeExchange(e *exchange.Exchange) error {
	if !e.Durable {
		return nil
	}
	return v.store.SaveExchange(persist.ExchangeRecord{
		VHost: v.name, Name: e.Name, Kind: e.Kind.String(), Durable: true,
		AutoDelete: e.AutoDelete, Internal: e.Internal, Args: encodeArgs(e.Args),
	})
}

// storable reports whether a queue's declaration is written to the store:
// durable and not exclusive (exclusive queues die with their connection,
// restarts included).
func storable(d queue.Decl) bool { return d.Durable && !d.Exclusive }

// bindingDurable reports whether a binding from src to dest survives a
// restart: both ends are durable. v.mu must be held.
func (v *vhost) bindingDurable(src string, d binding.Destination) bool {
	e := v.exchanges[src]
	if e == nil || !e.Durable || src == "" {
		return false
	}
	switch d.Kind {
	case binding.Exchange:
		x := v.exchanges[d.Name]
		return x != nil && x.Durable
	default:
		q := v.queues[d.Name]
		return q != nil && q.ID != 0
	}
}

func bindingRecord(vhost, src string, b binding.Binding) persist.BindingRecord {
	return persist.BindingRecord{
		VHost: vhost, Source: src, Destination: b.Dest.Name,
		DestIsExchange: b.Dest.Kind == binding.Exchange, RoutingKey: b.Key, Args: encodeArgs(b.Args),
	}
}

// forgetBindingsTo deletes the stored bindings to d, before they are
// removed in memory. v.mu must be held.
func (v *vhost) forgetBindingsTo(d binding.Destination) {
	for name, src := range v.exchanges {
		if !v.bindingDurable(name, d) {
			continue
		}
		for _, b := range src.Bindings() {
			if b.Dest == d {
				v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, name, b)))
			}
		}
	}
}

// forgetBindingsFrom deletes the stored bindings from exchange e. v.mu must
// be held.
func (v *vhost) forgetBindingsFrom(e *exchange.Exchange) {
	for _, b := range e.Bindings() {
		if v.bindingDurable(e.Name, b.Dest) {
			v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, e.Name, b)))
		}
	}
}

func (v *vhost) logStoreErr(err error) {
	if err != nil && v.log != nil {
		v.log.Error().Err(err).Msg("durable store write failed")
	}
}

// deliver enqueues msg on queues. A persistent message bound for durable
// queues is first handed to the store under sequence numbers reserved in
// those queues, so that no consumer can settle an entry before the store has
// seen it; done runs once the write is durable (at once when nothing was
// written). It reports whether any queue took the message and whether one
// refused it for its length limit.
//
// ctx is passed to the queues (queue.EnqueueFor): a *flushSet lets
// consumers leave their connection's write to the caller's flushSet.
func (v *vhost) deliver(msg *queue.Message, queues []*queue.Queue, done func(error), ctx any) (routed, dropped bool) {
	entries := v.reserve(msg, queues)
	if len(entries) > 0 {
		v.store.Publish(msg.StoreID, messageRecord(msg), entries, func(err error) {
			if err != nil {
				// Nacked, so neither delivered nor counted from now on.
				msg.MarkLost()
				go v.withdraw(msg, entries)
			}
			if done != nil {
				done(err)
			}
		})
	} else if done != nil {
		done(nil)
	}
	return v.enqueue(msg, queues, entries, ctx)
}

// withdraw takes a message the store failed to write out of the queues
// it was enqueued in. It runs on its own goroutine: the store's done
// callbacks must not take queue locks.
func (v *vhost) withdraw(msg *queue.Message, entries []persist.QueueSeq) {
	v.mu.RLock()
	qs := make(map[uint64]*queue.Queue, len(entries))
	for _, q := range v.queues {
		qs[q.ID] = q
	}
	v.mu.RUnlock()
	for _, e := range entries {
		if q := qs[e.QueueID]; q != nil {
			q.Withdraw(msg, e.Seq)
		}
	}
}

// reserve takes a sequence number in each durable queue a persistent
// message goes to, and gives the message a store id, returning the store
// entries to write (none for a message that is not stored).
func (v *vhost) reserve(msg *queue.Message, queues []*queue.Queue) []persist.QueueSeq {
	if !msg.Persistent {
		return nil
	}
	var entries []persist.QueueSeq
	for _, q := range queues {
		if q.ID != 0 {
			entries = append(entries, persist.QueueSeq{QueueID: q.ID, Seq: q.ReserveSeq(), Expires: q.ExpiryFor(msg)})
		}
	}
	if len(entries) > 0 {
		msg.StoreID = v.nextMsgID()
		for i := range entries {
			entries[i].MsgID = msg.StoreID
		}
	}
	return entries
}

// enqueue makes msg visible in queues, durable ones at the places reserve
// took.
func (v *vhost) enqueue(msg *queue.Message, queues []*queue.Queue, entries []persist.QueueSeq, ctx any) (routed, dropped bool) {
	k := 0
	for _, q := range queues {
		var seq uint64
		if k < len(entries) && q.ID != 0 && entries[k].QueueID == q.ID {
			seq = entries[k].Seq
			k++
		}
		switch q.EnqueueFor(msg, seq, ctx) {
		case queue.Enqueued:
			routed = true
		case queue.Dropped:
			routed, dropped = true, true
			if seq != 0 {
				v.store.Settle([]persist.QueueSeq{{QueueID: q.ID, Seq: seq}}, nil)
			}
		case queue.Gone:
		}
	}
	return routed, dropped
}

func messageRecord(m *queue.Message) persist.MessageRecord {
	return persist.MessageRecord{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Props: m.Props, Body: m.Body}
}

// storedEntries lists the store entries of settled deliveries.
func storedEntries(ds []ack.Delivery) []persist.QueueSeq {
	var out []persist.QueueSeq
	for _, d := range ds {
		if d.Entry.Msg.StoreID != 0 && d.Queue != nil && d.Queue.ID != 0 {
			out = append(out, persist.QueueSeq{QueueID: d.Queue.ID, Seq: d.Entry.Seq})
		}
	}
	return out
}

// settleStored removes settled deliveries from the store. The write is not
// awaited: it is durable with the next group commit.
func (v *vhost) settleStored(ds []ack.Delivery) {
	if qs := storedEntries(ds); len(qs) > 0 {
		v.store.Settle(qs, nil)
	}
}

// removedFromQueue is queue.Hooks.Removed: expired, dropped and purged
// entries leave the store too.
func (v *vhost) removedFromQueue(q *queue.Queue, entries []queue.Entry) {
	if q.ID == 0 {
		return
	}
	var qs []persist.QueueSeq
	for _, e := range entries {
		if e.Msg.StoreID != 0 {
			qs = append(qs, persist.QueueSeq{QueueID: q.ID, Seq: e.Seq})
		}
	}
	if len(qs) > 0 {
		v.store.Settle(qs, nil)
	}
}

// backlogFor chooses a queue's backlog: durable queues page to the store,
// except priority queues, which keep everything in memory.
func (v *vhost) backlogFor(id uint64, l queue.Limits) queue.Backlog {
	if l.MaxPriority > 0 {
		return nil
	}
	logErr := func(err error) {
		v.log.Error().Err(err).Msg("paging a queue's messages to or from the store failed")
	}
	// What is not in the store spills past the window to files of the
	// queue's own, which a restart drops: every message of a non-durable
	// queue, the transient messages of a durable one.
	b := newPagedBacklog(v.store, id, v.srv.cfg.QueueWindow, logErr)
	b.spill = newSpillLog(filepath.Join(v.srv.spillDir(), strconv.FormatUint(v.srv.spillID.Add(1), 10)))
	return b
}

// markDelivered records that a stored entry went to a consumer, so a
// restart redelivers it with redelivered set.
func (v *vhost) markDelivered(q *queue.Queue, e queue.Entry) {
	if q.ID != 0 && e.Msg.StoreID != 0 {
		v.store.Delivered([]persist.QueueSeq{{QueueID: q.ID, Seq: e.Seq}})
	}
}

// recoverDefinitions rebuilds durable exchanges, queues with their
// messages, and bindings from the store.
func (s *Server) recoverDefinitions() error {
	defs, err := s.store.Definitions()
	if err != nil {
		return fmt.Errorf("read definitions: %w", err)
	}
	for _, x := range defs.Exchanges {
		v := s.vhost(x.VHost)
		if v == nil {
			continue
		}
		kind, ok := exchange.ParseKind(x.Kind)
		if !ok || v.exchanges[x.Name] != nil {
			continue
		}
		v.addExchange(exchange.Decl{Name: x.Name, Kind: kind, Durable: true, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: decodeArgs(x.Args)})
	}
	s.vhostsMu.RLock()
	for _, v := range s.vhosts {
		if err := v.loadPolicies(); err != nil {
			s.vhostsMu.RUnlock()
			return fmt.Errorf("read policies: %w", err)
		}
	}
	s.vhostsMu.RUnlock()
	messages := 0
	for _, r := range defs.Queues {
		v := s.vhost(r.VHost)
		if v == nil {
			continue
		}
		d := queue.Decl{Name: r.Name, Durable: true, AutoDelete: r.AutoDelete, Args: decodeArgs(r.Args), ID: r.ID}
		limits, err := v.effectiveLimits(r.Name, d.Args)
		if err != nil {
			s.log.Warn().Err(err).Str("queue", r.Name).Msg("stored queue arguments no longer valid; using defaults")
			limits, _ = queue.ParseArgs(nil)
		}
		backlog := v.backlogFor(r.ID, limits)
		q := queue.New(d, queue.Options{Limits: limits, Hooks: v.hooks, Backlog: backlog})
		v.queues[r.Name] = q
		if pb, ok := backlog.(*pagedBacklog); ok {
			// The messages stay on disk; count them, keys only.
			n, maxSeq, err := s.store.QueueCounts(r.ID)
			if err != nil {
				return fmt.Errorf("recover queue %q: %w", r.Name, err)
			}
			pb.recovered(n)
			q.SetSeq(maxSeq)
			messages += n
			continue
		}
		_, err = s.store.RecoverQueue(r.ID, func(e persist.RecoveredEntry) error {
			m := &queue.Message{
				Exchange: e.Msg.Exchange, RoutingKey: e.Msg.RoutingKey, Props: e.Msg.Props, Body: e.Msg.Body,
				Persistent: true, StoreID: e.MsgID, Priority: priority(e.Msg.Props),
			}
			if exp, ok := amqp.PropExpiration(e.Msg.Props); ok {
				m.TTL, m.HasTTL = parseExpiration(exp)
			}
			q.Restore(queue.Entry{Seq: e.Seq, Msg: m, Redelivered: e.Redelivered, Expires: e.Expires})
			messages++
			return nil
		})
		if err != nil {
			return fmt.Errorf("recover queue %q: %w", r.Name, err)
		}
	}
	for _, b := range defs.Bindings {
		v := s.vhost(b.VHost)
		if v == nil {
			continue
		}
		src := v.exchanges[b.Source]
		if src == nil {
			continue
		}
		d := binding.Destination{Kind: binding.Queue, Name: b.Destination}
		if b.DestIsExchange {
			d.Kind = binding.Exchange
		}
		src.Bind(binding.Binding{Dest: d, Key: b.RoutingKey, Args: decodeArgs(b.Args)})
	}
	s.msgID.Store(s.store.NextMessageID())
	for _, v := range s.vhosts {
		for _, q := range v.queues {
			q.Recovered()
		}
	}
	s.log.Info().Int("exchanges", len(defs.Exchanges)).Int("queues", len(defs.Queues)).
		Int("bindings", len(defs.Bindings)).Int("messages", messages).Msg("recovered durable state")
	return nil
}
