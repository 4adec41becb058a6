package stream

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream/group"
)

// Queue is one stream: one partition (partition.go) or, declared with
// x-stream-partitions, several, each its own log, all written by the
// stream's writer (writer.go) with one group commit; the
// consumers' cursors over them; and its consumer groups (groups.go) with
// their committed offsets (offsets.go).
type Queue struct {
	typ   *Type
	decl  queue.Decl
	dir   string
	hooks queue.Hooks
	parts []*partition
	w     *writer // writes every partition (writer.go)
	// jnl: a partitioned stream's journal (journal.go), the writer's.
	jnl *journal
	// router picks a published message's partition; partitioned is set
	// when the stream was declared with x-stream-partitions, the only
	// case where the partition headers apply (a plain stream ignores
	// them, as RabbitMQ's does).
	router      group.Router
	partitioned bool
	rr          atomic.Uint64 // round robin of unkeyed messages
	offsets     *offsetStore
	// The dispatcher goroutine offers what the writer synced to the
	// consumers, so that the writer confirms and starts its next batch
	// without waiting for deliveries.
	dwake     chan struct{}
	dstop     chan struct{}
	dstopped  chan struct{}
	published atomic.Uint64
	offered   uint64     // published when the dispatcher's last pass began; under mu
	pass      *sync.Cond // on mu: a dispatcher pass ended

	// mu guards the consumers and groups. Reads for deliveries happen
	// under it, bounded by the consumers' credit; publishers never take
	// it. Lock order: offsets.mu, then mu, then a consumer's locks
	// (Deliver).
	mu         sync.Mutex
	consumers  []*consumer
	cursors    map[uint64]*cursor // group cursors by id, for settlements
	nextCursor uint64
	groups     map[string]*cgroup
	unacked    int
	deleted    bool
	stopped    bool
	stats      queue.MessageStats
	// Coalesced commits of the groups' offsets: dirty says some changed,
	// armed that a flush is scheduled, acks counts settlements since the
	// last one.
	dirty, armed bool
	acks         int
	flushTimer   *time.Timer
	deletedRecs  []offsetRec // groups deleted since the last commit
	// cancels are consumers the stream dropped (a rebalance with
	// x-stream-cancel-on-rebalance), told to the broker once mu is
	// released.
	cancels []queue.ConsumerRef
}

// consumer is one consumer: a cursor per partition it reads (a plain
// consumer: every partition, or the one x-stream-partition names; a group
// member: the partitions it owns).
type consumer struct {
	tag    string
	c      queue.Consumer
	curs   []*cursor
	next   int // the cursor to offer from first: partitions take turns
	filter *filter
	args   group.GroupArgs
	grp    *cgroup
	member group.Member
	// detached: cancelled by a rebalance (x-stream-cancel-on-rebalance),
	// still a member until expiry fires or the client consumes again.
	detached bool
	expiry   *time.Timer
}

// cursor reads one partition for one consumer: from the partition's
// tail cache while next is in it, else from the file (r, opened or moved
// to next when needed).
type cursor struct {
	id     uint64 // 0 for a plain consumer's; a group cursor's key in Queue.cursors
	p      *partition
	next   uint64       // the offset it reads next
	r      *Reader      // nil until it reads the file
	held   *queue.Entry // read, refused by the consumer, offered again first
	err    bool         // its reader hit damage; it gets nothing more
	closed bool
	gp     *groupPart // a group member's: the (group, partition) it serves
	gen    group.Generation
}

// newCursor starts a cursor of p at off; r, when set, is a reader already
// there.
func newCursor(p *partition, off uint64, r *Reader) *cursor {
	p.tail.attach()
	return &cursor{p: p, next: off, r: r}
}

// close releases the cursor's file and its hold on the tail cache.
func (c *cursor) close() {
	if c.closed {
		return
	}
	c.closed = true
	if c.r != nil {
		c.r.Close()
	}
	c.p.tail.detach()
}

// item is a record a cursor read.
type item struct {
	off       uint64
	msg       *queue.Message
	filter    string
	hasFilter bool
}

