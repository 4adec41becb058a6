package persist

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// engine implements Store on any kv. See doc.go for the design.
type engine struct {
	kv  kv
	log func(format string, args ...any)
	// repairValues: see logOptions.
	repairValues bool

	// mu guards the batch being filled and closed.
	mu     sync.Mutex
	cur    *batch // ops waiting for the committer
	spare  *batch // the other buffer; nil while the committer holds it
	closed bool

	wake    chan struct{} // buffered(1): cur went from empty to non-empty, or Close
	stopped chan struct{} // closed when the committer has exited

	// defMu serializes queue definition changes and guards names and maxQueueID.
	defMu      sync.Mutex
	names      map[queueName]uint64
	maxQueueID uint64

	// dead holds queues being or already deleted; publishes to them are
	// skipped. Copy on write: read by the committer without locks.
	dead atomic.Pointer[map[uint64]struct{}]

	nextMsgID atomic.Uint64 // larger than every msgID stored

	// Committer-owned state: only the committer goroutine touches it once
	// Open has returned.
	refs     *refTable        // msgID -> number of entries, committed state
	ov       map[uint64]int64 // msgID -> refcount after the ops of the open transaction
	txnMaxID uint64           // largest msgID published in the open transaction
	storedHW uint64           // value of meta msgID on disk
	arena    []byte           // keys and values of the open transaction
	txnStats txnStats
	// chunked is the chunk count of every message whose body is stored in
	// chunks (chunks.go); txnChunked its changes in the open transaction.
	chunked    map[uint64]uint32
	txnChunked []chunkCount
	// fold is the batch's published entries (see foldBatch); foldDelivered
	// marks those of them a later op of the batch marked delivered.
	fold          map[entryRef]*QueueSeq
	foldDelivered map[entryRef]struct{}

	// Message log (nil without one; see walengine.go). Committer-owned,
	// except pendCount (ops logged but not applied), read by readers.
	wl        *walState
	pendCount atomic.Int64
	idleTimer *time.Timer
	// bodiesDeleted counts the bodies deleted since the last reclaim
	// (committer-owned; see idle).
	bodiesDeleted int
	applying      bool            // applying logged ops: their stats are counted
	replaying     bool            // Open is replaying the log: publishes are idempotent
	replayLive    map[uint64]bool // queues that exist, during the replay

	statsMu sync.Mutex
	stats   Stats
}

type queueName struct{ vhost, name string }

type txnStats struct{ messages, entries, settled uint64 }

type batch struct {
	ops []op
	qs  []QueueSeq // backing store for the ops' entries
}

type opKind uint8

const (
	opPublish opKind = iota + 1
	opSettle
	opDelivered
	opAtomic
	opWrite     // definition writes
	opDropQueue // one chunk of DeleteQueue
	opCheck     // invariant check (tests)
	opSync      // nothing to write: waits for what is before it (Sync)
	opProbe     // tests: runs probe on the committer, leaving pending ops alone
)

type op struct {
	kind    opKind
	msgID   uint64
	msg     MessageRecord
	qs      []QueueSeq
	pubs    []PublishOp
	writes  []kvWrite
	queueID uint64
	dropped *int    // opDropQueue: entries removed
	seq     uint64  // opDropQueue: first seq to look at
	next    *uint64 // opDropQueue: set to the seq after the last one dropped
	checked *error  // opCheck: what the check found
	probe   func()  // opProbe
	err     error   // set by the committer: the op failed before it was written
	done    func(error)
}

type kvWrite struct {
	key, val []byte
	del      bool
}

const (
	dropChunk    = 2048      // entries per DeleteQueue chunk
	arenaChunk   = 256 << 10 // reused per-transaction key/value buffer
	recoverChunk = 4096      // orphan keys deleted per transaction at Open
)

// logOptions configure the message log of an engine.
type logOptions struct {
	dir    string // where the log is kept; "" for none
	noSync bool   // no fdatasync (benchmarks)
	repair bool   // drop damaged records at replay instead of failing
	// repairValues: RecoverQueue drops an entry whose body fails its
	// checksum instead of failing (Options.RepairStore).
	repairValues bool
	// diskFreeLimit and onDiskLow: see Options.
	diskFreeLimit uint64
	onDiskLow     func(free uint64)
}

// newEngine recovers the store in k and starts its committer. With a
// non-empty lo.dir, message ops go through the message log kept there.
func newEngine(k kv, logf func(string, ...any), lo logOptions) (*engine, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &engine{
		kv:      k,
		log:     logf,
		cur:     &batch{},
		spare:   &batch{},
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		names:   make(map[queueName]uint64),
		refs:    newRefTable(),
		ov:      make(map[uint64]int64),
		chunked: make(map[uint64]uint32),

		repairValues: lo.repairValues,

		fold:          make(map[entryRef]*QueueSeq),
		foldDelivered: make(map[entryRef]struct{}),
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	if lo.dir != "" {
		if err := s.openLog(lo); err != nil {
			return nil, err
		}
	}
	go s.run()
	return s, nil
}

// ---- submission ----

// submit appends an op to the current batch. o.qs is copied into the batch.
func (s *engine) submit(o op) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if o.done != nil {
			o.done(ErrClosed)
		}
		return
	}
	b := s.cur
	if len(o.qs) > 0 {
		start := len(b.qs)
		b.qs = append(b.qs, o.qs...)
		o.qs = b.qs[start:len(b.qs):len(b.qs)]
	}
	b.ops = append(b.ops, o)
	first := len(b.ops) == 1
	s.mu.Unlock()
	if first {
		s.kick()
	}
}

