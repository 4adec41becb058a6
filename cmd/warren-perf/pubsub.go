package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// produce publishes until pubCtx ends or --count is reached, then waits
// (bounded by --drain-timeout) for outstanding confirms.
func (r *runner) produce(ctx, pubCtx context.Context, ps *producerState, end *time.Time) {
	cfg := r.cfg
	conn, nc, err := dialNet(cfg.URL)
	if err != nil {
		r.fail("producer %d: dial: %v", ps.id, err)
		*end = time.Now()
		return
	}
	defer closeWithin(conn, nc, 2*time.Second)
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		r.fail("producer %d: channel: %v", ps.id, err)
		*end = time.Now()
		return
	}
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	var sem chan struct{}
	listenerDone := make(chan struct{})
	if cfg.Confirm > 0 {
		if err := ch.Confirm(false); err != nil {
			r.fail("producer %d: confirm.select: %v", ps.id, err)
			*end = time.Now()
			return
		}
		sem = make(chan struct{}, cfg.Confirm)
		ps.sentAt = make([]atomic.Int64, 2*cfg.Confirm+16)
		confs := ch.NotifyPublish(make(chan amqp.Confirmation, cfg.Confirm+16))
		go func() {
			defer close(listenerDone)
			for c := range confs {
				if c.DeliveryTag == 0 {
					continue
				}
				if at := ps.sentAt[(c.DeliveryTag-1)%uint64(len(ps.sentAt))].Load(); at > 0 {
					ps.confirmedAt(at, time.Now().UnixNano(), r.cfg.ConfirmTrace != "")
				}
				if c.Ack {
					ps.confirmed.set(uint32(c.DeliveryTag - 1))
					r.confirmed.Add(1)
					r.lastConfirm.Store(time.Now().UnixNano())
				} else {
					r.nacked.Add(1)
				}
				select {
				case <-sem:
				default:
				}
			}
		}()
	} else {
		close(listenerDone)
	}
	mode := amqp.Transient
	if cfg.Persistent {
		mode = amqp.Persistent
	}
	body, interval := r.publishBody(), r.publishInterval()
	start := time.Now()
	done := pubCtx.Done()
	keys := r.keyHeaders(ps)
	var seq int64
publish:
	for ; cfg.Count == 0 || seq < cfg.Count; seq++ {
		select {
		case <-done:
			break publish
		default:
		}
		if !pace(start, seq, interval, done) || !r.holdInflight(done, nil) {
			break publish
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-done:
				break publish
			case e := <-closed:
				r.fail("producer %d: connection closed: %v", ps.id, e)
				break publish
			}
		}
		rt := ps.routes[seq%int64(len(ps.routes))]
		headers := rt.headers
		if keys != nil {
			headers = keys[seq%int64(len(keys))]
		}
		now := time.Now().UnixNano()
		encodeBody(body, now, ps.id, uint32(seq))
		if ps.sentAt != nil {
			ps.sentAt[seq%int64(len(ps.sentAt))].Store(now)
		}
		err := ch.Publish(cfg.Exchange, rt.key, false, false, amqp.Publishing{
			Headers:      headers,
			DeliveryMode: mode,
			Body:         body,
		})
		if err != nil {
			r.fail("producer %d: publish: %v", ps.id, err)
			break
		}
		ps.sent.Add(1)
		r.sent.Add(1)
	}
	*end = time.Now()
	if sem != nil {
		drainConfirms(r, ctx, ps, sem, chClosed, func(e *amqp.Error) error {
			if e == nil {
				return nil
			}
			return fmt.Errorf("channel closed: %v", e)
		})
	}
	closeWithin(conn, nc, 5*time.Second)
	<-listenerDone
}

// publishBody is a producer's body buffer: --size bytes, filled past
// the header encodeBody writes.
func (r *runner) publishBody() []byte {
	body := make([]byte, r.cfg.Size)
	for i := minBodySize; i < len(body); i++ {
		body[i] = byte('a' + i%26)
	}
	return body
}

// publishInterval is the time between a producer's publishes under
// --rate (0: none).
func (r *runner) publishInterval() time.Duration {
	if r.cfg.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / r.cfg.Rate)
}

