package persist

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// This file serves queues that keep most of their backlog on disk: they
// count their entries at start-up without reading bodies, load the next
// slice of entries as consumers catch up, and wait for the committer before
// reading entries they submitted themselves.

var errScanLimit = errors.New("persist: scan limit reached")

// Sync waits until every op submitted before it is durable.
func (s *engine) Sync() error {
	return s.submitWait(op{kind: opSync})
}

// ScanQueue calls fn for at most limit entries of the queue with Seq >=
// from, in ascending Seq order. With withBodies each entry's message is
// loaded; without, Msg is left empty. An error from fn stops the scan and is
// returned. Entries whose body is missing are skipped.
//
// The entries are read first and their bodies after, in message id order
// through one iterator where the backend has one (getSorted): a queue's
// bodies mostly have consecutive ids, so that is a step to the next key
// instead of one lookup through every level per body.
func (s *engine) ScanQueue(queueID, from uint64, limit int, withBodies bool, fn func(e RecoveredEntry) error) error {
	s.flushForRead()
	if limit <= 0 {
		return nil
	}
	return s.kv.view(func(r kvReader) error {
		var es []RecoveredEntry
		start := appendEntryKey(nil, queueID, from)
		err := r.scanFrom(entryPrefix(queueID), start, false, func(k, v []byte) error {
			_, seq, _ := parseEntryKey(k)
			msgID, flags, expires, ok := parseEntryValExpires(v)
			if !ok {
				return fmt.Errorf("%w: entry %x", ErrCorrupt, k)
			}
			es = append(es, RecoveredEntry{Seq: seq, MsgID: msgID, Redelivered: flags&flagDelivered != 0, Expires: expires})
			if len(es) >= limit {
				return errScanLimit
			}
			return nil
		})
		if err != nil && !errors.Is(err, errScanLimit) {
			return err
		}
		if withBodies && len(es) > 0 {
			if err := loadBodies(r, es); err != nil {
				return err
			}
		}
		for i := range es {
			if withBodies && es[i].MsgID == 0 {
				continue // no body
			}
			if err := fn(es[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// sortedGetter is a kvReader that reads many keys in ascending order
// cheaper than one get each: getSorted calls fn(i, v) for each keys[i] that
// is present (v valid only during fn); keys must be ascending.
type sortedGetter interface {
	getSorted(keys [][]byte, fn func(i int, v []byte) error) error
}

// loadBodies fills in the messages of es, setting MsgID to 0 where the body
// is missing.
func loadBodies(r kvReader, es []RecoveredEntry) error {
	order := make([]int, len(es))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(es[a].MsgID, es[b].MsgID) })
	keys := make([][]byte, 0, len(es))
	buf := make([]byte, 0, len(es)*bodyKeyLen)
	for _, i := range order {
		l := len(buf)
		buf = appendBodyKey(buf, es[i].MsgID)
		keys = append(keys, buf[l:len(buf):len(buf)])
	}
	found := make([]bool, len(es))
	take := func(j int, v []byte) error {
		i := order[j]
		m, err := readMessage(r, es[i].MsgID, v)
		es[i].Msg = m
		found[i] = true
		return err
	}
	var err error
	if sg, ok := r.(sortedGetter); ok {
		err = sg.getSorted(keys, take)
	} else {
		for j, k := range keys {
			err = r.get(k, func(v []byte) error { return take(j, v) })
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	for i := range es {
		if !found[i] {
			es[i].MsgID = 0
		}
	}
	return nil
}

// QueueCounts returns how many entries the queue has and the largest Seq,
// reading keys only.
func (s *engine) QueueCounts(queueID uint64) (count int, maxSeq uint64, err error) {
	s.flushForRead()
	err = s.kv.view(func(r kvReader) error {
		return r.scan(entryPrefix(queueID), true, func(k, _ []byte) error {
			_, seq, _ := parseEntryKey(k)
			count++
			maxSeq = max(maxSeq, seq)
			return nil
		})
	})
	return count, maxSeq, err
}