func (s *engine) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// submitWait submits o and waits for its batch.
func (s *engine) submitWait(o op) error {
	ch := make(chan error, 1)
	o.done = func(err error) { ch <- err }
	s.submit(o)
	return <-ch
}

func (s *engine) Publish(msgID uint64, m MessageRecord, entries []QueueSeq, done func(error)) {
	s.submit(op{kind: opPublish, msgID: msgID, msg: m, qs: entries, done: done})
}

func (s *engine) Settle(entries []QueueSeq, done func(error)) {
	s.submit(op{kind: opSettle, qs: entries, done: done})
}

func (s *engine) Delivered(entries []QueueSeq) {
	s.submit(op{kind: opDelivered, qs: entries})
}

func (s *engine) Atomic(publishes []PublishOp, settles []QueueSeq, done func(error)) {
	pubs := make([]PublishOp, len(publishes))
	for i, p := range publishes {
		pubs[i] = PublishOp{MsgID: p.MsgID, Msg: p.Msg, Entries: append([]QueueSeq(nil), p.Entries...)}
	}
	s.submit(op{kind: opAtomic, pubs: pubs, qs: settles, done: done})
}

// ---- definitions ----

func (s *engine) write(ws ...kvWrite) error {
	return s.submitWait(op{kind: opWrite, writes: ws})
}

func (s *engine) SaveExchange(x ExchangeRecord) error {
	return s.write(kvWrite{key: exchangeKey(x.VHost, x.Name), val: encodeExchange(x)})
}

func (s *engine) DeleteExchange(vhost, name string) error {
	return s.write(kvWrite{key: exchangeKey(vhost, name), del: true})
}

func (s *engine) SaveBinding(b BindingRecord) error {
	return s.write(kvWrite{key: bindingKey(b), val: encodeBinding(b)})
}

func (s *engine) DeleteBinding(b BindingRecord) error {
	return s.write(kvWrite{key: bindingKey(b), del: true})
}

func (s *engine) SaveBlob(key string, val []byte) error {
	return s.write(kvWrite{key: blobKey(key), val: append([]byte(nil), val...)})
}

func (s *engine) DeleteBlob(key string) error {
	return s.write(kvWrite{key: blobKey(key), del: true})
}

func (s *engine) LoadBlob(key string) ([]byte, error) {
	var out []byte
	err := s.kv.view(func(r kvReader) error {
		return r.get(blobKey(key), func(v []byte) error {
			out = append([]byte{}, v...)
			return nil
		})
	})
	return out, err
}

func (s *engine) SaveQueue(q *QueueRecord) error {
	s.defMu.Lock()
	defer s.defMu.Unlock()
	n := queueName{q.VHost, q.Name}
	assigned := false
	if q.ID == 0 {
		if id, ok := s.names[n]; ok {
			q.ID = id
		} else {
			q.ID = s.maxQueueID + 1
			assigned = true
		}
	}
	ws := []kvWrite{{key: queueKey(q.ID), val: encodeQueue(q)}}
	if q.ID > s.maxQueueID {
		ws = append(ws, kvWrite{key: metaKey(metaQueueID), val: u64(q.ID)})
	}
	if err := s.write(ws...); err != nil {
		if assigned {
			q.ID = 0
		}
		return err
	}
	s.maxQueueID = max(s.maxQueueID, q.ID)
	s.names[n] = q.ID
	s.markDead(q.ID, false)
	return nil
}

func (s *engine) DeleteQueue(vhost, name string, id uint64) error {
	s.defMu.Lock()
	n := queueName{vhost, name}
	if id == 0 {
		id = s.names[n]
		if id == 0 {
			s.defMu.Unlock()
			return nil
		}
	}
	s.markDead(id, true)
	if err := s.write(kvWrite{key: queueKey(id), del: true}); err != nil {
		s.markDead(id, false)
		s.defMu.Unlock()
		return err
	}
	if s.names[n] == id {
		delete(s.names, n)
	}
	s.defMu.Unlock()
	// The record is gone, so a crash from here on leaves entries that Open
	// drops. Remove them now in chunks, each its own op.
	// Each chunk starts where the last one stopped, so that no scan walks
	// over the deletion markers of the chunks before it.
	next := uint64(0)
	for {
		var dropped int
		o := op{kind: opDropQueue, queueID: id, seq: next, dropped: &dropped}
		o.next = &next
		if err := s.submitWait(o); err != nil {
			return fmt.Errorf("persist: delete queue %d entries: %w", id, err)
		}
		if dropped < dropChunk {
			return nil
		}
	}
}