// read returns the record at the cursor and moves past it; ok is false
// when there is none yet.
func (c *cursor) read() (item, bool, error) {
	first, end, _ := c.p.log.Bounds()
	if c.next < first {
		c.next = first // retention dropped what it had not read
	}
	if c.next >= end {
		return item{}, false, nil
	}
	if e, hit := c.p.tail.get(c.next); hit {
		it := item{off: c.next, msg: e.msg, filter: e.filter, hasFilter: e.hasFilter}
		c.next++
		return it, true, nil
	}
	if c.r == nil || c.r.Offset() != c.next {
		if c.r != nil {
			c.r.Close()
		}
		r, err := c.p.log.ReaderAt(c.next)
		if err != nil {
			c.r = nil
			return item{}, false, err
		}
		c.r = r
	}
	rec, ok, err := c.r.Next()
	if err != nil || !ok {
		return item{}, false, err
	}
	e := entryOf(&rec)
	c.next = rec.Offset + 1
	return item{off: rec.Offset, msg: e.Msg, filter: rec.Filter, hasFilter: rec.HasFilter}, true, nil
}

// ref is what a delivery's Entry.Ref holds: the cursor id and the
// partition (group.MaxPartitions fits in 16 bits).
func (c *cursor) ref() uint64 { return c.id<<16 | uint64(c.p.n) }

func refPartition(ref uint64) int { return int(ref & 0xffff) }
func refCursor(ref uint64) uint64 { return ref >> 16 }

func (t *Type) open(d queue.Decl, s Settings, dir string, h queue.Hooks) (*Queue, error) {
	n, byKey, partitioned, err := parsePartitions(d.Args)
	if err != nil {
		return nil, err
	}
	q := &Queue{typ: t, decl: d, dir: dir, hooks: h, router: group.Router{Partitions: n, ByRoutingKey: byKey}, partitioned: partitioned,
		cursors: map[uint64]*cursor{}, groups: map[string]*cgroup{},
		dwake: make(chan struct{}, 1), dstop: make(chan struct{}), dstopped: make(chan struct{})}
	// A partitioned stream's journal first: where its logs are cut.
	cuts, seqs := make([]uint64, n), []uint64(nil)
	for i := range cuts {
		cuts[i] = noCut
	}
	if n > 1 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if cuts, seqs, err = journalCuts(dir, n); err != nil {
			return nil, err
		}
	}
	closeLogs := func() {
		for _, p := range q.parts {
			p.log.Close()
		}
	}
	for i := range n {
		p, err := openPartition(q, i, n, dir, s, cuts[i])
		if err != nil {
			closeLogs()
			return nil, err
		}
		q.parts = append(q.parts, p)
	}
	if n > 1 {
		logs := make([]*Log, n)
		for i, p := range q.parts {
			logs[i] = p.log
		}
		if q.jnl, err = replayJournal(dir, logs, seqs); err != nil {
			closeLogs()
			return nil, err
		}
	}
	q.w = newWriter(q, s)
	if q.offsets, err = openOffsets(dir); err != nil {
		closeLogs()
		if q.jnl != nil {
			q.jnl.f.Close() // its records are in the synced logs
		}
		return nil, err
	}
	q.loadGroups(q.offsets.loaded)
	q.pass = sync.NewCond(&q.mu)
	go q.dispatcher()
	q.w.start()
	return q, nil
}

// dispatcher offers the consumers what the writer synced, until the
// stream stops.
func (q *Queue) dispatcher() {
	defer close(q.dstopped)
	for {
		select {
		case <-q.dwake:
		case <-q.dstop:
			q.mu.Lock()
			q.offered = q.published.Load()
			q.pass.Broadcast()
			q.mu.Unlock()
			return
		}
		n := q.published.Load()
		q.mu.Lock()
		if !q.deleted {
			q.dispatch(nil)
		}
		q.offered = n
		q.pass.Broadcast()
		q.mu.Unlock()
	}
}

// Quiesce waits until the dispatcher offered the consumers every message
// synced before the call (tests: a confirm does not wait for deliveries).
func (q *Queue) Quiesce() {
	want := q.published.Load()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.offered < want {
		q.pass.Wait()
	}
}

// stopDispatcher ends the dispatcher, after the writer ended.
func (q *Queue) stopDispatcher() {
	close(q.dstop)
	<-q.dstopped
}

