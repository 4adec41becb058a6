package server

import (
	"errors"
	"fmt"

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

// runningBlob is in the store while the broker runs: SaveBlob at a
// start, DeleteBlob at a clean stop (Serve's shutdown, Close), after
// the queues stopped and before the store closes. Found at a start, the
// last stop was not clean (kill -9, a crash, a power cut), and the
// classic queues recovered mark every message they hold redelivered, as
// RabbitMQ 3.10's do after an unclean shutdown (classic.Config.Unclean).
const runningBlob = "node\x00running"

// marksBlob says the store's stops are marked (runningBlob is kept). A
// store without it that holds queues was written by a build of before,
// which may or may not have marked its running: how it stopped is not
// known, and it starts as after an unclean stop (a message marked
// redelivered that was not delivered is the safe side; the other way
// round, a consumer takes a redelivery for a first delivery).
const marksBlob = "node\x00marks"

// markRunning reports whether the last stop was clean and marks the
// store as in use.
func (s *Server) markRunning() (unclean bool, err error) {
	_, err = s.store.LoadBlob(runningBlob)
	switch {
	case err == nil:
		unclean = true
		s.log.Warn().Msg("the last stop was not clean: the classic queues' recovered messages are marked redelivered")
	case !errors.Is(err, persist.ErrNotFound):
		return false, fmt.Errorf("read the store's running mark: %w", err)
	}
	_, err = s.store.LoadBlob(marksBlob)
	switch {
	case errors.Is(err, persist.ErrNotFound):
		if !unclean {
			defs, err := s.store.Definitions()
			if err != nil {
				return false, fmt.Errorf("read the store's definitions: %w", err)
			}
			if len(defs.Queues) > 0 {
				unclean = true
				s.log.Warn().Msg("the store was written by an earlier build, which did not mark its stops: taken for an unclean stop, the classic queues' recovered messages are marked redelivered")
			}
		}
		if err := s.store.SaveBlob(marksBlob, []byte{1}); err != nil {
			return false, fmt.Errorf("write the store's marks version: %w", err)
		}
	case err != nil:
		return false, fmt.Errorf("read the store's marks version: %w", err)
	}
	if err := s.store.SaveBlob(runningBlob, []byte{1}); err != nil {
		return false, fmt.Errorf("write the store's running mark: %w", err)
	}
	return unclean, nil
}

// markStopped ends a clean stop: the next start finds no running mark.
func (s *Server) markStopped() {
	if err := s.store.DeleteBlob(runningBlob); err != nil {
		s.log.Error().Err(err).Msg("removing the store's running mark failed: the next start takes this stop for unclean")
	}
}

// storeExchange writes a durable exchange's declaration.
func (v *vhost) storeExchange(e *exchange.Exchange) error {
	if !e.Durable {
		return nil
	}
	return v.store.SaveExchange(persist.ExchangeRecord{
		VHost: v.name, Name: e.Name, Kind: e.Kind.String(), Durable: true,
		AutoDelete: e.AutoDelete, Internal: e.Internal, Args: persist.EncodeArgs(e.Args),
	})
}

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
		return q != nil && q.Decl().ID != 0
	}
}

