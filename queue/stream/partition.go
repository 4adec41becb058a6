// partition.go: one partition of a stream: its log and the writer
// goroutine that appends to it with the group commit. A stream declared
// without x-stream-partitions has one, in the stream's directory; a
// partitioned stream keeps partition n > 0 in <dir>/p<n>.

package stream

import (
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/warren/queue"
)

// partition is one log of a stream and its writer.
type partition struct {
	q    *Queue
	n    int
	log  *Log
	tail *tailCache

	// The writer's inbox: records in offset order (their slices are the
	// messages': the writer encodes them into its batch) and their
	// callbacks, and the settings (a policy may change them). wmu never
	// waits for I/O.
	wmu      sync.Mutex
	pending  []Record
	dones    []func(error)
	closing  bool
	failed   error
	settings Settings
	retune   bool // the settings changed: the writer re-arms its ticker and applies retention
	wake     chan struct{}
	stopped  chan struct{}
}

// partitionDir is where partition n of the stream in dir keeps its log.
func partitionDir(dir string, n int) string {
	if n == 0 {
		return dir
	}
	return filepath.Join(dir, "p"+strconv.Itoa(n))
}

func openPartition(q *Queue, n, partitions int, dir string, s Settings) (*partition, error) {
	l, err := OpenLog(partitionDir(dir, n), s.SegmentSize)
	if err != nil {
		return nil, err
	}
	return &partition{q: q, n: n, log: l, tail: newTailCache(partitions), settings: s, retune: true, wake: make(chan struct{}, 1), stopped: make(chan struct{})}, nil
}

func (p *partition) start() {
	go p.writer()
	p.poke()
}

func (p *partition) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// setSettings applies new settings (a policy changed).
func (p *partition) setSettings(s Settings) {
	p.log.SetSegmentSize(s.SegmentSize)
	p.wmu.Lock()
	p.settings, p.retune = s, true
	p.wmu.Unlock()
	p.poke()
}

func (p *partition) currentSettings() Settings {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.settings
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
	p.poke()
	return true
}

// writer appends what waits as one batch, syncs it, offers it to the
// consumers and confirms it, until the partition closes. It applies
// retention after a batch that rolled a segment, when the settings
// change, and on its ticker while the stream has a max-age.
func (p *partition) writer() {
	defer close(p.stopped)
	cfg := &p.q.typ.cfg
	var tick <-chan time.Time
	stopTick := func() {}
	defer func() { stopTick() }()
	for {
		select {
		case <-p.wake:
		case <-tick:
			p.retain()
			continue
		}
		p.wmu.Lock()
		batch, dones, closing, retune, set := p.pending, p.dones, p.closing, p.retune, p.settings
		p.pending, p.dones, p.retune = nil, nil, false
		p.wmu.Unlock()
		if retune && !closing {
			stopTick()
			tick, stopTick = nil, func() {}
			if set.MaxAge > 0 {
				tick, stopTick = cfg.Ticker(ageCheckEvery(set.MaxAge))
			}
			p.retain()
		}
		if len(batch) > 0 {
			segs := p.log.Segments()
			// The cache may hold them first: readers see only what the
			// log says is synced.
			p.tail.add(batch)
			err := p.log.Write(batch)
			if err != nil {
				p.q.typ.logErr(err, "stream write failed; the stream takes no more publishes")
				p.tail.drop(^uint64(0))
				p.wmu.Lock()
				p.failed = err
				p.wmu.Unlock()
			} else {
				p.q.written(len(batch))
			}
			for _, d := range dones {
				if d != nil {
					d(err)
				}
			}
			if err == nil && p.log.Segments() > segs {
				p.retain()
			}
		}
		if closing {
			p.wmu.Lock()
			rest := p.pending
			p.wmu.Unlock()
			if len(rest) == 0 {
				return
			}
			p.poke()
		}
	}
}

// ageCheckEvery is how often a stream with max-age d checks it: a tenth
// of it, between a second and a minute.
func ageCheckEvery(d time.Duration) time.Duration {
	return min(max(d/10, time.Second), time.Minute)
}

// retain drops the segments retention says go (group.Retention) and
// releases the consumers' files in them, so that their disk space comes
// back at once; those consumers continue at the first retained offset.
// Only the writer calls it.
func (p *partition) retain() {
	n, err := p.log.Retain(p.currentSettings().Retention(), p.q.typ.cfg.Now())
	p.q.typ.logErr(err, "cannot remove a stream segment retention dropped")
	if n == 0 {
		return
	}
	first, _, _ := p.log.Bounds()
	p.tail.drop(first)
	p.q.released(p.n, first)
}

// close stops the writer once what waits is written.
func (p *partition) close() {
	p.wmu.Lock()
	was := p.closing
	p.closing = true
	p.wmu.Unlock()
	if !was {
		p.poke()
	}
	<-p.stopped
}