// Settings returns the stream's settings: its arguments and its policy's.
func (q *Queue) Settings() Settings { return q.w.currentSettings() }

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
	q.w.setSettings(s)
}

// Log returns partition 0's log, for tests and management.
func (q *Queue) Log() *Log { return q.parts[0].log }

// Partitions is the number of partitions.
func (q *Queue) Partitions() int { return len(q.parts) }

// Decl implements queue.Queue.
func (q *Queue) Decl() *queue.Decl { return &q.decl }

// Type implements queue.Queue.
func (q *Queue) Type() queue.Type { return q.typ }

// route picks m's partition; the headers h were read from it.
func (q *Queue) route(m *queue.Message, h *publishHeaders) (int, error) {
	if !q.partitioned {
		return 0, nil
	}
	if h.partition == nil && h.key == nil {
		if q.router.ByRoutingKey {
			return group.KeyPartition(m.RoutingKey, len(q.parts)), nil
		}
		return int((q.rr.Add(1) - 1) % uint64(len(q.parts))), nil
	}
	return q.router.RouteValues(h.partition, h.key, m.RoutingKey, nil)
}

// CheckPublish implements queue.PublishChecker: a message whose partition
// headers this stream cannot honour is refused before anything is
// delivered.
func (q *Queue) CheckPublish(m *queue.Message) error {
	if !q.partitioned {
		return nil
	}
	h := headersOf(m, true, nil)
	if h.partition == nil && h.key == nil {
		return nil
	}
	_, err := q.route(m, h)
	return err
}

// CheckPartitionHeaders is CheckPublish for a stream declared with args
// but not open here (its stand-in on another node of a cluster): the
// same 406 for a partition header the stream cannot honour, before the
// message is forwarded.
func CheckPartitionHeaders(args map[string]any, m *queue.Message) error {
	n, byKey, partitioned, err := parsePartitions(args)
	if err != nil || !partitioned {
		return nil
	}
	var read publishHeaders
	h := headersOf(m, false, &read)
	if h.partition == nil && h.key == nil {
		return nil
	}
	_, err = group.Router{Partitions: n, ByRoutingKey: byKey}.RouteValues(h.partition, h.key, m.RoutingKey, nil)
	return err
}

// written runs after the writer synced a batch of n records:
// the dispatcher offers them.
func (q *Queue) written(n int) {
	q.published.Add(uint64(n))
	select {
	case q.dwake <- struct{}{}:
	default:
	}
}

// released moves the cursors of partition n whose segment retention
// dropped to first. Only the writer calls it.
func (q *Queue) released(n int, first uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range q.consumers {
		for _, c := range k.curs {
			if c.p.n != n {
				continue
			}
			if c.r != nil {
				c.r.Release(first)
			}
			if c.held != nil && c.held.Seq < first {
				c.held = nil // read but not delivered: it is gone too
			}
		}
	}
}

// outcome is what one offer of a cursor did.
type outcome uint8

const (
	offered outcome = iota // a message went out (or was passed over)
	refused                // the consumer takes nothing now
	empty                  // the cursor has nothing to offer
)

// dispatch offers each consumer what its cursors have, until it refuses.
// q.mu is held.
func (q *Queue) dispatch(ctx any) {
	for _, k := range q.consumers {
		q.serve(k, ctx)
	}
}

// serve offers consumer k one message from each of its cursors in turn,
// so that the partitions it reads are interleaved fairly.
func (q *Queue) serve(k *consumer, ctx any) {
	n := len(k.curs)
	if n == 0 {
		return
	}
	i := k.next % n
	for idle := 0; idle < n; i = (i + 1) % n {
		switch q.offer(k, k.curs[i], ctx) {
		case refused:
			k.next = i
			return
		case empty:
			idle++
		default:
			idle = 0
		}
	}
	k.next = i
}

