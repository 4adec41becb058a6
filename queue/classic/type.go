// Package classic is RabbitMQ's classic queue: a FIFO of ready messages
// with priorities, TTLs, length limits, dead-letter events and single
// active consumer; durable queues keep their persistent messages in the
// store and only a window of them in memory (paged.go), non-durable ones
// spill past the window to plain files (spill.go). Type (this file) ties
// the queues to the store: the durability ordering of a publish (reserve
// a sequence number in each queue, write the message once, then make it
// visible), transactions, recovery.
package classic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// Config is what a classic queue type needs of the broker.
type Config struct {
	// Store keeps durable queues and their persistent messages.
	Store persist.Store
	// Window is how many ready messages a queue keeps in memory before it
	// pages (durable) or spills (transient) the rest; 0: no paging.
	Window int
	// SpillDir is where non-durable queues spill, emptied at start.
	SpillDir string
	// NextMessageID gives a stored message its id.
	NextMessageID func() uint64
	// Log reports store failures that have no caller to return to.
	Log func(err error, msg string)
	// Now is the clock (default time.Now).
	Now queue.Clock
	// Unclean: the broker's last stop was not clean (killed, a crash, a
	// power cut). As RabbitMQ 3.10's classic queues after an unclean
	// shutdown (its queue index marks every message it recovers
	// delivered), every message Recover finds is redelivered, then and at
	// later restarts (recovery marks, below).
	Unclean bool
}

// A queue's recovery mark is the largest Seq it held at a recovery after
// an unclean stop: its entries up to the mark are redelivered. It is a
// blob of the store (8 bytes, big-endian) under recoveryMarkKey, written
// at such a recovery and removed with the queue, so that the store's
// entry format stays as it is and a recovery marks a backlog paged to
// the store without rewriting its entries.
func recoveryMarkKey(id uint64) string {
	return "classic\x00redelivered\x00" + strconv.FormatUint(id, 10)
}

