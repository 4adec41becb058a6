package stream

import (
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream/group"
)

// Queue is one stream.
type Queue struct {
	typ  *Type
	decl queue.Decl
	log  *Log

	// The writer's inbox: encoded records in offset order and their
	// callbacks, and the settings (a policy may change them). wmu never
	// waits for I/O.
	wmu      sync.Mutex
	pending  [][]byte
	dones    []func(error)
	closing  bool
	failed   error
	settings Settings
	retune   bool // the settings changed: the writer re-arms its ticker and applies retention
	wake     chan struct{}
	stopped  chan struct{}

	// mu guards the consumers. Reads for deliveries happen under it,
	// bounded by the consumers' credit; publishers never take it.
	mu        sync.Mutex
	consumers []*consumer
	unacked   int
	deleted   bool
	stats     queue.MessageStats
}

// consumer is one consumer's cursor.
type consumer struct {
	tag  string
	c    queue.Consumer
	r    *Reader
	held *queue.Entry // read, refused by the consumer, offered again first
	err  bool         // its reader hit damage; it gets nothing more
}

func (t *Type) open(d queue.Decl, s Settings, dir string) (*Queue, error) {
	l, err := OpenLog(dir, s.SegmentSize)
	if err != nil {
		return nil, err
	}
	q := &Queue{typ: t, decl: d, settings: s, log: l, retune: true, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go q.writer()
	q.poke()
	return q, nil
}

// Settings returns the stream's settings: its arguments and its policy's.
func (q *Queue) Settings() Settings {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	return q.settings
}

// SetLimits implements queue.LimitSetter: a policy changed. The new
// settings apply at once: the segment size from the next append, the
// retention limits are applied by the writer right away (as RabbitMQ's
// update_retention does), then after each roll and, with a max-age, on
// its ticker.
func (q *Queue) SetLimits(l queue.Limits) {
	s, err := ParseSettings(q.decl.Args, l)
	if err != nil {
		return // the arguments were valid at declaration
	}
	q.log.SetSegmentSize(s.SegmentSize)
	q.wmu.Lock()
	q.settings, q.retune = s, true
	q.wmu.Unlock()
	q.poke()
}

func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Log returns the stream's log, for tests and management.
func (q *Queue) Log() *Log { return q.log }

// Decl implements queue.Queue.
func (q *Queue) Decl() *queue.Decl { return &q.decl }

// Type implements queue.Queue.
func (q *Queue) Type() queue.Type { return q.typ }

// append hands m to the writer; done (if set) is called exactly once.
func (q *Queue) append(m *queue.Message, now int64, done func(error)) bool {
	q.wmu.Lock()
	if q.closing || q.failed != nil {
		err := q.failed
		q.wmu.Unlock()
		if done != nil {
			done(err)
		}
		return err != nil
	}
	off, ts := q.log.reserve(now)
	rec := encodeRecord(nil, &Record{Offset: off, Timestamp: ts, Exchange: m.Exchange, RoutingKey: m.RoutingKey, Props: m.Props, Body: m.Body})
	q.pending = append(q.pending, rec)
	q.dones = append(q.dones, done)
	q.wmu.Unlock()
	q.poke()
	return true
}

// writer appends what waits as one batch, syncs it, offers it to the
// consumers and confirms it, until the stream closes. It applies
// retention after a batch that rolled a segment, when the settings
// change, and on its ticker while the stream has a max-age.
func (q *Queue) writer() {
	defer close(q.stopped)
	var tick <-chan time.Time
	stopTick := func() {}
	defer func() { stopTick() }()
	for {
		select {
		case <-q.wake:
		case <-tick:
			q.retain()
			continue
		}
		q.wmu.Lock()
		batch, dones, closing, retune, set := q.pending, q.dones, q.closing, q.retune, q.settings
		q.pending, q.dones, q.retune = nil, nil, false
		q.wmu.Unlock()
		if retune && !closing {
			stopTick()
			tick, stopTick = nil, func() {}
			if set.MaxAge > 0 {
				tick, stopTick = q.typ.cfg.Ticker(ageCheckEvery(set.MaxAge))
			}
			q.retain()
		}
		if len(batch) > 0 {
			segs := q.log.Segments()
			err := q.log.Write(batch)
			if err != nil {
				q.typ.logErr(err, "stream write failed; the stream takes no more publishes")
				q.wmu.Lock()
				q.failed = err
				q.wmu.Unlock()
			} else {
				q.mu.Lock()
				q.stats.Publish += uint64(len(batch))
				q.dispatch(nil)
				q.mu.Unlock()
			}
			for _, d := range dones {
				if d != nil {
					d(err)
				}
			}
			if err == nil && q.log.Segments() > segs {
				q.retain()
			}
		}
		if closing {
			q.wmu.Lock()
			rest := q.pending
			q.wmu.Unlock()
			if len(rest) == 0 {
				return
			}
			q.poke()
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
func (q *Queue) retain() {
	n, err := q.log.Retain(q.Settings().Retention(), q.typ.cfg.Now())
	q.typ.logErr(err, "cannot remove a stream segment retention dropped")
	if n == 0 {
		return
	}
	first, _, _ := q.log.Bounds()
	q.mu.Lock()
	for _, k := range q.consumers {
		k.r.Release(first)
		if k.held != nil && k.held.Seq < first {
			k.held = nil // read but not delivered: it is gone too
		}
	}
	q.mu.Unlock()
}

// close stops the writer once what waits is written.
func (q *Queue) close() {
	q.wmu.Lock()
	was := q.closing
	q.closing = true
	q.wmu.Unlock()
	if !was {
		q.poke()
	}
	<-q.stopped
}

// dispatch offers each consumer the records after its cursor until it
// refuses one. q.mu is held.
func (q *Queue) dispatch(ctx any) {
	for _, k := range q.consumers {
		for !k.err {
			if k.held == nil {
				rec, ok, err := k.r.Next()
				if err != nil {
					q.typ.logErr(err, "stream read failed; the consumer gets nothing more")
					k.err = true
					break
				}
				if !ok {
					break
				}
				buf := make([]byte, len(rec.Props)+len(rec.Body))
				copy(buf, rec.Props)
				copy(buf[len(rec.Props):], rec.Body)
				m := queue.NewStored(rec.Exchange, rec.RoutingKey, buf[:len(rec.Props):len(rec.Props)], buf[len(rec.Props):], 0)
				k.held = &queue.Entry{Seq: rec.Offset, Msg: m}
			}
			switch k.c.Deliver(q, *k.held, ctx) {
			case queue.Refused:
				goto next
			case queue.Pending:
				q.unacked++
				q.stats.Deliver++
			case queue.Settled:
				q.stats.DeliverNoAck++
			}
			k.held = nil
		}
	next:
	}
}

// AddConsumer implements queue.Queue: the consumer needs manual acks and
// a prefetch limit of its own, and starts where x-stream-offset says.
func (q *Queue) AddConsumer(o queue.ConsumeOptions) error {
	if o.NoAck {
		return queue.ErrNoAckRefused
	}
	if o.Prefetch == 0 {
		return queue.ErrPrefetchRequired
	}
	r, err := q.readerFor(o.Args["x-stream-offset"])
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		r.Close()
		return queue.ErrDeleted
	}
	q.consumers = append(q.consumers, &consumer{tag: o.Tag, c: o.Consumer, r: r})
	return nil
}

// readerFor places a new consumer's cursor by its x-stream-offset
// (group.ParseOffset reads it as RabbitMQ 3.10 does).
func (q *Queue) readerFor(spec any) (*Reader, error) {
	o, err := group.ParseOffset(spec, q.typ.cfg.Now())
	if err != nil {
		return nil, &queue.OffsetError{Value: spec}
	}
	first, end, last := q.log.Bounds()
	switch o.Kind {
	case group.OffsetFirst:
		return q.log.ReaderAt(first)
	case group.OffsetLast:
		return q.log.ReaderAt(last)
	case group.OffsetTimestamp:
		return q.log.ReaderAtTime(o.Time.UnixMilli())
	case group.OffsetAbsolute:
		return q.log.ReaderAt(min(uint64(o.Offset), end))
	}
	return q.log.ReaderAt(end)
}

// RemoveConsumer implements queue.Queue. A stream is never auto-deleted.
func (q *Queue) RemoveConsumer(tag string, c queue.Consumer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.consumers = slices.DeleteFunc(q.consumers, func(k *consumer) bool {
		if k.tag == tag && k.c == c {
			k.r.Close()
			return true
		}
		return false
	})
	return false
}

// Kick implements queue.Queue.
func (q *Queue) Kick(ctx any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.deleted {
		q.dispatch(ctx)
	}
}

// Settle implements queue.Queue: the log does not change; a requeued or
// rejected delivery is not offered again (RabbitMQ refuses nack and
// reject on streams; a closed channel's deliveries end here).
func (q *Queue) Settle(entries []queue.Entry, op queue.SettleOp) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unacked = max(q.unacked-len(entries), 0)
	if op == queue.Ack {
		q.stats.Ack += uint64(len(entries))
	}
}

// RefusesNack implements queue.NackRefuser.
func (q *Queue) RefusesNack() {}

// Delete implements queue.Queue. Like RabbitMQ 3.10, a stream ignores
// if-unused and if-empty and reports no messages.
func (q *Queue) Delete(_, _ bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, nil, nil
	}
	q.deleted = true
	var refs []queue.ConsumerRef
	for _, k := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: k.tag, Consumer: k.c})
		k.r.Close()
	}
	q.consumers = nil
	q.mu.Unlock()
	q.close()
	if st := q.typ.cfg.Store; st != nil && q.decl.ID != 0 {
		q.typ.logErr(st.DeleteQueue(q.decl.VHost, q.decl.Name, q.decl.ID), "durable store write failed")
	}
	q.typ.logErr(q.log.Remove(), "cannot remove a deleted stream's files")
	return 0, refs, nil
}