// offer offers k one message of cursor c: a group's redelivery first,
// then the next record after the cursor that k's filter passes.
func (q *Queue) offer(k *consumer, c *cursor, ctx any) outcome {
	if c.err {
		return empty
	}
	gp := c.gp
	if gp != nil {
		if !gp.deliverable(c) {
			return empty
		}
		if off, ok := gp.w.NextRedelivery(); ok {
			e, found, err := q.readAt(c.p, uint64(off))
			if err != nil || !found {
				// Dropped by retention (or unreadable): it counts as
				// processed.
				q.typ.logErr(err, "stream read failed; a redelivery is skipped")
				gp.w.Nack(c.gen, off, false)
				gp.changed()
				return offered
			}
			e.Redelivered, e.Ref = true, c.ref()
			switch k.c.Deliver(q, e, ctx) {
			case queue.Refused:
				gp.w.Nack(c.gen, off, true)
				return refused
			case queue.Pending:
				q.unacked++
				q.stats.Deliver++
				q.stats.Redeliver++
			}
			return offered
		}
	}
	if c.held == nil {
		for {
			it, ok, err := c.read()
			if err != nil {
				q.typ.logErr(err, "stream read failed; the consumer gets nothing more")
				c.err = true
				return empty
			}
			if !ok {
				return empty
			}
			if gp != nil && gp.skipped(int64(it.off)) || !k.filter.match(it.filter, it.hasFilter) {
				if gp != nil {
					gp.w.Pass(int64(it.off))
					gp.changed()
				}
				continue
			}
			c.held = &queue.Entry{Seq: it.off, Msg: it.msg, Ref: c.ref()}
			break
		}
	}
	switch k.c.Deliver(q, *c.held, ctx) {
	case queue.Refused:
		return refused
	case queue.Pending:
		q.unacked++
		q.stats.Deliver++
		if gp != nil {
			gp.w.Deliver(int64(c.held.Seq))
		}
	case queue.Settled:
		q.stats.DeliverNoAck++
	}
	c.held = nil
	return offered
}

// entryOf copies a record read from the log into a delivery's entry.
func entryOf(rec *Record) queue.Entry {
	buf := make([]byte, len(rec.Props)+len(rec.Body))
	copy(buf, rec.Props)
	copy(buf[len(rec.Props):], rec.Body)
	m := queue.NewStored(rec.Exchange, rec.RoutingKey, buf[:len(rec.Props):len(rec.Props)], buf[len(rec.Props):], 0)
	return queue.Entry{Seq: rec.Offset, Msg: m}
}

// readAt reads the record at off of partition p (a redelivery); found is
// false when retention dropped it.
func (q *Queue) readAt(p *partition, off uint64) (queue.Entry, bool, error) {
	first, end, _ := p.log.Bounds()
	if off < first || off >= end {
		return queue.Entry{}, false, nil
	}
	if e, hit := p.tail.get(off); hit {
		return queue.Entry{Seq: off, Msg: e.msg}, true, nil
	}
	r, err := p.log.ReaderAt(off)
	if err != nil {
		return queue.Entry{}, false, err
	}
	defer r.Close()
	rec, ok, err := r.Next()
	if err != nil || !ok || rec.Offset != off {
		return queue.Entry{}, false, err
	}
	return entryOf(&rec), true, nil
}

// AddConsumer implements queue.Queue: the consumer needs manual acks and
// a prefetch limit of its own. A plain consumer starts where
// x-stream-offset says in every partition it reads; a group member
// (x-stream-group, x-stream-automatic-offset-tracking) joins its group,
// which assigns it partitions.
func (q *Queue) AddConsumer(o queue.ConsumeOptions) error {
	if o.NoAck {
		return queue.ErrNoAckRefused
	}
	if o.Prefetch == 0 {
		return queue.ErrPrefetchRequired
	}
	now := q.typ.cfg.Now()
	spec, err := group.ParseOffset(o.Args[group.ArgOffset], now)
	if err != nil {
		return &queue.OffsetError{Value: o.Args[group.ArgOffset]}
	}
	ga, err := group.ParseGroupArgs(o.Args, o.Tag, now)
	if err != nil {
		return err
	}
	ga.Offset = spec
	f, err := parseFilter(o.Args)
	if err != nil {
		return err
	}
	only, err := q.consumerPartition(o.Args, spec, ga.Group != "")
	if err != nil {
		return err
	}
	k := &consumer{tag: o.Tag, c: o.Consumer, filter: f, args: ga}
	if ga.Group == "" {
		for _, p := range q.parts {
			if only >= 0 && p.n != only {
				continue
			}
			r, err := q.readerFor(p, spec)
			if err != nil {
				closeCursors(k.curs)
				return err
			}
			k.curs = append(k.curs, newCursor(p, r.Offset(), r))
		}
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		closeCursors(k.curs)
		return queue.ErrDeleted
	}
	q.consumers = append(q.consumers, k)
	var sync bool
	if ga.Group != "" {
		sync = q.join(k)
	}
	cancels := q.takeCancels()
	q.mu.Unlock()
	q.afterChange(sync, cancels)
	return nil
}