// recoveryMark is queue id's mark, 0 none.
func (t *Type) recoveryMark(id uint64) (uint64, error) {
	b, err := t.cfg.Store.LoadBlob(recoveryMarkKey(id))
	switch {
	case errors.Is(err, persist.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the recovery mark of queue %d: %w", id, err)
	case len(b) != 8:
		return 0, fmt.Errorf("the recovery mark of queue %d: %d bytes, want 8", id, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// markRecovered raises queue id's mark from mark to maxSeq after an
// unclean stop, and returns the mark now.
func (t *Type) markRecovered(id, mark, maxSeq uint64) (uint64, error) {
	if !t.cfg.Unclean || maxSeq <= mark {
		return mark, nil
	}
	if err := t.cfg.Store.SaveBlob(recoveryMarkKey(id), binary.BigEndian.AppendUint64(nil, maxSeq)); err != nil {
		return 0, fmt.Errorf("save the recovery mark of queue %d: %w", id, err)
	}
	return maxSeq, nil
}

var classicInfo = queue.TypeInfo{Name: "classic", Module: "rabbit_classic_queue", Refused: queue.ClassicRefused, Compared: queue.ClassicCompared}

// Type is the classic queue type. Stand-ins (As) share its store and its
// publishes, so a message routed to several of its queues is stored once.
type Type struct {
	info queue.TypeInfo
	base *Type // the type holding the state; itself for the real one
	cfg  Config

	spillID atomic.Uint64
	mu      sync.Mutex
	byID    map[uint64]*Queue // stored queues, for withdrawing failed messages
}

// NewType returns the classic type.
func NewType(cfg Config) *Type {
	t := &Type{info: classicInfo, cfg: cfg, byID: map[uint64]*Queue{}}
	t.base = t
	return t
}

// As returns a type named by info whose queues are classic queues of t's,
// for an x-queue-type Warren does not run yet (its declarations are
// checked with info's refusals). Their deliveries carry x-delivery-count
// when countDeliveries, as quorum queues' do.
func (t *Type) As(info queue.TypeInfo) *Type {
	return &Type{info: info, base: t.base, cfg: t.cfg}
}

// Info implements queue.Type.
func (t *Type) Info() queue.TypeInfo { return t.info }

func (t *Type) logErr(err error) {
	if err != nil && t.cfg.Log != nil {
		t.cfg.Log(err, "durable store write failed")
	}
}

// forget drops a deleted queue from the type, reporting whether it was
// there.
func (t *Type) forget(q *Queue) bool {
	b := t.base
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID[q.decl.ID] != q {
		return false
	}
	delete(b.byID, q.decl.ID)
	return true
}

// New implements queue.Type: a stored declaration is written to the store
// first (d.ID is its id).
func (t *Type) New(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	if d.Stored() && t.cfg.Store != nil {
		rec := persist.QueueRecord{VHost: d.VHost, Name: d.Name, Durable: true, AutoDelete: d.AutoDelete, Args: persist.EncodeArgs(d.Args)}
		if err := t.cfg.Store.SaveQueue(&rec); err != nil {
			return nil, fmt.Errorf("cannot store queue: %w", err)
		}
		d.ID = rec.ID
	}
	return t.open(d, l, h), nil
}

func (t *Type) open(d queue.Decl, l queue.Limits, h queue.Hooks) *Queue {
	q := New(d, Options{Limits: l, Hooks: h, Store: t.cfg.Store, Type: t.base, Backlog: t.backlogFor(d.ID, l), Now: t.cfg.Now})
	if d.ID != 0 {
		b := t.base
		b.mu.Lock()
		b.byID[d.ID] = q
		b.mu.Unlock()
	}
	return q
}

// Recover opens a stored queue (d.ID set) with its messages, returning how
// many it holds. A paging queue leaves them in the store and counts them.
// Call Recovered on it once the broker's definitions are all back.
//
// After an unclean stop (Config.Unclean) every message it holds is
// redelivered, as are those its recovery mark covers.
func (t *Type) Recover(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, int, error) {
	q := t.open(d, l, h)
	st := t.cfg.Store
	mark, err := t.recoveryMark(d.ID)
	if err != nil {
		return nil, 0, err
	}
	if pb, ok := q.backlog.(*pagedBacklog); ok {
		n, maxSeq, err := st.QueueCounts(d.ID)
		if err != nil {
			return nil, 0, err
		}
		if mark, err = t.markRecovered(d.ID, mark, maxSeq); err != nil {
			return nil, 0, err
		}
		pb.redeliveredTo = mark
		q.setRecoveryMark(mark)
		pb.recovered(n)
		q.SetSeq(maxSeq)
		return q, n, nil
	}
	n := 0
	maxSeq, err := st.RecoverQueue(d.ID, func(e persist.RecoveredEntry) error {
		m := queue.NewStored(e.Msg.Exchange, e.Msg.RoutingKey, e.Msg.Props, e.Msg.Body, e.MsgID)
		redelivered := e.Redelivered || t.cfg.Unclean || e.Seq <= mark
		q.Restore(queue.Entry{Seq: e.Seq, Msg: m, Redelivered: redelivered, Expires: e.Expires})
		n++
		return nil
	})
	if err != nil {
		return q, n, err
	}
	mark, err = t.markRecovered(d.ID, mark, maxSeq)
	q.setRecoveryMark(mark)
	return q, n, err
}

// backlogFor chooses a queue's backlog: queues page to the store and spill
// files, except priority queues, which keep everything in memory.
func (t *Type) backlogFor(id uint64, l queue.Limits) Backlog {
	if l.MaxPriority > 0 || t.cfg.Window <= 0 || t.cfg.Store == nil {
		return nil
	}
	logErr := func(err error) {
		if t.cfg.Log != nil {
			t.cfg.Log(err, "paging a queue's messages to or from the store failed")
		}
	}
	// What is not in the store spills past the window to files of the
	// queue's own, which a restart drops: every message of a non-durable
	// queue, the transient messages of a durable one.
	b := newPagedBacklog(t.cfg.Store, id, t.cfg.Window, logErr)
	if t.cfg.SpillDir != "" {
		b.spill = newSpillLog(filepath.Join(t.cfg.SpillDir, strconv.FormatUint(t.base.spillID.Add(1), 10)))
	}
	return b
}

// Publish implements queue.Type. A persistent message bound for stored
// queues is first handed to the store under sequence numbers reserved in
// those queues, so that no consumer can settle an entry before the store
// has seen it; done runs once the write is durable (at once when nothing
// was written). A failed write marks the message lost and withdraws it, so
// it is neither delivered nor counted.
func (t *Type) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	entries := t.reserve(m, qs)
	if len(entries) > 0 {
		t.cfg.Store.Publish(m.StoreID, messageRecord(m), entries, func(err error) {
			if err != nil {
				m.MarkLost()
				// The store's callbacks must not take queue locks.
				go t.withdraw(m, entries)
			}
			if done != nil {
				done(err)
			}
		})
	} else if done != nil {
		done(nil)
	}
	return t.enqueue(m, qs, entries, ctx)
}

// withdraw takes a message the store failed to write out of the queues it
// was enqueued in.
func (t *Type) withdraw(m *queue.Message, entries []persist.QueueSeq) {
	b := t.base
	for _, e := range entries {
		b.mu.Lock()
		q := b.byID[e.QueueID]
		b.mu.Unlock()
		if q != nil {
			q.Withdraw(m, e.Seq)
		}
	}
}

// reserve takes a sequence number in each stored queue a persistent
// message goes to, and gives the message a store id, returning the store
// entries to write (none for a message that is not stored).
func (t *Type) reserve(m *queue.Message, qs []queue.Queue) []persist.QueueSeq {
	if !m.Persistent {
		return nil
	}
	var entries []persist.QueueSeq
	for _, x := range qs {
		q := x.(*Queue)
		if q.store != nil {
			entries = append(entries, persist.QueueSeq{QueueID: q.decl.ID, Seq: q.ReserveSeq(), Expires: q.ExpiryFor(m)})
		}
	}
	if len(entries) > 0 {
		m.StoreID = t.cfg.NextMessageID()
		for i := range entries {
			entries[i].MsgID = m.StoreID
		}
	}
	return entries
}

// enqueue makes m visible in qs, stored ones at the places reserve took.
func (t *Type) enqueue(m *queue.Message, qs []queue.Queue, entries []persist.QueueSeq, ctx any) (routed, dropped bool) {
	k := 0
	for _, x := range qs {
		q := x.(*Queue)
		var seq uint64
		if k < len(entries) && q.store != nil && entries[k].QueueID == q.decl.ID {
			seq = entries[k].Seq
			k++
		}
		switch q.EnqueueFor(m, seq, ctx) {
		case Enqueued:
			routed = true
		case Dropped:
			routed, dropped = true, true
			if seq != 0 {
				q.store.Settle([]persist.QueueSeq{{QueueID: q.decl.ID, Seq: seq}}, nil)
			}
		case Gone:
		}
	}
	return routed, dropped
}

// Commit implements queue.Transactional: the publishes and the
// settlements go to the store as one atomic write; the publishes are
// visible and the settlements applied before it is durable, and done runs
// once it is.
func (t *Type) Commit(pubs []queue.TxPublish, settles []queue.TxSettle, ctx any, done func(error)) {
	var ops []persist.PublishOp
	entries := make([][]persist.QueueSeq, len(pubs))
	for i, p := range pubs {
		entries[i] = t.reserve(p.Msg, p.Queues)
		if len(entries[i]) > 0 {
			ops = append(ops, persist.PublishOp{MsgID: p.Msg.StoreID, Msg: messageRecord(p.Msg), Entries: entries[i]})
		}
	}
	var stored []persist.QueueSeq
	for _, s := range settles {
		if s.Op.Requeued() != queue.Requeue {
			stored = s.Queue.(*Queue).appendStored(stored, s.Entries)
		}
	}
	if len(ops) > 0 || len(stored) > 0 {
		t.cfg.Store.Atomic(ops, stored, done)
	} else {
		done(nil)
	}
	for i := range pubs {
		pubs[i].Routed, pubs[i].Dropped = t.enqueue(pubs[i].Msg, pubs[i].Queues, entries[i], ctx)
	}
	for _, s := range settles {
		s.Queue.(*Queue).settle(s.Entries, s.Op)
	}
}

// appendStored appends the store entries of q's entries.
func (q *Queue) appendStored(out []persist.QueueSeq, entries []queue.Entry) []persist.QueueSeq {
	if q.store == nil {
		return out
	}
	for _, e := range entries {
		if e.Msg.StoreID != 0 {
			out = append(out, persist.QueueSeq{QueueID: q.decl.ID, Seq: e.Seq})
		}
	}
	return out
}

// settleStored removes entries from the store. The write is not awaited:
// it is durable with the next group commit.
func (q *Queue) settleStored(entries []queue.Entry) {
	if qs := q.appendStored(nil, entries); len(qs) > 0 {
		q.store.Settle(qs, nil)
	}
}

// settleOne is settleStored for a single entry, without an allocation for
// entries that are not stored.
func (q *Queue) settleOne(e queue.Entry) {
	if q.store != nil && e.Msg.StoreID != 0 {
		q.store.Settle([]persist.QueueSeq{{QueueID: q.decl.ID, Seq: e.Seq}}, nil)
	}
}

// markDelivered records that a stored entry went to a consumer, so a
// restart redelivers it with redelivered set.
func (q *Queue) markDelivered(e queue.Entry) {
	if q.store != nil && e.Msg.StoreID != 0 {
		q.store.Delivered([]persist.QueueSeq{{QueueID: q.decl.ID, Seq: e.Seq}})
	}
}

func messageRecord(m *queue.Message) persist.MessageRecord {
	return persist.MessageRecord{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Props: m.Props, Body: m.Body}
}
