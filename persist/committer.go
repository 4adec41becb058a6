package persist

import (
	"errors"
	"fmt"
	"time"
)

const (
	maxLinger  = time.Millisecond
	maxKeptOps = 1 << 14 // batch buffer capacity kept between batches
)

var errStopScan = errors.New("stop scan")

// errTooBig is what kv.commit/set return when a transaction exceeds the
// backend's limits (badger.ErrTxnTooBig is mapped to it).
var errTooBig = errors.New("persist: transaction too big")

// run is the committer goroutine: it owns the write path.
//
// Linger: when a batch is much smaller than the previous one, the committer
// waits 1/16 of the previous batch's commit time (at most maxLinger) before
// taking it. Publishers that wait for their confirm before the next publish
// resubmit within microseconds of their callback; without the wait they
// would split into two alternating half-size batches. A lone publisher (the
// previous batch had one op) never waits.
func (s *engine) run() {
	defer close(s.stopped)
	var lastN int
	var linger time.Duration
	for {
		s.mu.Lock()
		for len(s.cur.ops) == 0 {
			if s.closed {
				s.mu.Unlock()
				s.applyPending()
				return
			}
			s.mu.Unlock()
			s.idle()
			s.mu.Lock()
		}
		if n := len(s.cur.ops); n < lastN/2 && linger > 0 {
			// The publishers released by the last batch are still
			// coming back: give them a moment to share this fsync.
			s.mu.Unlock()
			time.Sleep(linger)
			s.mu.Lock()
		}
		b := s.cur
		s.cur, s.spare = s.spare, nil
		s.mu.Unlock()

		t0 := time.Now()
		s.commitBatch(b.ops)
		lastN = len(b.ops)
		linger = min(time.Since(t0)/16, maxLinger)

		// Reuse the buffers, unless a burst made them large.
		if cap(b.ops) > maxKeptOps {
			b.ops = nil
		} else {
			clear(b.ops)
			b.ops = b.ops[:0]
		}
		if cap(b.qs) > maxKeptOps*4 {
			b.qs = nil
		} else {
			b.qs = b.qs[:0]
		}
		s.mu.Lock()
		s.spare = b
		s.mu.Unlock()
	}
}

// reclaimQuiet is how long the store must have had nothing to do, after
// bodies were deleted, before the committer lets the kv reclaim their
// space (kvReclaimer).
const reclaimQuiet = 2 * time.Second

// kvReclaimer is a kv that can give back the space of deleted values
// only once something makes it look at them (Badger: its value-log GC
// sees garbage only through compactions, and an idle tree does not
// compact). reclaim runs on the committer, so no write is in progress.
type kvReclaimer interface {
	reclaim() error
}

// idle waits for the next op; with ops pending in the message log, at most
// until they are due, and then applies them. With none pending, after
// bodies were deleted and reclaimQuiet without an op, it lets the kv
// reclaim their space: a drained backlog's disk space comes back though
// nothing more is written (a node whose disk alarm is up publishes
// nothing until it does).
func (s *engine) idle() {
	due := s.pendingDue()
	if due < 0 {
		r, ok := s.kv.(kvReclaimer)
		if !ok || s.bodiesDeleted == 0 {
			<-s.wake
			return
		}
		if s.waitWake(reclaimQuiet) {
			return
		}
		s.bodiesDeleted = 0
		if err := r.reclaim(); err != nil {
			s.log("persist: reclaiming deleted bodies' space: %v", err)
		}
		return
	}
	if due > 0 && s.waitWake(due) {
		return
	}
	s.applyPending()
}

// waitWake waits for an op (or Close) at most d and reports whether one
// came.
func (s *engine) waitWake(d time.Duration) bool {
	if s.idleTimer == nil {
		s.idleTimer = time.NewTimer(d)
	} else {
		s.idleTimer.Reset(d)
	}
	select {
	case <-s.wake:
		s.idleTimer.Stop()
		return true
	case <-s.idleTimer.C:
		return false
	}
}

// entryRef names a queue entry in foldBatch's maps.
type entryRef struct{ queueID, seq uint64 }

// skipped marks an entry of a batch's op that foldBatch cancelled. Queue
// id 0 names no queue.
const skipped = 0