// consumerPartition reads a consumer's x-stream-partition argument: the
// one partition a plain consumer reads, -1 for all. A numeric offset on a
// partitioned stream needs it; a group member cannot have it (its group
// assigns its partitions).
func (q *Queue) consumerPartition(args map[string]any, spec group.OffsetSpec, member bool) (int, error) {
	v, ok := args[group.HeaderPartition]
	if !ok {
		if spec.Kind == group.OffsetAbsolute && len(q.parts) > 1 && !member {
			return -1, &queue.ArgError{Arg: group.ArgOffset, Reason: "a numeric offset on a partitioned stream needs " + group.HeaderPartition}
		}
		return -1, nil
	}
	if member {
		return -1, &queue.ArgError{Arg: group.HeaderPartition, Reason: "cannot be combined with " + group.ArgGroup + ": the group assigns partitions"}
	}
	n, isInt := queue.IntValue(v)
	if !isInt || n < 0 || n >= int64(len(q.parts)) {
		return -1, &queue.ArgError{Arg: group.HeaderPartition, Reason: "expected a partition number from 0 to " + strconv.Itoa(len(q.parts)-1)}
	}
	return int(n), nil
}

func closeCursors(cs []*cursor) {
	for _, c := range cs {
		c.close()
	}
}

// readerFor places a cursor in partition p by an x-stream-offset.
func (q *Queue) readerFor(p *partition, o group.OffsetSpec) (*Reader, error) {
	first, end, last := p.log.Bounds()
	switch o.Kind {
	case group.OffsetFirst:
		return p.log.ReaderAt(first)
	case group.OffsetLast:
		return p.log.ReaderAt(last)
	case group.OffsetTimestamp:
		return p.log.ReaderAtTime(o.Time.UnixMilli())
	case group.OffsetAbsolute:
		return p.log.ReaderAt(min(uint64(max(o.Offset, 0)), end))
	}
	return p.log.ReaderAt(end)
}

