package persist

import (
	"errors"
	"fmt"
)

// This file serves queues that keep most of their backlog on disk: they
// count their entries at start-up without reading bodies, load the next
// slice of entries as consumers catch up, and wait for the committer before
// reading entries they submitted themselves.

var errScanLimit = errors.New("persist: scan limit reached")

// Sync waits until every op submitted before it is durable.
func (s *engine) Sync() error {
	return s.submitWait(op{kind: opWrite})
}

// ScanQueue calls fn for at most limit entries of the queue with Seq >=
// from, in ascending Seq order. With withBodies each entry's message is
// loaded; without, Msg is left empty. An error from fn stops the scan and is
// returned. Entries whose body is missing are skipped.
func (s *engine) ScanQueue(queueID, from uint64, limit int, withBodies bool, fn func(e RecoveredEntry) error) error {
	if limit <= 0 {
		return nil
	}
	n := 0
	err := s.kv.view(func(r kvReader) error {
		start := appendEntryKey(nil, queueID, from)
		return r.scanFrom(entryPrefix(queueID), start, false, func(k, v []byte) error {
			_, seq, _ := parseEntryKey(k)
			msgID, flags, expires, ok := parseEntryValExpires(v)
			if !ok {
				return fmt.Errorf("%w: entry %x", ErrCorrupt, k)
			}
			e := RecoveredEntry{Seq: seq, MsgID: msgID, Redelivered: flags&flagDelivered != 0, Expires: expires}
			if withBodies {
				err := r.get(bodyKey(msgID), func(v []byte) error {
					m, err := decodeMessage(append([]byte(nil), v...))
					e.Msg = m
					return err
				})
				if errors.Is(err, ErrNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
			}
			if err := fn(e); err != nil {
				return err
			}
			n++
			if n >= limit {
				return errScanLimit
			}
			return nil
		})
	})
	if errors.Is(err, errScanLimit) {
		return nil
	}
	return err
}

// QueueCounts returns how many entries the queue has and the largest Seq,
// reading keys only.
func (s *engine) QueueCounts(queueID uint64) (count int, maxSeq uint64, err error) {
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