// foldBatch drops work that later ops of the same batch undo, before
// anything is written. The batch is applied in order in transactions that
// commit before any done runs, so the store ends in the same state:
//   - an entry published and settled in the batch is written by neither
//     op (nor its body, when no other entry of the message is left);
//   - a delivered mark on an entry published in the batch becomes the
//     published entry's flag, and one on an entry the batch settles goes.
//
// A publisher's confirm still waits for the commit of the batch that holds
// its publish: when the publish was cancelled, that commit made durable
// that the message is gone, which is what a settled message is. Atomic
// (transactions) and the other ops are left alone. Cancelled entries get
// queue id 0 in the batch's own copies (submit copied them).
func (s *engine) foldBatch(ops []op) {
	hasSettle := false
	for i := range ops {
		if k := ops[i].kind; k == opSettle || k == opDelivered {
			hasSettle = true
			break
		}
	}
	if !hasSettle {
		return
	}
	fold := s.fold
	var folded uint64
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opPublish:
			for j := range o.qs {
				fold[entryRef{o.qs[j].QueueID, o.qs[j].Seq}] = &o.qs[j]
			}
		case opDelivered:
			for j := range o.qs {
				r := entryRef{o.qs[j].QueueID, o.qs[j].Seq}
				if p := fold[r]; p != nil {
					if p.QueueID != skipped {
						s.foldDelivered[r] = struct{}{}
					}
					o.qs[j].QueueID = skipped
				}
			}
		case opSettle:
			for j := range o.qs {
				r := entryRef{o.qs[j].QueueID, o.qs[j].Seq}
				if p := fold[r]; p != nil && p.QueueID != skipped {
					p.QueueID = skipped
					o.qs[j].QueueID = skipped
					delete(s.foldDelivered, r)
					folded++
				}
			}
		}
	}
	if folded > 0 {
		s.statsMu.Lock()
		s.stats.Folded += folded
		s.statsMu.Unlock()
	}
}

// commitBatch commits a batch taken by the committer: through the message
// log when the store has one (commitLogged), else straight to the kv.
func (s *engine) commitBatch(ops []op) {
	if s.wl != nil {
		s.commitLogged(ops)
		return
	}
	s.commitKV(ops)
}

// commitKV writes ops in as few transactions as the backend's limits
// allow, never splitting an op, then calls each op's done in order.
func (s *engine) commitKV(ops []op) {
	s.statsMu.Lock()
	s.stats.Batches++
	s.statsMu.Unlock()
	s.foldBatch(ops)
	defer func() {
		clear(s.fold)
		clear(s.foldDelivered)
	}()
	s.forRanges(ops, s.commitRange)
}

// opLimits is what the ops of one transaction may cost (estimate): the
// kv's limits less room for the meta msgID write.
func (s *engine) opLimits() (count, size int64) {
	count, size = s.kv.limits()
	return count - 1, size - s.kv.entrySize(2, 8)
}

// forRanges cuts ops into ranges that fit in one transaction, never
// splitting an op, and calls fn for each in order.
func (s *engine) forRanges(ops []op, fn func([]op)) {
	maxCount, maxSize := s.opLimits()
	for i := 0; i < len(ops); {
		j := i
		var count, size int64
		for j < len(ops) {
			c, z := s.estimate(&ops[j])
			if j > i && (count+c > maxCount || size+z > maxSize) {
				break
			}
			count += c
			size += z
			j++
		}
		fn(ops[i:j])
		i = j
	}
}

// commitRange commits ops in one transaction; if the backend says it is
// too big after all (our estimate was low), it splits the range in halves.
// A single op that is too big fails with the error.
func (s *engine) commitRange(ops []op) {
	err := s.tryCommit(ops)
	if errors.Is(err, errTooBig) && len(ops) > 1 {
		h := len(ops) / 2
		s.commitRange(ops[:h])
		s.commitRange(ops[h:])
		return
	}
	if err != nil {
		s.log("persist: commit of %d ops failed: %v", len(ops), err)
	}
	for i := range ops {
		if d := ops[i].done; d != nil {
			d(err)
		}
	}
}