// Deleted implements queue.Queue.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Touch implements queue.Queue (streams have no x-expires).
func (q *Queue) Touch() {}

// Stop implements queue.Stopper: the writer ends once what waits is
// synced, and the log closes. The stream keeps its messages.
func (q *Queue) Stop() {
	q.close()
	q.log.Close()
}

// Stats implements queue.Queue: Ready is the number of messages the
// stream retains, ReadyBytes the size of its segments.
func (q *Queue) Stats() queue.Stats {
	first, end, _ := q.log.Bounds()
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{Ready: int(end - first), ReadyBytes: q.log.Bytes(), Unacked: q.unacked, Consumers: len(q.consumers)}
}

// DeclareCounts implements queue.DeclareCounter: declare-ok reports the
// retained messages and, as RabbitMQ 3.10's streams do, no consumers.
func (q *Queue) DeclareCounts() (messages, consumers int) {
	first, end, _ := q.log.Bounds()
	return int(end - first), 0
}

// MessageStats implements queue.Queue.
func (q *Queue) MessageStats() queue.MessageStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// DeliveryProps implements queue.Queue: a delivery carries its offset in
// the x-stream-offset header.
func (q *Queue) DeliveryProps(e queue.Entry) []byte {
	return queue.WithHeader(e.Msg.Props, "x-stream-offset", int64(e.Seq))
}
