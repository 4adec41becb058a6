package stream

import (
	"github.com/warrenmq/warren/queue/stream/group"
	"slices"
	"sync"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Queue is one stream.
type Queue struct {
	typ      *Type
	decl     queue.Decl
	settings Settings
	log      *Log

	// The writer's inbox: encoded records in offset order and their
	// callbacks. wmu never waits for I/O.
	wmu     sync.Mutex
	pending [][]byte
	dones   []func(error)
	closing bool
	failed  error
	wake    chan struct{}
	stopped chan struct{}

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
	q := &Queue{typ: t, decl: d, settings: s, log: l, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go q.writer()
	return q, nil
}

// Settings returns the stream's arguments.
func (q *Queue) Settings() Settings { return q.settings }

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
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// writer appends what waits as one batch, syncs it, offers it to the
// consumers and confirms it, until the stream closes.
func (q *Queue) writer() {
	defer close(q.stopped)
	for {
		<-q.wake
		q.wmu.Lock()
		batch, dones, closing := q.pending, q.dones, q.closing
		q.pending, q.dones = nil, nil
		q.wmu.Unlock()
		if len(batch) > 0 {
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
		}
		if closing {
			q.wmu.Lock()
			rest := q.pending
			q.wmu.Unlock()
			if len(rest) == 0 {
				return
			}
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
	}
}

// close stops the writer once what waits is written.
func (q *Queue) close() {
	q.wmu.Lock()
	was := q.closing
	q.closing = true
	q.wmu.Unlock()
	if !was {
		select {
		case q.wake <- struct{}{}:
		default:
		}
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

// Delete implements queue.Queue. Like RabbitMQ, a stream ignores
// if-empty and reports no messages.
func (q *Queue) Delete(ifUnused, _ bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	switch {
	case q.deleted:
		q.mu.Unlock()
		return 0, nil, nil
	case ifUnused && len(q.consumers) > 0:
		q.mu.Unlock()
		return 0, nil, queue.ErrInUse
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

// Stats implements queue.Queue: Ready is the number of messages in the
// stream.
func (q *Queue) Stats() queue.Stats {
	first, end, _ := q.log.Bounds()
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{Ready: int(end - first), ReadyBytes: q.log.Bytes(), Unacked: q.unacked, Consumers: len(q.consumers)}
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
	p, err := amqp.DecodeProperties(e.Msg.Props)
	if err != nil {
		return e.Msg.Props
	}
	h := make(amqp.Table, len(p.Headers)+1)
	for k, v := range p.Headers {
		h[k] = v
	}
	h["x-stream-offset"] = int64(e.Seq)
	p.Headers = h
	b, err := p.Append(nil)
	if err != nil {
		return e.Msg.Props
	}
	return b
}