// pace waits until publish seq is due at interval after start (0: at
// once); false when done closes first.
func pace(start time.Time, seq int64, interval time.Duration, done <-chan struct{}) bool {
	if interval <= 0 {
		return true
	}
	d := time.Until(start.Add(time.Duration(seq) * interval))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// holdInflight waits while --max-inflight messages are published but not
// received; flush (when set) first writes out what a producer buffers.
// False when done closes first or flush fails.
func (r *runner) holdInflight(done <-chan struct{}, flush func() error) bool {
	if r.cfg.MaxInflight <= 0 || r.cfg.Consumers <= 0 {
		return true
	}
	for r.sent.Load()-r.received.Load()/r.fanout > r.cfg.MaxInflight {
		if flush != nil && flush() != nil {
			return false
		}
		select {
		case <-done:
			return false
		case <-time.After(100 * time.Microsecond):
		}
	}
	return true
}

// drainConfirms waits, at most --drain-timeout, for a producer's
// outstanding confirms (its window sem empties); a value on closed ends
// the wait, failing the run when ended says it is an error.
func drainConfirms[E any](r *runner, ctx context.Context, ps *producerState, sem chan struct{}, closed <-chan E, ended func(E) error) {
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	for len(sem) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case e := <-closed:
			if err := ended(e); err != nil {
				r.fail("producer %d: %v", ps.id, err)
			}
			deadline = time.Now()
		case <-time.After(2 * time.Millisecond):
		}
	}
	if n := len(sem); n > 0 {
		r.fail("producer %d: %d confirms outstanding after drain timeout", ps.id, n)
	}
}

type delivery struct {
	d amqp.Delivery
	q int
}

// consume subscribes to queues qs on one channel and records what arrives
// until stop is closed.
func (r *runner) consume(cs *consumerState, id int, qs []int, ready chan<- struct{}, stop <-chan struct{}) {
	cfg := r.cfg
	u := cfg.URL
	if cfg.ConsumerURL != "" {
		u = cfg.ConsumerURL
	}
	conn, nc, err := dialNet(u)
	if err != nil {
		r.fail("consumer %d: dial: %v", id, err)
		ready <- struct{}{}
		return
	}
	defer closeWithin(conn, nc, 2*time.Second)
	ch, err := conn.Channel()
	if err != nil {
		r.fail("consumer %d: channel: %v", id, err)
		ready <- struct{}{}
		return
	}
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	cancels := ch.NotifyCancel(make(chan string, len(qs)+1))
	if !cfg.AutoAck && cfg.Prefetch > 0 {
		if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
			r.fail("consumer %d: qos: %v", id, err)
			ready <- struct{}{}
			return
		}
	}
	var single <-chan amqp.Delivery
	merged := make(chan delivery, 256)
	var fwd sync.WaitGroup
	for i, q := range qs {
		msgs, err := ch.Consume(r.queues[q], fmt.Sprintf("warren-perf-%d-%d", id, i), cfg.AutoAck, false, false, false, r.consumeArgs(id))
		if err != nil {
			r.fail("consumer %d: consume %s: %v", id, r.queues[q], err)
			ready <- struct{}{}
			return
		}
		if len(qs) == 1 {
			single = msgs
			break
		}
		fwd.Add(1)
		go func() {
			defer fwd.Done()
			for d := range msgs {
				merged <- delivery{d, q}
			}
		}()
	}
	ready <- struct{}{}

	stream := cfg.QueueType == "stream"
	rec := r.newReceiver(cs, id, func(tag uint64, multiple bool) error { return ch.Ack(tag, multiple) })
	handle := func(d amqp.Delivery, q int) {
		m := received{tag: d.DeliveryTag, body: d.Body, q: q}
		if stream {
			m.offset, m.hasOffset = d.Headers["x-stream-offset"].(int64)
			m.partition, m.hasPartition = intHeader(d.Headers["x-stream-partition"])
		}
		rec.handle(&m)
	}
	for {
		select {
		case d, ok := <-single:
			if !ok {
				single = nil
				continue
			}
			handle(d, qs[0])
		case m := <-merged:
			handle(m.d, m.q)
		case tag := <-cancels:
			r.cancelled.Add(1)
			r.fail("consumer %d: cancelled by broker (%s)", id, tag)
		case e := <-chClosed:
			if e != nil {
				r.fail("consumer %d: channel closed: %v", id, e)
			}
			chClosed = nil
			select {
			case <-stop:
			case <-time.After(r.cfg.DrainTimeout + 30*time.Second):
			}
			return
		case <-stop:
			rec.finalAck()
			// A graceful close waits for the broker to flush what it has in
			// flight first; cut the connection if that takes long.
			closeWithin(conn, nc, 2*time.Second)
			go func() { // let forwarders exit
				for range merged {
				}
			}()
			fwd.Wait()
			close(merged)
			return
		}
	}
}

