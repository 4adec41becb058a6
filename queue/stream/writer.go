// writer.go: a stream's writer goroutine, the group commit of all its
// partitions: it takes what waits in every partition's inbox, appends each
// partition's records to its log, syncs the logs it wrote as one sync
// point, and only then makes them readable and confirms them. A
// partitioned stream's batch thus costs one round of syncs whatever the
// number of partitions it touched, instead of one writer and one sync
// cycle per partition.

package stream

import (
	"sync"
	"time"
)

// writer is a stream's writer and its settings (a policy may change
// them).
type writer struct {
	q *Queue

	// mu never waits for I/O.
	mu       sync.Mutex
	settings Settings
	retune   bool // the settings changed: the writer re-arms its ticker and applies retention
	closing  bool
	wake     chan struct{}
	stopped  chan struct{}
}

func newWriter(q *Queue, s Settings) *writer {
	return &writer{q: q, settings: s, retune: true, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

func (w *writer) start() {
	go w.run()
	w.poke()
}

func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// setSettings applies new settings (a policy changed).
func (w *writer) setSettings(s Settings) {
	for _, p := range w.q.parts {
		p.log.SetSegmentSize(s.SegmentSize)
	}
	w.mu.Lock()
	w.settings, w.retune = s, true
	w.mu.Unlock()
	w.poke()
}

func (w *writer) currentSettings() Settings {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.settings
}

// written is one partition's share of a batch.
type written struct {
	p     *partition
	recs  []Record
	dones []func(error)
	segs  int // the log's segments before the batch
	err   error
}

// run writes what waits as one batch, syncs it, offers it to the
// consumers and confirms it, until the stream closes. It applies
// retention after a batch that rolled a partition's segment, when the
// settings change, and on its ticker while the stream has a max-age.
func (w *writer) run() {
	defer close(w.stopped)
	q := w.q
	cfg := &q.typ.cfg
	var tick <-chan time.Time
	stopTick := func() {}
	defer func() { stopTick() }()
	var batch []written
	for {
		select {
		case <-w.wake:
		case <-tick:
			set := w.currentSettings()
			for _, p := range q.parts {
				p.retain(set)
			}
			continue
		}
		w.mu.Lock()
		closing, retune, set := w.closing, w.retune, w.settings
		w.retune = false
		w.mu.Unlock()
		if retune && !closing {
			stopTick()
			tick, stopTick = nil, func() {}
			if set.MaxAge > 0 {
				tick, stopTick = cfg.Ticker(ageCheckEvery(set.MaxAge))
			}
			for _, p := range q.parts {
				p.retain(set)
			}
		}
		batch = batch[:0]
		for _, p := range q.parts {
			recs, dones := p.take()
			if len(recs) == 0 {
				continue
			}
			b := written{p: p, recs: recs, dones: dones, segs: p.log.Segments()}
			// The cache may hold them first: readers see only what the
			// log says is synced.
			p.tail.add(recs)
			b.err = p.log.Append(recs)
			batch = append(batch, b)
		}
		if q.jnl != nil {
			journalAll(q.jnl, batch, q.parts)
		} else {
			syncAll(batch)
		}
		n := 0
		for i := range batch {
			b := &batch[i]
			if b.err != nil {
				b.p.fail(b.err)
			} else {
				n += len(b.recs)
			}
		}
		if n > 0 {
			q.written(n)
		}
		for i := range batch {
			b := &batch[i]
			for _, d := range b.dones {
				if d != nil {
					d(b.err)
				}
			}
			if b.err == nil && b.p.log.Segments() > b.segs {
				b.p.retain(set)
			}
			*b = written{}
		}
		if closing {
			if w.drained() {
				if q.jnl != nil {
					q.typ.logErr(q.jnl.close(q.parts), "cannot sync a stream's partitions at its stop; its journal stays for the next start")
				}
				return
			}
			w.poke()
		}
	}
}

// journalAll makes a partitioned stream's batch durable with one sync:
// the journal's (journal.go). The logs' appends become readable after it
// without a sync of their own; a checkpoint syncs them later. A failed
// checkpoint fails the batch: the partitions take no more publishes.
func journalAll(j *journal, batch []written, parts []*partition) {
	err := j.failed()
	if err == nil {
		err = j.write(batch) // without the appends that failed
	}
	if err == nil {
		err = j.maybeCheckpoint(parts)
	}
	for i := range batch {
		b := &batch[i]
		if b.err != nil {
			continue
		}
		if err != nil {
			b.err = err
			continue
		}
		b.p.log.Publish()
	}
}

// syncAll syncs the logs a batch appended to, in parallel: the batch
// waits for the slowest instead of their sum.
func syncAll(batch []written) {
	var wg sync.WaitGroup
	for i := range batch {
		b := &batch[i]
		if b.err != nil {
			continue
		}
		if i == len(batch)-1 {
			b.err = b.p.log.Sync()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.err = b.p.log.Sync()
		}()
	}
	wg.Wait()
}

// drained reports whether no partition has records waiting.
func (w *writer) drained() bool {
	for _, p := range w.q.parts {
		p.wmu.Lock()
		n := len(p.pending)
		p.wmu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// ageCheckEvery is how often a stream with max-age d checks it: a tenth
// of it, between a second and a minute.
func ageCheckEvery(d time.Duration) time.Duration {
	return min(max(d/10, time.Second), time.Minute)
}

// close stops the writer once what waits is written: the partitions take
// no more appends, then the writer drains them and ends.
func (w *writer) close() {
	for _, p := range w.q.parts {
		p.wmu.Lock()
		p.closing = true
		p.wmu.Unlock()
	}
	w.mu.Lock()
	was := w.closing
	w.closing = true
	w.mu.Unlock()
	if !was {
		w.poke()
	}
	<-w.stopped
}
