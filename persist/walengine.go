package persist

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// How long message ops may wait in the log before they are applied to the
// kv (see "Message log" in doc.go). Any of the three triggers an apply.
const (
	walPendAge   = 100 * time.Millisecond
	walPendBytes = 4 << 20 // message bytes held for the apply
	walPendOps   = 1 << 13
)

// walState is the committer's side of the message log.
type walState struct {
	w         *wal
	pend      batch // logged, durable, not yet applied to the kv
	pendBytes int64
	pendSince time.Time
	// held is set when an apply failed: the ops it carried are only in the
	// log, so the checkpoint stays where it is (a restart replays them)
	// and no segment is released any more.
	held error
	// heldAt is when the apply last failed or was last retried; retryAge
	// how long retryHeld waits between tries.
	heldAt   time.Time
	retryAge time.Duration
	// pendAge is walPendAge (tests raise it).
	pendAge time.Duration
	ckpt    walPos // the checkpoint last written
}

// walRetryAge is how often a failed apply is retried.
const walRetryAge = time.Second

// openLog opens the message log in dir, replays what the last checkpoint
// does not cover into the kv, and checkpoints. It runs in Open after
// recover, before the committer starts.
func (s *engine) openLog(lo logOptions) error {
	dir := lo.dir
	w, err := openWAL(dir, lo.noSync)
	if err != nil {
		return fmt.Errorf("persist: open message log: %w", err)
	}
	var from walPos
	err = s.kv.view(func(r kvReader) error {
		return r.get(metaKey(metaWAL), func(v []byte) error {
			p, ok := parseWALPos(v)
			if !ok {
				return fmt.Errorf("%w: log checkpoint %x", ErrCorrupt, v)
			}
			from = p
			return nil
		})
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("persist: read log checkpoint: %w", err)
	}
	if lo.diskFreeLimit > 0 {
		w.disk = &diskWatch{dir: dir, limit: lo.diskFreeLimit, onLow: lo.onDiskLow, statfs: freeBytes, now: time.Now}
	}
	s.wl = &walState{w: w, retryAge: walRetryAge, pendAge: walPendAge}
	if err := replaySpace(dir, from); err != nil {
		return err
	}
	live := make(map[uint64]bool, len(s.names))
	for _, id := range s.names {
		live[id] = true
	}
	end, records, replayed, err := s.replayLog(from, replayOptions{repair: lo.repair, logf: s.log}, live)
	if err != nil {
		return fmt.Errorf("persist: replay message log: %w", err)
	}
	if records > 0 {
		s.log("persist: replayed %d ops from %d log records", replayed, records)
	}
	// Everything in the log is in the kv now: later writes go to a new
	// segment, and the old ones go once the checkpoint says so.
	//
	// A segment number is never used twice, even when every segment was
	// released: a recycled file still holds records of the segment it was,
	// and they must not read as records of the new one. So the next number
	// is past the checkpoint's and every spare's too.
	n := max(end.seg+1, from.seg, w.maxSpare+1)
	w.pos = walPos{seg: n - 1}
	if end.seg == n-1 {
		w.pos = end
	}
	next := walPos{seg: n}
	if err := s.writeCheckpoint(next); err != nil {
		return err
	}
	return w.release(next.seg)
}

// replaySpace refuses to replay the log from from when its file system has
// less room than the replay may write into Badger (the records' bytes, plus
// a memtable's worth): Badger writes through mapped files, and on a full
// disk that ends in SIGBUS instead of an error.
func replaySpace(dir string, from walPos) error {
	segs, _, err := listSegments(dir)
	if err != nil {
		return err
	}
	var need int64
	for _, n := range segs {
		if n < from.seg {
			continue
		}
		st, err := os.Stat(segName(dir, n))
		if err != nil {
			continue
		}
		need += st.Size()
		if n == from.seg {
			need -= min(from.off, st.Size())
		}
	}
	if need == 0 {
		return nil
	}
	need += replayMargin
	if free, ok := freeBytes(dir); ok && free < uint64(need) {
		return fmt.Errorf("persist: the message log in %s has up to %d bytes to replay into the store and its file system has only %d bytes free: free some space and start again", dir, need-replayMargin, free)
	}
	return nil
}

// replayMargin is the room a replay wants beyond the bytes it replays.
const replayMargin = 16 << 20

// replayLog applies the log from from to its end to the kv, idempotently.
// live, when not nil, is the set of queues that exist: entries of others
// are skipped (nil: every queue not being deleted). It returns the end of
// the log, and how many records and ops it replayed.
func (s *engine) replayLog(from walPos, ro replayOptions, live map[uint64]bool) (end walPos, records, replayed int, err error) {
	s.replaying, s.replayLive = true, live
	defer func() { s.replaying, s.replayLive = false, nil }()
	var ops []op
	var bytes int64
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := s.applyOps(ops)
		replayed += len(ops)
		ops, bytes = ops[:0], 0
		return err
	}
	end, err = replayWAL(s.wl.w.dir, from, ro, func(payload []byte) error {
		dec, err := walDecode(payload)
		if err != nil {
			// A valid CRC over an undecodable payload: a bug, not a torn
			// write. Stop rather than guess.
			return err
		}
		records++
		ops = append(ops, dec...)
		bytes += int64(len(payload))
		if bytes > walPendBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return end, records, replayed, err
}

// retryHeld tries again, once retryAge has passed since the last try, to
// bring the kv up to the log after an apply failed (a full disk, say):
// it replays the log from the checkpoint, as a restart would, which
// covers the pending ops too, so they are dropped. It reports whether the
// kv has everything again; the checkpoint can then move on and the log be
// trimmed.
func (s *engine) retryHeld() bool {
	w := s.wl
	if time.Since(w.heldAt) < w.retryAge {
		return false
	}
	w.heldAt = time.Now()
	_, records, replayed, err := s.replayLog(w.ckpt, replayOptions{logf: s.log}, nil)
	if err != nil {
		s.log("persist: applying the message log still fails: %v", err)
		return false
	}
	s.dropPending()
	w.held = nil
	s.log("persist: the message log applies again: %d ops of %d records since the checkpoint replayed", replayed, records)
	return true
}

// applyOps applies ops to the kv in as many durable transactions as its
// limits need. They were logged before: no done is called.
func (s *engine) applyOps(ops []op) error {
	s.applying = true
	defer func() { s.applying = false }()
	var failed error
	s.forRanges(ops, func(r []op) {
		if err := s.commitOps(r); err != nil && failed == nil {
			failed = err
		}
	})
	return failed
}

// commitOps is commitRange without callbacks, returning the error.
func (s *engine) commitOps(ops []op) error {
	err := s.tryCommit(ops)
	if errors.Is(err, errTooBig) && len(ops) > 1 {
		h := len(ops) / 2
		return errors.Join(s.commitOps(ops[:h]), s.commitOps(ops[h:]))
	}
	return err
}

func (s *engine) writeCheckpoint(p walPos) error {
	txn := s.kv.begin()
	defer txn.discard()
	if err := txn.set(metaKey(metaWAL), p.bytes()); err != nil {
		return err
	}
	// Message ids logged but never applied (settled before the apply)
	// count as used too.
	hw := s.nextMsgID.Load() - 1
	if hw > s.storedHW {
		if err := txn.set(metaKey(metaMsgID), u64(hw)); err != nil {
			return err
		}
	}
	if err := txn.commit(); err != nil {
		return fmt.Errorf("persist: write log checkpoint: %w", err)
	}
	s.storedHW = max(s.storedHW, hw)
	s.wl.ckpt = p
	return nil
}

// commitLogged is commitBatch with the message log: a batch of message
// ops (and Syncs) is one log record and one fdatasync, and the ops wait in
// pend for a later apply; any other op first applies what is pending and
// then takes the kv path, as without the log.
func (s *engine) commitLogged(ops []op) {
	msgs, syncs := 0, 0
	for i := range ops {
		switch k := ops[i].kind; {
		case walLoggable(k):
			msgs++
		case k == opSync:
			syncs++
		case k == opProbe:
			ops[i].probe()
		default:
			s.applyPending()
			s.commitKV(ops)
			return
		}
	}
	var err error
	if msgs > 0 {
		s.rejectOversized(ops)
		t0 := time.Now()
		err = s.wl.w.appendOps(ops)
		d := time.Since(t0)
		s.statsMu.Lock()
		st := &s.stats
		st.Batches++
		if err == nil {
			st.Commits++
			st.Ops += uint64(len(ops))
			st.FsyncTotal += d
			st.FsyncMax = max(st.FsyncMax, d)
			st.Fsync.observe(d)
		} else {
			st.FailedTxns++
		}
		s.statsMu.Unlock()
		if err != nil {
			s.log("persist: message log write of %d ops failed: %v", len(ops), err)
		} else {
			s.hold(ops)
		}
	}
	if syncs > 0 {
		// Sync promises that ScanQueue sees everything before it.
		s.applyPending()
	}
	for i := range ops {
		if d := ops[i].done; d != nil {
			if ops[i].err != nil {
				d(ops[i].err)
			} else {
				d(err)
			}
		}
	}
	s.maybeApply()
}

// rejectOversized fails the ops that no kv transaction or no log record
// could hold (an Atomic op is applied in one transaction and logged in one
// record): they are not logged, and their done gets the error, so nothing
// is acknowledged that a replay could not read.
func (s *engine) rejectOversized(ops []op) {
	maxCount, maxSize := s.opLimits()
	limit := s.wl.w.payloadLimit()
	for i := range ops {
		if c, z := s.estimate(&ops[i]); c > maxCount || z > maxSize {
			ops[i].err = fmt.Errorf("%w: one op of %d writes, %d bytes", errTooBig, c, z)
			s.log("persist: %v", ops[i].err)
		} else if n := walSize(ops[i : i+1]); n > limit {
			ops[i].err = fmt.Errorf("%w: one op of %d bytes, more than a log record holds (%d)", ErrTooLarge, n, limit)
			s.log("persist: %v", ops[i].err)
		}
	}
}

// hold copies the message ops of a logged batch into pend (the batch's
// buffers are reused).
func (s *engine) hold(ops []op) {
	p := &s.wl.pend
	if len(p.ops) == 0 {
		s.wl.pendSince = time.Now()
	}
	var msgs, entries, maxID uint64
	for i := range ops {
		o := ops[i]
		if !walLoggable(o.kind) || o.err != nil {
			continue
		}
		o.done = nil
		if len(o.qs) > 0 {
			start := len(p.qs)
			p.qs = append(p.qs, o.qs...)
			o.qs = p.qs[start:len(p.qs):len(p.qs)]
		}
		s.wl.pendBytes += messageBytes(&o)
		switch o.kind {
		case opPublish:
			maxID = max(maxID, o.msgID)
			msgs++
			entries += uint64(len(o.qs))
		case opAtomic:
			for j := range o.pubs {
				maxID = max(maxID, o.pubs[j].MsgID)
				entries += uint64(len(o.pubs[j].Entries))
			}
			msgs += uint64(len(o.pubs))
		}
		p.ops = append(p.ops, o)
	}
	s.pendCount.Store(int64(len(p.ops)))
	if s.nextMsgID.Load() <= maxID {
		s.nextMsgID.Store(maxID + 1)
	}
	s.statsMu.Lock()
	s.stats.Messages += msgs
	s.stats.Entries += entries
	s.statsMu.Unlock()
}

// messageBytes is what the messages an op publishes hold in memory:
// bodies and properties (walPendBytes counts these).
func messageBytes(o *op) int64 {
	var n int64
	if o.kind == opPublish {
		n += int64(len(o.msg.Body) + len(o.msg.Props))
	}
	for j := range o.pubs {
		n += int64(len(o.pubs[j].Msg.Body) + len(o.pubs[j].Msg.Props))
	}
	return n
}

// maybeApply applies the pending ops when one of the walPend limits is
// reached.
func (s *engine) maybeApply() {
	w := s.wl
	if len(w.pend.ops) == 0 {
		return
	}
	if len(w.pend.ops) >= walPendOps || time.Since(w.pendSince) >= w.pendAge {
		s.applyPending()
		return
	}
	if w.pendBytes >= walPendBytes {
		// Large messages acked at once need not go to the kv either:
		// fold first, and apply only if what is left is still large.
		s.compactPending()
		if w.pendBytes >= walPendBytes/2 {
			s.applyPending()
		}
	}
}

// compactPending folds the pending ops and drops those left with nothing
// to write, so that their messages' bytes stop counting (and are no longer
// held). Delivered marks folded into pending publishes stay in
// foldDelivered until the apply.
func (s *engine) compactPending() {
	w := s.wl
	p := &w.pend
	s.foldBatch(p.ops)
	clear(s.fold)
	kept := p.ops[:0]
	var bytes int64
	for _, o := range p.ops {
		live := o.kind == opAtomic
		for j := 0; !live && j < len(o.qs); j++ {
			live = o.qs[j].QueueID != skipped
		}
		if !live {
			continue
		}
		bytes += messageBytes(&o)
		kept = append(kept, o)
	}
	clear(p.ops[len(kept):])
	p.ops = kept
	w.pendBytes = bytes
	s.pendCount.Store(int64(len(kept)))
}

// pendingDue is how long until the pending ops are due (0: now), or -1
// when nothing is pending.
func (s *engine) pendingDue() time.Duration {
	if s.wl == nil {
		return -1
	}
	if s.wl.held != nil && len(s.wl.pend.ops) == 0 {
		return max(s.wl.retryAge-time.Since(s.wl.heldAt), 0)
	}
	if len(s.wl.pend.ops) == 0 {
		return -1
	}
	return max(s.wl.pendAge-time.Since(s.wl.pendSince), 0)
}

// applyPending folds the pending ops (publishes settled before the apply
// are never written), applies them to the kv durably, and moves the
// checkpoint to the end of the log, releasing the segments before it.
func (s *engine) applyPending() {
	w := s.wl
	if w == nil {
		return
	}
	if w.held != nil {
		s.retryHeld()
	}
	p := &w.pend
	if len(p.ops) > 0 {
		s.foldBatch(p.ops)
		err := s.applyOps(p.ops)
		clear(s.fold)
		clear(s.foldDelivered)
		if err != nil && w.held == nil {
			w.held, w.heldAt = err, time.Now()
			s.log("persist: applying the message log failed: %v; the log is kept from the checkpoint on, and replayed into the kv when the apply works again or at the next start", err)
		}
		s.dropPending()
	}
	if w.held != nil || w.w.f == nil {
		return
	}
	end := w.w.pos
	if end == w.ckpt {
		return
	}
	if err := s.writeCheckpoint(end); err != nil {
		s.log("%v", err)
		return
	}
	if err := w.w.release(end.seg); err != nil {
		s.log("persist: release log segments: %v", err)
	}
}

// dropPending forgets the pending ops (applied, or replayed from the log).
func (s *engine) dropPending() {
	p := &s.wl.pend
	if cap(p.ops) > 2*walPendOps {
		p.ops = nil
	} else {
		clear(p.ops)
		p.ops = p.ops[:0]
	}
	if cap(p.qs) > 8*walPendOps {
		p.qs = nil
	} else {
		p.qs = p.qs[:0]
	}
	s.wl.pendBytes = 0
	s.pendCount.Store(0)
}

// flushForRead makes the kv show every op whose done was called: reads go
// to the kv, and logged ops may still be pending.
func (s *engine) flushForRead() {
	if s.pendCount.Load() > 0 {
		_ = s.submitWait(op{kind: opSync})
	}
}