// markDead adds id to (dead) or removes it from the dead set.
func (s *engine) markDead(id uint64, dead bool) {
	old := s.dead.Load()
	if old == nil && !dead {
		return
	}
	if old != nil {
		if _, in := (*old)[id]; in == dead {
			return
		}
	}
	m := make(map[uint64]struct{})
	if old != nil {
		for k := range *old {
			m[k] = struct{}{}
		}
	}
	if dead {
		m[id] = struct{}{}
	} else {
		delete(m, id)
	}
	s.dead.Store(&m)
}

// ---- reads ----

func (s *engine) Definitions() (Definitions, error) {
	var d Definitions
	err := s.kv.view(func(r kvReader) error {
		if err := r.scan([]byte{kindExchange}, false, func(_, v []byte) error {
			x, err := decodeExchange(append([]byte(nil), v...))
			d.Exchanges = append(d.Exchanges, x)
			return err
		}); err != nil {
			return err
		}
		if err := r.scan([]byte{kindQueue}, false, func(_, v []byte) error {
			q, err := decodeQueue(append([]byte(nil), v...))
			d.Queues = append(d.Queues, q)
			return err
		}); err != nil {
			return err
		}
		return r.scan([]byte{kindBinding}, false, func(_, v []byte) error {
			b, err := decodeBinding(append([]byte(nil), v...))
			d.Bindings = append(d.Bindings, b)
			return err
		})
	})
	return d, err
}

func (s *engine) RecoverQueue(queueID uint64, fn func(e RecoveredEntry) error) (uint64, error) {
	s.flushForRead()
	var maxSeq uint64
	var dangling []QueueSeq
	err := s.kv.view(func(r kvReader) error {
		return r.scan(entryPrefix(queueID), false, func(k, v []byte) error {
			_, seq, _ := parseEntryKey(k)
			msgID, flags, expires, ok := parseEntryValExpires(v)
			if !ok {
				return fmt.Errorf("%w: entry %x", ErrCorrupt, k)
			}
			maxSeq = max(maxSeq, seq)
			e := RecoveredEntry{Seq: seq, MsgID: msgID, Redelivered: flags&flagDelivered != 0, Expires: expires}
			err := r.get(bodyKey(msgID), func(v []byte) error {
				m, err := readMessage(r, msgID, v)
				e.Msg = m
				return err
			})
			if errors.Is(err, errValueDamaged) {
				if !s.repairValues {
					return fmt.Errorf("message %d: %w; start with --repair-store to drop the messages whose bodies are damaged (each with a notice) and keep the rest", msgID, err)
				}
				s.log("persist: repair: queue %d seq %d: message %d dropped, its body is lost: %v", queueID, seq, msgID, err)
				dangling = append(dangling, QueueSeq{QueueID: queueID, Seq: seq, MsgID: msgID})
				return nil
			}
			if errors.Is(err, ErrNotFound) {
				s.log("persist: queue %d seq %d: body %d missing; entry dropped", queueID, seq, msgID)
				dangling = append(dangling, QueueSeq{QueueID: queueID, Seq: seq, MsgID: msgID})
				return nil
			}
			if err != nil {
				return err
			}
			return fn(e)
		})
	})
	if len(dangling) > 0 {
		s.statsMu.Lock()
		s.stats.DanglingEntries += uint64(len(dangling))
		s.statsMu.Unlock()
		s.Settle(dangling, nil)
	}
	return maxSeq, err
}

func (s *engine) LoadMessage(msgID uint64) (MessageRecord, error) {
	s.flushForRead()
	var m MessageRecord
	err := s.kv.view(func(r kvReader) error {
		return r.get(bodyKey(msgID), func(v []byte) error {
			var err error
			m, err = readMessage(r, msgID, v)
			return err
		})
	})
	return m, err
}

func (s *engine) NextMessageID() uint64 { return s.nextMsgID.Load() }

func (s *engine) Stats() Stats {
	s.mu.Lock()
	pending := len(s.cur.ops)
	s.mu.Unlock()
	s.statsMu.Lock()
	st := s.stats
	s.statsMu.Unlock()
	st.Pending = pending
	return st
}

func (s *engine) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.kick()
	<-s.stopped
	var werr error
	if s.wl != nil {
		werr = s.wl.w.close()
	}
	return errors.Join(werr, s.kv.close())
}

// Check verifies a store's invariants: every entry has its body, every body
// has an entry, and the committer's reference counts equal the entries on
// disk. It runs on the committer, ordered after every op submitted before
// it, so it may run while other ops are in flight. It reads everything:
// for tests and debugging. It returns ErrClosed after Close.
func Check(st Store) error {
	s, ok := st.(*engine)
	if !ok {
		return fmt.Errorf("persist: Check: unknown store type %T", st)
	}
	var found error
	if err := s.submitWait(op{kind: opCheck, checked: &found}); err != nil {
		return err
	}
	return found
}