// tryCommit applies ops to a fresh transaction and commits it. On success
// the in-memory reference counts take the transaction's changes; on failure
// they are dropped with it.
func (s *engine) tryCommit(ops []op) error {
	txn := s.kv.begin()
	defer txn.discard()
	clear(s.ov)
	s.txnChunked = s.txnChunked[:0]
	s.txnMaxID = 0
	s.txnStats = txnStats{}
	if cap(s.arena) > arenaChunk {
		s.arena = nil
	}
	s.arena = s.arena[:0]
	for i := range ops {
		if err := s.apply(txn, &ops[i]); err != nil {
			s.failTxn()
			return err
		}
	}
	if s.txnMaxID > s.storedHW {
		if err := txn.set(metaKey(metaMsgID), u64(s.txnMaxID)); err != nil {
			s.failTxn()
			return err
		}
	}
	t0 := time.Now()
	err := txn.commit()
	d := time.Since(t0)
	if err != nil {
		s.failTxn()
		return err
	}
	for id, n := range s.ov {
		s.refs.set(id, n)
	}
	clear(s.ov)
	s.commitChunked()
	if s.txnMaxID > s.storedHW {
		s.storedHW = s.txnMaxID
		if s.nextMsgID.Load() <= s.storedHW {
			s.nextMsgID.Store(s.storedHW + 1)
		}
	}
	s.statsMu.Lock()
	st := &s.stats
	st.Commits++
	if !s.applying {
		// Ops applied from the message log were counted when logged.
		st.Ops += uint64(len(ops))
		st.Messages += s.txnStats.messages
		st.Entries += s.txnStats.entries
	}
	st.Settled += s.txnStats.settled
	st.FsyncTotal += d
	st.FsyncMax = max(st.FsyncMax, d)
	st.Fsync.observe(d)
	s.statsMu.Unlock()
	return nil
}

func (s *engine) failTxn() {
	clear(s.ov)
	s.statsMu.Lock()
	s.stats.FailedTxns++
	s.statsMu.Unlock()
}

// alloc returns n bytes of the transaction's arena (length 0, capacity n).
func (s *engine) alloc(n int) []byte {
	if n > arenaChunk/4 {
		return make([]byte, 0, n)
	}
	if cap(s.arena)-len(s.arena) < n {
		// Earlier slices keep the old chunk alive until the commit ends.
		s.arena = make([]byte, 0, arenaChunk)
	}
	l := len(s.arena)
	s.arena = s.arena[:l+n]
	return s.arena[l : l : l+n]
}

func (s *engine) refcount(id uint64) int64 {
	if n, ok := s.ov[id]; ok {
		return n
	}
	return s.refs.get(id)
}

// estimate is an upper bound of what o costs against the kv limits.
func (s *engine) estimate(o *op) (count, size int64) {
	es := func(n int, klen, vlen int) {
		count += int64(n)
		size += int64(n) * s.kv.entrySize(klen, vlen)
	}
	pub := func(m *MessageRecord, entries int) {
		es(entries, entryKeyLen, entryValLen+8)
		if n := int(chunks(len(m.Body))); n > 0 {
			es(1, bodyKeyLen, chunkedHeadSize(m))
			es(n, chunkKeyLen, bodyChunkSize)
		} else {
			es(1, bodyKeyLen, messageSize(m))
		}
	}
	settle := func(n int) {
		es(n, entryKeyLen, 0)
		es(n, bodyKeyLen, 0)
	}
	switch o.kind {
	case opPublish:
		pub(&o.msg, len(o.qs))
	case opSettle:
		settle(len(o.qs))
	case opDelivered:
		es(len(o.qs), entryKeyLen, entryValLen+8)
	case opAtomic:
		for i := range o.pubs {
			pub(&o.pubs[i].Msg, len(o.pubs[i].Entries))
		}
		settle(len(o.qs))
	case opWrite:
		for _, w := range o.writes {
			es(1, len(w.key), len(w.val))
		}
	case opDropQueue:
		settle(dropChunk)
	}
	return count, size
}

func (s *engine) apply(txn kvTxn, o *op) error {
	switch o.kind {
	case opPublish:
		return s.applyPublish(txn, o.msgID, &o.msg, o.qs)
	case opSettle:
		if done, err := s.settleSorted(txn, o.qs); done || err != nil {
			return err
		}
		for _, e := range o.qs {
			if e.QueueID == skipped {
				continue
			}
			if err := s.settleOne(txn, e.QueueID, e.Seq); err != nil {
				return err
			}
		}
	case opDelivered:
		for _, e := range o.qs {
			if e.QueueID == skipped {
				continue
			}
			if err := s.markDelivered(txn, e.QueueID, e.Seq); err != nil {
				return err
			}
		}
	case opAtomic:
		for i := range o.pubs {
			p := &o.pubs[i]
			if err := s.applyPublish(txn, p.MsgID, &p.Msg, p.Entries); err != nil {
				return err
			}
		}
		for _, e := range o.qs {
			if err := s.settleOne(txn, e.QueueID, e.Seq); err != nil {
				return err
			}
		}
	case opWrite:
		for _, w := range o.writes {
			var err error
			if w.del {
				err = txn.del(w.key)
			} else {
				err = txn.set(w.key, w.val)
			}
			if err != nil {
				return err
			}
		}
	case opDropQueue:
		return s.dropQueueChunk(txn, o)
	case opSync, opProbe:
		if o.probe != nil {
			o.probe()
		}
	case opCheck:
		c, err := s.check(txn)
		if err == nil {
			*o.checked = c
		}
		return err
	default:
		return fmt.Errorf("persist: unknown op %d", o.kind)
	}
	return nil
}