// received is one delivery as a consumer hands it to its receiver: the
// body (valid only during handle), the queue it came from and the stream
// headers.
type received struct {
	tag          uint64
	body         []byte
	q            int
	offset       int64 // x-stream-offset, when hasOffset
	hasOffset    bool
	partition    int64 // x-stream-partition, when hasPartition
	hasPartition bool
}

// receiver records one consumer's deliveries and acks them (every
// --multi-ack-every with multiple=true). Only the consumer's goroutine
// uses it.
type receiver struct {
	r                 *runner
	cs                *consumerState
	id                int
	ack               func(tag uint64, multiple bool) error
	stream            bool
	pending           int
	maxAcked, highest uint64
}

func (r *runner) newReceiver(cs *consumerState, id int, ack func(tag uint64, multiple bool) error) *receiver {
	return &receiver{r: r, cs: cs, id: id, ack: ack, stream: r.cfg.QueueType == "stream"}
}

func (rc *receiver) handle(m *received) {
	r, cs, cfg := rc.r, rc.cs, &rc.r.cfg
	now := time.Now().UnixNano()
	sentNs, p, seq, err := decodeBody(m.body)
	if err != nil {
		cs.bad++
	} else {
		lat := now - sentNs
		cs.mu.Lock()
		cs.interval.record(lat)
		cs.total.record(lat)
		cs.mu.Unlock()
		k := trackKey(p, r.trackQueue(rc.id, m.q))
		t := cs.trackers[k]
		if t == nil {
			t = &seqTracker{}
			cs.trackers[k] = t
		}
		t.add(seq)
	}
	if rc.stream {
		cs.checkOffset(m, cfg.Partitions > 1)
	}
	if r.received.Add(1) == 1 {
		r.firstRecv.Store(now)
	} else {
		r.firstRecv.CompareAndSwap(0, now)
	}
	r.lastRecv.Store(now)
	if cfg.AutoAck {
		return
	}
	if cfg.MultiAckEvery <= 1 {
		if err := rc.ack(m.tag, false); err != nil {
			r.fail("consumer %d: ack: %v", rc.id, err)
		}
		return
	}
	rc.highest = max(rc.highest, m.tag)
	rc.pending++
	if rc.pending >= cfg.MultiAckEvery && rc.highest > rc.maxAcked {
		if err := rc.ack(rc.highest, true); err != nil {
			r.fail("consumer %d: ack: %v", rc.id, err)
		}
		rc.maxAcked = rc.highest
		rc.pending = 0
	}
}

// finalAck acks what is delivered and not yet acked.
func (rc *receiver) finalAck() {
	if !rc.r.cfg.AutoAck && rc.highest > rc.maxAcked {
		if err := rc.ack(rc.highest, true); err != nil {
			rc.r.fail("consumer %d: final ack: %v", rc.id, err)
		}
		rc.maxAcked = rc.highest
	}
}

// checkOffset checks a stream delivery's x-stream-offset header: present,
// and above the previous one from the same queue and partition (the
// x-stream-partition header, which a partitioned stream must send).
func (cs *consumerState) checkOffset(m *received, partitioned bool) {
	if !m.hasOffset {
		cs.offsetMissing++
		return
	}
	part := 0
	if partitioned {
		if !m.hasPartition {
			cs.partitionMissing++
			return
		}
		part = int(m.partition)
	}
	if cs.lastOffset == nil {
		cs.lastOffset = map[[2]int]int64{}
	}
	k := [2]int{m.q, part}
	if last, seen := cs.lastOffset[k]; seen && m.offset <= last {
		cs.offsetRegressed++
		return
	}
	cs.lastOffset[k] = m.offset
}

// intHeader reads an integer header of any width.
func intHeader(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}