// RemoveConsumer implements queue.Queue. A stream is never auto-deleted.
// A group member leaves its group (group.Rebalancer.Retire: a partition
// it has deliveries of in flight moves once its channel settles them, or
// after its rebalance timeout; the others move now), whose offsets are
// committed at once.
func (q *Queue) RemoveConsumer(tag string, c queue.Consumer) bool {
	q.mu.Lock()
	var sync bool
	q.consumers = slices.DeleteFunc(q.consumers, func(k *consumer) bool {
		if k.tag != tag || k.c != c {
			return false
		}
		if k.grp != nil {
			sync = q.retire(k) || sync
		}
		closeCursors(k.curs)
		k.curs = nil
		return true
	})
	if sync && !q.deleted {
		q.dispatch(nil) // the partitions' new owners
	}
	cancels := q.takeCancels()
	q.mu.Unlock()
	q.afterChange(sync, cancels)
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

// Settle implements queue.Queue. The log does not change. A plain
// consumer's settlement only returns credit (RabbitMQ refuses nack and
// reject on streams; a closed channel's deliveries end here). A group
// member's moves its group's committed offset: an ack or a reject
// without requeue marks the offset processed, a requeue redelivers it to
// the partition's owner; a former owner's (fenced) changes nothing.
func (q *Queue) Settle(entries []queue.Entry, op queue.SettleOp) {
	op = op.Requeued()
	q.mu.Lock()
	q.unacked = max(q.unacked-len(entries), 0)
	if op == queue.Ack {
		q.stats.Ack += uint64(len(entries))
	}
	grouped := false
	for i := range entries {
		if refCursor(entries[i].Ref) != 0 {
			grouped = true
			break
		}
	}
	if !grouped {
		q.mu.Unlock()
		return
	}
	moved := q.settleGroup(entries, op)
	if (moved || op == queue.Requeue) && !q.deleted {
		q.dispatch(nil)
	}
	flushNow := q.acks >= commitAfterAcks
	cancels := q.takeCancels()
	q.mu.Unlock()
	q.afterChange(flushNow, cancels)
}

// RefusesNack implements queue.NackRefuser: a plain consumer's deliveries
// cannot be nacked or rejected (RabbitMQ answers 540); a group member's
// can.
func (q *Queue) RefusesNack(e queue.Entry) bool { return refCursor(e.Ref) == 0 }

// takeCancels takes the consumers to tell the broker about. q.mu is held.
func (q *Queue) takeCancels() []queue.ConsumerRef {
	c := q.cancels
	q.cancels = nil
	return c
}

// afterChange runs after q.mu is released: the consumers the stream
// dropped are told to the broker, and, when sync, the groups' offsets are
// committed now.
func (q *Queue) afterChange(sync bool, cancels []queue.ConsumerRef) {
	for _, c := range cancels {
		if q.hooks.Cancel != nil {
			q.hooks.Cancel(q, c)
		}
	}
	if sync {
		q.typ.logErr(q.commitOffsets(), "cannot store a consumer group's offsets")
	}
}

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
		closeCursors(k.curs)
	}
	q.consumers = nil
	q.stopGroupsLocked()
	q.mu.Unlock()
	q.w.close()
	q.stopDispatcher()
	q.offsets.close()
	if st := q.typ.cfg.Store; st != nil && q.decl.ID != 0 {
		q.typ.logErr(st.DeleteQueue(q.decl.VHost, q.decl.Name, q.decl.ID), "durable store write failed")
	}
	for _, p := range q.parts[1:] {
		p.log.Close()
	}
	q.typ.logErr(q.parts[0].log.Remove(), "cannot remove a deleted stream's files")
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

// Stop implements queue.Stopper: the groups' offsets are committed, the
// writer ends once what waits is synced, and the logs close. The stream
// keeps its messages.
func (q *Queue) Stop() {
	q.mu.Lock()
	if q.stopped || q.deleted {
		q.mu.Unlock()
		return
	}
	q.stopped = true
	q.stopGroupsLocked()
	q.mu.Unlock()
	q.typ.logErr(q.commitOffsets(), "cannot store a consumer group's offsets")
	q.offsets.close()
	q.w.close()
	for _, p := range q.parts {
		p.log.Close()
	}
	q.stopDispatcher()
}

// Stats implements queue.Queue: Ready is the number of messages the
// stream retains, ReadyBytes the size of its segments.
func (q *Queue) Stats() queue.Stats {
	ready, bytes := q.retained()
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{Ready: ready, ReadyBytes: bytes, Unacked: q.unacked, Consumers: len(q.consumers)}
}

func (q *Queue) retained() (int, int64) {
	var n int
	var b int64
	for _, p := range q.parts {
		first, end, _ := p.log.Bounds()
		n += int(end - first)
		b += p.log.Bytes()
	}
	return n, b
}

// DeclareCounts implements queue.DeclareCounter: declare-ok reports the
// retained messages and, as RabbitMQ 3.10's streams do, no consumers.
func (q *Queue) DeclareCounts() (messages, consumers int) {
	n, _ := q.retained()
	return n, 0
}

// MessageStats implements queue.Queue.
func (q *Queue) MessageStats() queue.MessageStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.stats
	st.Publish = q.published.Load()
	return st
}

// DeliveryProps implements queue.Queue: a delivery carries its offset in
// the x-stream-offset header and, from a partitioned stream, its
// partition in x-stream-partition.
func (q *Queue) DeliveryProps(e queue.Entry) []byte {
	if !q.partitioned {
		return queue.WithHeader(e.Msg.Props, group.ArgOffset, int64(e.Seq))
	}
	return queue.WithHeaders(e.Msg.Props, group.ArgOffset, int64(e.Seq), group.HeaderPartition, int64(refPartition(e.Ref)))
}