func bindingRecord(vhost, src string, b binding.Binding) persist.BindingRecord {
	return persist.BindingRecord{
		VHost: vhost, Source: src, Destination: b.Dest.Name,
		DestIsExchange: b.Dest.Kind == binding.Exchange, RoutingKey: b.Key, Args: persist.EncodeArgs(b.Args),
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

// recoverDefinitions rebuilds durable exchanges, queues with their
// messages, and bindings from the store.
func (s *Server) recoverDefinitions() error {
	defs, err := s.store.Definitions()
	if err != nil {
		return fmt.Errorf("read definitions: %w", err)
	}
	if s.meta != nil {
		// A cluster's definitions are its metadata group's: the stored
		// queues wait for their declarations (cluster_meta.go).
		s.meta.stashQueues(defs.Queues)
		s.msgID.Store(s.store.NextMessageID())
		s.log.Info().Int("queues", len(defs.Queues)).Msg("stored queues kept for the cluster's declarations")
		return nil
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
		v.addExchange(exchange.Decl{Name: x.Name, Kind: kind, Durable: true, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: persist.DecodeArgs(x.Args)})
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
		d := queue.Decl{VHost: r.VHost, Name: r.Name, Durable: true, AutoDelete: r.AutoDelete, Args: persist.DecodeArgs(r.Args), ID: r.ID}
		typ, _, err := s.types.Check(&d)
		if typ == nil {
			s.log.Warn().Err(err).Str("queue", r.Name).Msg("stored queue of a type this broker does not run; running it as a classic queue")
			typ = s.classic
		}
		limits, err := v.effectiveLimits(r.Name, d.Args)
		if err != nil {
			s.log.Warn().Err(err).Str("queue", r.Name).Msg("stored queue arguments no longer valid; using defaults")
			limits, _ = queue.ParseArgs(nil)
		}
		rt, ok := typ.(recoverer)
		if !ok {
			return fmt.Errorf("recover queue %q: type %s cannot recover queues", r.Name, typ.Info().Name)
		}
		q, n, err := rt.Recover(d, limits, v.hooks)
		if err != nil {
			return fmt.Errorf("recover queue %q: %w", r.Name, err)
		}
		if typ.Info().Name == "quorum" {
			moved, err := s.migrateStandIn(q, r.ID)
			if err != nil {
				q.(queue.Stopper).Stop()
				return fmt.Errorf("recover queue %q: moving the messages an earlier version stored: %w", r.Name, err)
			}
			if moved > 0 {
				s.log.Info().Str("queue", r.Name).Str("vhost", r.VHost).Int("messages", moved).
					Msg("quorum queue: moved the messages an earlier version kept in the message store into its raft log")
			}
			n += moved
		}
		v.queues[r.Name] = q
		messages += n
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
		if (d.Kind == binding.Queue && v.queues[d.Name] == nil) || (d.Kind == binding.Exchange && v.exchanges[d.Name] == nil) {
			// Its destination's record went first and a crash came
			// before the binding's removal.
			v.logStoreErr(s.store.DeleteBinding(b))
			continue
		}
		src.Bind(binding.Binding{Dest: d, Key: b.RoutingKey, Args: persist.DecodeArgs(b.Args)})
	}
	s.msgID.Store(s.store.NextMessageID())
	for _, v := range s.vhosts {
		for _, q := range v.queues {
			if r, ok := q.(interface{ Recovered() }); ok {
				r.Recovered()
			}
		}
	}
	s.log.Info().Int("exchanges", len(defs.Exchanges)).Int("queues", len(defs.Queues)).
		Int("bindings", len(defs.Bindings)).Int("messages", messages).Msg("recovered durable state")
	return nil
}

// migrateStandIn moves the messages an earlier Warren stored for quorum
// queue q (id) while it ran quorum queues on a classic stand-in (entries
// of the queue in the message store) into the queue's Raft log, then
// settles them in the store. Nothing stored before an upgrade is lost; a
// crash in the middle may enqueue some twice, never none, and the move
// finishes at the next start.
func (s *Server) migrateStandIn(q queue.Queue, id uint64) (int, error) {
	if n, _, err := s.store.QueueCounts(id); err != nil || n == 0 {
		return 0, err
	}
	moved := 0
	for from := uint64(0); ; {
		var batch []persist.RecoveredEntry
		err := s.store.ScanQueue(id, from, 1024, true, func(e persist.RecoveredEntry) error {
			batch = append(batch, e)
			return nil
		})
		if err != nil || len(batch) == 0 {
			return moved, err
		}
		errs := make(chan error, len(batch))
		for _, e := range batch {
			m := queue.NewStored(e.Msg.Exchange, e.Msg.RoutingKey, e.Msg.Props, e.Msg.Body, 0)
			m.Persistent = true
			q.Type().Publish(m, []queue.Queue{q}, nil, func(err error) { errs <- err })
		}
		for range batch {
			if err := <-errs; err != nil {
				return moved, err
			}
		}
		seqs := make([]persist.QueueSeq, len(batch))
		for i, e := range batch {
			seqs[i] = persist.QueueSeq{QueueID: id, Seq: e.Seq, MsgID: e.MsgID}
		}
		done := make(chan error, 1)
		s.store.Settle(seqs, func(err error) { done <- err })
		if err := <-done; err != nil {
			return moved, err
		}
		moved += len(batch)
		from = batch[len(batch)-1].Seq + 1
	}
}

// recoverer is a queue type that reopens stored queues (d.ID set) with
// their messages, returning how many they hold.
type recoverer interface {
	Recover(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, int, error)
}
