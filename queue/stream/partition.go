// partition.go: one partition of a stream: its log and the inbox of
// records waiting for the stream's writer (writer.go). A stream declared
// without x-stream-partitions has one, in the stream's directory; a
// partitioned stream keeps partition n > 0 in <dir>/p<n>.

package stream

import (
	"path/filepath"
	"strconv"
	"sync"

	"github.com/warrenmq/warren/queue"
)

// partition is one log of a stream and its inbox. The stream's writer
// (writer.go) writes every partition's log.
type partition struct {
	q    *Queue
	n    int
	log  *Log
	tail *tailCache

	// The inbox: records in offset order (their slices are the
	// messages': the writer encodes them into its batch) and their
	// callbacks. wmu never waits for I/O.
	wmu     sync.Mutex
	pending []Record
	dones   []func(error)
	closing bool
	failed  error
}

// partitionDir is where partition n of the stream in dir keeps its log.
func partitionDir(dir string, n int) string {
	if n == 0 {
		return dir
	}
	return filepath.Join(dir, "p"+strconv.Itoa(n))
}

func openPartition(q *Queue, n, partitions int, dir string, s Settings, cut uint64) (*partition, error) {
	l, err := OpenLogCut(partitionDir(dir, n), s.SegmentSize, cut)
	if err != nil {
		return nil, err
	}
	return &partition{q: q, n: n, log: l, tail: newTailCache(partitions)}, nil
}

// append hands m to the writer; done (if set) is called exactly once.
// filter is the message's x-stream-filter-value, when it has one.
func (p *partition) append(m *queue.Message, now int64, filter string, hasFilter bool, done func(error)) bool {
	p.wmu.Lock()
	if p.closing || p.failed != nil {
		err := p.failed
		p.wmu.Unlock()
		if done != nil {
			done(err)
		}
		return err != nil
	}
	off, ts := p.log.reserve(now)
	p.pending = append(p.pending, Record{Offset: off, Timestamp: ts, Exchange: m.Exchange, RoutingKey: m.RoutingKey,
		Filter: filter, HasFilter: hasFilter, Props: m.Props, Body: m.Body})
	p.dones = append(p.dones, done)
	p.wmu.Unlock()
	p.q.w.poke()
	return true
}

// take empties the inbox.
func (p *partition) take() ([]Record, []func(error)) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	b, d := p.pending, p.dones
	p.pending, p.dones = nil, nil
	return b, d
}

// fail records a failed write: the partition takes no more publishes.
func (p *partition) fail(err error) {
	p.q.typ.logErr(err, "stream write failed; the stream takes no more publishes")
	p.tail.drop(^uint64(0))
	p.wmu.Lock()
	p.failed = err
	p.wmu.Unlock()
}

// retain drops the segments retention says go (group.Retention) and
// releases the consumers' files in them, so that their disk space comes
// back at once; those consumers continue at the first retained offset.
// Only the writer calls it.
func (p *partition) retain(s Settings) {
	n, err := p.log.Retain(s.Retention(), p.q.typ.cfg.Now())
	p.q.typ.logErr(err, "cannot remove a stream segment retention dropped")
	if n == 0 {
		return
	}
	first, _, _ := p.log.Bounds()
	p.tail.drop(first)
	p.q.released(p.n, first)
}