func (s *engine) applyPublish(txn kvTxn, msgID uint64, m *MessageRecord, entries []QueueSeq) error {
	var dead map[uint64]struct{}
	if p := s.dead.Load(); p != nil {
		dead = *p
	}
	n := int64(0)
	for _, e := range entries {
		if e.QueueID == skipped {
			continue
		}
		if _, ok := dead[e.QueueID]; ok {
			continue
		}
		if s.replaying && s.replayLive != nil && !s.replayLive[e.QueueID] {
			continue
		}
		k := appendEntryKey(s.alloc(entryKeyLen), e.QueueID, e.Seq)
		if s.replaying {
			// The kv may have this entry already: the checkpoint is
			// older than the last apply.
			err := txn.get(k, func([]byte) error { return nil })
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		var flags byte
		if len(s.foldDelivered) > 0 {
			if _, ok := s.foldDelivered[entryRef{e.QueueID, e.Seq}]; ok {
				flags = flagDelivered
			}
		}
		v := appendEntryVal(s.alloc(entryValLen+8), msgID, flags, e.Expires)
		if err := txn.set(k, v); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	rc := s.refcount(msgID)
	if rc > 0 && s.replaying {
		// Entries of the message were there before the replay; its body
		// should be too, but write it again if not.
		err := txn.get(appendBodyKey(s.alloc(bodyKeyLen), msgID), func([]byte) error { return nil })
		if errors.Is(err, ErrNotFound) {
			rc = 0
			s.log("persist: replay: message %d had entries but no body; body restored from the log", msgID)
		} else if err != nil {
			return err
		}
	}
	if rc == 0 {
		if err := s.setBody(txn, msgID, m); err != nil {
			return err
		}
		s.txnStats.messages++
	}
	s.ov[msgID] = s.refcount(msgID) + n
	s.txnStats.entries += uint64(n)
	s.txnMaxID = max(s.txnMaxID, msgID)
	return nil
}

// settleSortedMin is the run of settled entries from which settleSorted
// reads them through one iterator rather than one lookup each.
const settleSortedMin = 16

// settleSorted settles entries as settleOne does, but finds them through
// one iterator of the transaction (which sees its earlier writes), a step
// per consecutive key: a consumer's acks and a paged queue's loaded slice
// are runs of consecutive entries. It does nothing and reports false
// unless the entries are at least settleSortedMin, in strictly ascending
// order, and the backend can iterate.
func (s *engine) settleSorted(txn kvTxn, qs []QueueSeq) (bool, error) {
	sg, ok := txn.(sortedGetter)
	if !ok || len(qs) < settleSortedMin {
		return false, nil
	}
	var last entryRef
	n := 0
	for _, e := range qs {
		if e.QueueID == skipped {
			continue
		}
		r := entryRef{e.QueueID, e.Seq}
		if n > 0 && (r.queueID < last.queueID || r.queueID == last.queueID && r.seq <= last.seq) {
			return false, nil
		}
		last = r
		n++
	}
	if n < settleSortedMin {
		return false, nil
	}
	keys := make([][]byte, 0, n)
	for _, e := range qs {
		if e.QueueID != skipped {
			keys = append(keys, appendEntryKey(s.alloc(entryKeyLen), e.QueueID, e.Seq))
		}
	}
	type found struct {
		key   []byte
		msgID uint64
		ok    bool
	}
	hits := make([]found, 0, n)
	err := sg.getSorted(keys, func(i int, v []byte) error {
		id, _, ok := parseEntryVal(v)
		hits = append(hits, found{keys[i], id, ok})
		return nil
	})
	if err != nil {
		return true, err
	}
	for _, h := range hits {
		if err := txn.del(h.key); err != nil {
			return true, err
		}
		s.txnStats.settled++
		if !h.ok {
			_, seq, _ := parseEntryKey(h.key)
			s.log("persist: corrupt entry %x (seq %d) removed", h.key, seq)
			continue
		}
		if err := s.unref(txn, h.msgID); err != nil {
			return true, err
		}
	}
	return true, nil
}

// settleOne removes one entry if present and the body with its last entry.
func (s *engine) settleOne(txn kvTxn, queueID, seq uint64) error {
	k := appendEntryKey(s.alloc(entryKeyLen), queueID, seq)
	var msgID uint64
	ok := false
	err := txn.get(k, func(v []byte) error {
		msgID, _, ok = parseEntryVal(v)
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := txn.del(k); err != nil {
		return err
	}
	s.txnStats.settled++
	if !ok {
		s.log("persist: corrupt entry queue %d seq %d removed", queueID, seq)
		return nil
	}
	return s.unref(txn, msgID)
}

func (s *engine) unref(txn kvTxn, msgID uint64) error {
	rc := s.refcount(msgID) - 1
	if rc > 0 {
		s.ov[msgID] = rc
		return nil
	}
	s.ov[msgID] = 0
	return s.delBody(txn, msgID)
}

func (s *engine) markDelivered(txn kvTxn, queueID, seq uint64) error {
	k := appendEntryKey(s.alloc(entryKeyLen), queueID, seq)
	var msgID uint64
	var flags byte
	var expires int64
	ok := false
	err := txn.get(k, func(v []byte) error {
		msgID, flags, expires, ok = parseEntryValExpires(v)
		return nil
	})
	if errors.Is(err, ErrNotFound) || (err == nil && (!ok || flags&flagDelivered != 0)) {
		return nil
	}
	if err != nil {
		return err
	}
	return txn.set(k, appendEntryVal(s.alloc(entryValLen+8), msgID, flags|flagDelivered, expires))
}

// dropQueueChunk removes up to dropChunk entries of a queue and the bodies
// they held the last reference to.
func (s *engine) dropQueueChunk(txn kvTxn, o *op) error {
	type ent struct {
		key   []byte
		msgID uint64
		ok    bool
	}
	var ents []ent
	err := txn.scanFrom(entryPrefix(o.queueID), entryKey(o.queueID, o.seq), false, func(k, v []byte) error {
		id, _, ok := parseEntryVal(v)
		ents = append(ents, ent{append(s.alloc(len(k)), k...), id, ok})
		if len(ents) == dropChunk {
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return err
	}
	for _, e := range ents {
		if err := txn.del(e.key); err != nil {
			return err
		}
		if e.ok {
			if err := s.unref(txn, e.msgID); err != nil {
				return err
			}
		}
	}
	*o.dropped = len(ents)
	if len(ents) > 0 {
		_, last, _ := parseEntryKey(ents[len(ents)-1].key)
		*o.next = last + 1 // wraps only after seq 2^64-1, the last possible
	}
	return nil
}

// ---- recovery ----

// recover loads the queue index and counters, rebuilds the reference
// counts from the entries, and deletes entries of missing queues and bodies
// without entries. It runs in Open, before the committer starts.
func (s *engine) recover() error {
	live := make(map[uint64]bool)
	var maxMsg uint64
	err := s.kv.view(func(r kvReader) error {
		if err := r.scan([]byte{kindQueue}, false, func(k, v []byte) error {
			q, err := decodeQueue(append([]byte(nil), v...))
			if err != nil {
				return fmt.Errorf("queue %x: %w", k, err)
			}
			live[q.ID] = true
			s.names[queueName{q.VHost, q.Name}] = q.ID
			s.maxQueueID = max(s.maxQueueID, q.ID)
			return nil
		}); err != nil {
			return err
		}
		if err := r.get(metaKey(metaQueueID), func(v []byte) error {
			n, _ := parseU64(v)
			s.maxQueueID = max(s.maxQueueID, n)
			return nil
		}); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := r.get(metaKey(metaMsgID), func(v []byte) error {
			s.storedHW, _ = parseU64(v)
			return nil
		}); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("persist: recover definitions: %w", err)
	}

	// Entries: count references; collect entries of missing queues.
	var ids []uint64
	var orphans [][]byte
	var dropped, droppedBodies int
	flush := func() error {
		if len(orphans) == 0 {
			return nil
		}
		err := s.deleteNow(orphans)
		orphans = orphans[:0]
		return err
	}
	err = s.kv.view(func(r kvReader) error {
		return r.scan([]byte{kindEntry}, false, func(k, v []byte) error {
			q, _, ok := parseEntryKey(k)
			id, _, vok := parseEntryVal(v)
			if !ok || !vok || !live[q] {
				orphans = append(orphans, append([]byte(nil), k...))
				dropped++
				if len(orphans) == recoverChunk {
					return flush()
				}
				return nil
			}
			ids = append(ids, id)
			maxMsg = max(maxMsg, id)
			return nil
		})
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("persist: recover entries: %w", err)
	}
	s.refs.rebuild(ids)
	ids = nil
	// Bodies: delete those without entries.
	err = s.kv.view(func(r kvReader) error {
		return r.scan([]byte{kindBody}, true, func(k, _ []byte) error {
			id, ok := parseBodyKey(k)
			maxMsg = max(maxMsg, id)
			if !ok || s.refs.get(id) == 0 {
				orphans = append(orphans, append([]byte(nil), k...))
				droppedBodies++
				if len(orphans) == recoverChunk {
					return flush()
				}
			}
			return nil
		})
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("persist: recover bodies: %w", err)
	}
	// Chunks of large bodies: count them, delete those of dropped bodies.
	err = s.kv.view(func(r kvReader) error {
		return r.scan([]byte{kindChunk}, true, func(k, _ []byte) error {
			id, i, ok := parseChunkKey(k)
			if !ok || s.refs.get(id) == 0 {
				orphans = append(orphans, append([]byte(nil), k...))
				if len(orphans) == recoverChunk {
					return flush()
				}
				return nil
			}
			s.chunked[id] = max(s.chunked[id], i+1)
			return nil
		})
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("persist: recover body chunks: %w", err)
	}
	if dropped > 0 || droppedBodies > 0 {
		s.log("persist: recovery dropped %d orphan entries and %d orphan bodies", dropped, droppedBodies)
	}
	s.nextMsgID.Store(max(maxMsg, s.storedHW) + 1)
	return nil
}

// deleteNow deletes keys in one transaction, bypassing the committer (only
// for Open).
func (s *engine) deleteNow(keys [][]byte) error {
	txn := s.kv.begin()
	defer txn.discard()
	for _, k := range keys {
		if err := txn.del(k); err != nil {
			return err
		}
	}
	return txn.commit()
}

// check compares the transaction's view with the reference counts (see
// Check). The first return is what it found; the second an I/O error.
func (s *engine) check(txn kvTxn) (problems, err error) {
	var found []error
	report := func(format string, args ...any) {
		if len(found) < 10 {
			found = append(found, fmt.Errorf(format, args...))
		}
	}
	counts := make(map[uint64]int64)
	err = txn.scan([]byte{kindEntry}, false, func(k, v []byte) error {
		q, seq, ok := parseEntryKey(k)
		id, _, vok := parseEntryVal(v)
		if !ok || !vok {
			report("corrupt entry %x = %x", k, v)
			return nil
		}
		counts[id]++
		if counts[id] == 1 {
			err := txn.get(bodyKey(id), func([]byte) error { return nil })
			if errors.Is(err, ErrNotFound) {
				report("entry queue %d seq %d: body %d missing", q, seq, id)
				return nil
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = txn.scan([]byte{kindBody}, true, func(k, _ []byte) error {
		if id, ok := parseBodyKey(k); !ok || counts[id] == 0 {
			report("body %x has no entry", k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	held := make(map[uint64]uint32)
	err = txn.scan([]byte{kindChunk}, true, func(k, _ []byte) error {
		id, i, ok := parseChunkKey(k)
		if !ok || counts[id] == 0 {
			report("body chunk %x has no entry", k)
			return nil
		}
		held[id] = max(held[id], i+1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, n := range held {
		if s.chunked[id] != n {
			report("message %d: %d chunks stored, %d counted", id, n, s.chunked[id])
		}
	}
	for id, n := range counts {
		if rc := s.refcount(id); rc != n {
			report("message %d: %d entries, reference count %d", id, n, rc)
		}
	}
	s.refs.each(func(id uint64, _ int64) {
		if rc := s.refcount(id); rc > 0 && counts[id] == 0 {
			report("message %d: reference count %d, no entries", id, rc)
		}
	})
	return errors.Join(found...), nil
}
