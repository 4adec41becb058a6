package classic

import (
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// Options configure a new queue.
type Options struct {
	Backlog Backlog // default: in memory
	Limits  queue.Limits
	Hooks   queue.Hooks
	// Store is where the queue's stored entries are settled; nil for a
	// queue that stores nothing.
	Store persist.Store
	// Type is what Queue.Type returns (default: a type of its own, with
	// no store).
	Type *Type
	// Now is the clock (default time.Now); tests replace it.
	Now queue.Clock
}

type consumerSlot struct {
	tag  string
	c    queue.Consumer
	prio int
}

// Queue is one classic queue. Its methods are safe for concurrent use; a
// single mutex guards the backlog and the consumer list. Lock order: a
// queue's lock may be taken before a channel's lock (Deliver), never after
// it; the store's locks are leaves.
type Queue struct {
	decl   queue.Decl
	typ    *Type
	store  persist.Store // nil: nothing stored
	limits queue.Limits
	hooks  queue.Hooks
	now    queue.Clock
	// countDeliveries: a quorum queue, whose deliveries carry
	// x-delivery-count. Set at creation, never changed.
	countDeliveries bool

	mu          sync.Mutex
	dctx        any // the ctx of the call holding mu, for Deliver
	backlog     Backlog
	consumers   []consumerSlot
	next        int // round-robin position in consumers
	exclusive   bool
	hadConsumer bool
	seq         uint64
	unacked     int
	deleted     bool
	marked      bool          // a recovery mark is in the store (type.go)
	stopped     bool          // Stop was called: no timer runs or is armed again
	dead        []queue.Dead  // dead letters waiting to be reported after unlock
	removed     []queue.Entry // removed entries waiting to be reported after unlock
	ttlTimer    *time.Timer
	ttlAt       int64 // when ttlTimer fires, unix nanos; 0 = not armed
	expTimer    *time.Timer
	lastUsed    time.Time
	ctr         counters // message_stats (stats.go)
}

// New returns an empty queue.
func New(d queue.Decl, o Options) *Queue {
	if o.Limits == (queue.Limits{}) {
		o.Limits = queue.Limits{MaxLength: -1, MaxLengthBytes: -1}
	}
	if o.Backlog == nil {
		if o.Limits.MaxPriority > 0 {
			o.Backlog = NewPriorityBacklog(o.Limits.MaxPriority)
		} else {
			o.Backlog = NewMemBacklog()
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Type == nil {
		o.Type = &Type{info: classicInfo}
	}
	q := &Queue{decl: d, typ: o.Type, store: o.Store, limits: o.Limits, hooks: o.Hooks, now: o.Now, backlog: o.Backlog}
	if d.ID == 0 {
		q.store = nil
	}
	q.countDeliveries = d.Args["x-queue-type"] == "quorum"
	q.lastUsed = q.now()
	if q.limits.Expires > 0 {
		q.expTimer = time.AfterFunc(q.limits.Expires, q.expireCheck)
	}
	return q
}

// Decl implements queue.Queue.
func (q *Queue) Decl() *queue.Decl { return &q.decl }

// Type implements queue.Queue.
func (q *Queue) Type() queue.Type { return q.typ }

// DeliveryProps implements queue.Queue: the message's own properties, plus
// the x-delivery-count header (how often it came back unsettled) for a
// queue declared as a quorum queue, as RabbitMQ's quorum queues add it.
func (q *Queue) DeliveryProps(e queue.Entry) []byte {
	if !q.countDeliveries {
		return e.Msg.Props
	}
	return queue.WithHeader(e.Msg.Props, "x-delivery-count", int64(e.Returns))
}

// Limits returns the queue's limits.
func (q *Queue) Limits() queue.Limits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limits
}

// SetLimits replaces the queue's limits (a policy changed). Length limits
// apply at once; a new x-expires restarts the countdown; entries already
// queued keep the expiry they were given.
func (q *Queue) SetLimits(l queue.Limits) {
	q.mu.Lock()
	if q.deleted || q.stopped {
		q.mu.Unlock()
		return
	}
	q.limits = l
	if l.Overflow == queue.DropHead {
		for q.over() {
			e, ok := q.backlog.Pop()
			if !ok {
				break
			}
			q.drop(e, queue.MaxLen)
		}
	}
	switch {
	case l.Expires > 0 && q.expTimer == nil:
		q.expTimer = time.AfterFunc(l.Expires, q.expireCheck)
	case l.Expires > 0:
		q.expTimer.Reset(l.Expires)
	case q.expTimer != nil:
		q.expTimer.Stop()
	}
	q.unlockReport()
}

// EnqueueResult says what became of an enqueued message.
type EnqueueResult uint8

// Results of Enqueue.
const (
	Enqueued EnqueueResult = iota
	// Dropped: the queue is full with overflow reject-publish(-dlx); the
	// publisher is nacked under confirms.
	Dropped
	// Gone: the queue was deleted.
	Gone
)

// Enqueue appends m and offers it to the consumers, for a message that is
// not stored.
func (q *Queue) Enqueue(m *queue.Message) EnqueueResult {
	return q.EnqueueFor(m, 0, nil)
}

// ReserveSeq takes the next sequence number, for a message that must be
// written to the durable store under it before EnqueueFor makes it visible.
func (q *Queue) ReserveSeq() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	return q.seq
}

// EnqueueFor appends m under a sequence number from ReserveSeq (0: take
// the next one), on behalf of ctx, which the Deliver calls it makes are
// given. A message whose reserved place was overtaken by a later one takes
// its place by Seq among the messages not yet delivered.
func (q *Queue) EnqueueFor(m *queue.Message, seq uint64, ctx any) EnqueueResult {
	q.mu.Lock()
	q.dctx = ctx
	r := q.enqueueLocked(m, seq)
	q.dctx = nil
	q.unlockReport()
	return r
}

func (q *Queue) enqueueLocked(m *queue.Message, seq uint64) EnqueueResult {
	if q.deleted {
		return Gone
	}
	if m.Lost() {
		// The store failed it before it got here (its publisher is
		// nacked); Withdraw found nothing to take back.
		return Enqueued
	}
	now := q.now()
	q.dropExpired(now)
	if q.limits.Overflow != queue.DropHead && q.full(m.Size()) {
		if q.limits.Overflow == queue.RejectPublishDLX {
			q.deadLetter(m, queue.MaxLen)
		}
		return Dropped
	}
	q.ctr.publish.Add(1)
	if seq == 0 {
		q.seq++
		seq = q.seq
	}
	e := queue.Entry{Seq: seq, Msg: m, Expires: q.expiry(m, now)}
	if q.backlog.Len() == 0 && q.offer(e) {
		return Enqueued
	}
	q.backlog.Push(e)
	q.dropOver()
	q.armTTL()
	return Enqueued
}

// dropOver drops head messages while the backlog is past a length limit,
// with overflow drop-head. q.mu must be held.
func (q *Queue) dropOver() {
	if q.limits.Overflow != queue.DropHead {
		return
	}
	for q.over() {
		old, _ := q.backlog.Pop()
		q.drop(old, queue.MaxLen)
	}
}

// SetSeq makes the next sequence number follow seq, for a queue whose
// recovered entries stay in the store.
func (q *Queue) SetSeq(seq uint64) {
	q.mu.Lock()
	q.seq = max(q.seq, seq)
	q.mu.Unlock()
}

// Recovered drops what expired while the broker was down and arms the
// expiry timer for the rest, after start-up recovery.
func (q *Queue) Recovered() {
	q.mu.Lock()
	q.dropExpired(q.now())
	q.armTTL()
	q.unlockReport()
}

// ExpiryFor is when m would expire if enqueued now (Unix ns; 0: never),
// for the durable store to keep with the entry.
func (q *Queue) ExpiryFor(m *queue.Message) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.expiry(m, q.now())
}

// setRecoveryMark records that the queue has a recovery mark in the
// store (type.go), which its deletion removes.
func (q *Queue) setRecoveryMark(mark uint64) {
	q.mu.Lock()
	q.marked = mark > 0
	q.mu.Unlock()
}

// Restore appends a recovered entry (ascending Seq) at start-up. An entry
// recovered with an expiry keeps it.
func (q *Queue) Restore(e queue.Entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.Expires == 0 {
		e.Expires = q.expiry(e.Msg, q.now())
	}
	q.backlog.Push(e)
	q.seq = max(q.seq, e.Seq)
	q.armTTL()
}

// drop removes e from the queue for reason r: it is dead-lettered when the
// queue has a dead-letter exchange, and settled in the store. q.mu must be
// held.
func (q *Queue) drop(e queue.Entry, r queue.Reason) {
	q.deadLetter(e.Msg, r)
	if q.store != nil && e.Msg.StoreID != 0 {
		q.removed = append(q.removed, e)
	}
}

// full reports whether one more message of size bytes would pass a limit.
func (q *Queue) full(size int64) bool {
	l := q.limits
	return (l.MaxLength >= 0 && int64(q.backlog.Len()) >= l.MaxLength) ||
		(l.MaxLengthBytes >= 0 && q.backlog.Bytes()+size > l.MaxLengthBytes)
}

// over reports whether the backlog is past a limit.
func (q *Queue) over() bool {
	l := q.limits
	return (l.MaxLength >= 0 && int64(q.backlog.Len()) > l.MaxLength) ||
		(l.MaxLengthBytes >= 0 && q.backlog.Bytes() > l.MaxLengthBytes)
}

// expiry is when a message enqueued now expires: the earlier of the queue's
// x-message-ttl and the message's own expiration; 0 for never.
func (q *Queue) expiry(m *queue.Message, now time.Time) int64 {
	ttl, has := q.limits.MessageTTL, q.limits.HasMessageTTL
	if m.HasTTL && (!has || m.TTL < ttl) {
		ttl, has = m.TTL, true
	}
	if !has {
		return 0
	}
	return now.Add(ttl).UnixNano()
}

// dropExpired dead-letters expired entries at the head, as RabbitMQ
// expires messages only once they reach the head. q.mu must be held.
func (q *Queue) dropExpired(now time.Time) {
	n := now.UnixNano()
	for {
		e, ok := q.backlog.Peek()
		if ok && e.Msg.Lost() {
			q.backlog.Pop()
			continue
		}
		if !ok || e.Expires == 0 || e.Expires > n {
			return
		}
		q.backlog.Pop()
		q.drop(e, queue.Expired)
	}
}

// armTTL makes sure a timer fires when the head entry expires, so expiry
// happens without consumers. q.mu must be held.
func (q *Queue) armTTL() {
	e, ok := q.backlog.Peek()
	if !ok || e.Expires == 0 || q.deleted || q.stopped {
		return
	}
	if q.ttlAt != 0 && q.ttlAt <= e.Expires {
		return
	}
	d := time.Duration(e.Expires - q.now().UnixNano())
	if q.ttlTimer == nil {
		q.ttlTimer = time.AfterFunc(d, q.ttlTick)
	} else {
		q.ttlTimer.Reset(d)
	}
	q.ttlAt = e.Expires
}

func (q *Queue) ttlTick() {
	q.mu.Lock()
	q.ttlAt = 0
	if !q.deleted && !q.stopped {
		q.serveHead()
	}
	q.unlockReport()
}

// deadLetter records m for the DeadLetter hook if the queue has a
// dead-letter exchange; otherwise the message is simply dropped.
// q.mu must be held.
func (q *Queue) deadLetter(m *queue.Message, r queue.Reason) {
	if l := &q.limits; l.HasDLX && q.hooks.DeadLetter != nil {
		q.dead = append(q.dead, queue.Dead{Msg: m, Reason: r, Exchange: l.DeadLetterExchange,
			RoutingKey: l.DeadLetterRoutingKey, HasRoutingKey: l.HasDLRK})
	}
}

// unlockReport releases q.mu and then reports what was collected under
// it.
func (q *Queue) unlockReport() {
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
}

func (q *Queue) takeDead() ([]queue.Dead, []queue.Entry) {
	d, r := q.dead, q.removed
	q.dead, q.removed = nil, nil
	return d, r
}

// report settles removed entries in the store and passes dead letters to
// the hook; the lock must not be held.
func (q *Queue) report(dead []queue.Dead, removed []queue.Entry) {
	if len(removed) > 0 {
		q.settleStored(removed)
	}
	if len(dead) > 0 {
		q.hooks.DeadLetter(q, dead)
	}
}

// offer tries the consumers in priority order, round-robin among equal
// priorities starting after the last one served; a lower priority gets a
// message only when every higher one refused it. With single active
// consumer only the first consumer is tried. q.mu must be held.
func (q *Queue) offer(e queue.Entry) bool {
	n := len(q.consumers)
	if q.limits.SingleActive {
		n = min(n, 1)
	}
	for a := 0; a < n; {
		b := a + 1
		for b < n && q.consumers[b].prio == q.consumers[a].prio {
			b++
		}
		size := b - a
		start := q.next - a
		if start < 0 || start >= size {
			start = 0
		}
		for i := 0; i < size; i++ {
			k := a + (start+i)%size
			switch q.consumers[k].c.Deliver(q, e, q.dctx) {
			case queue.Pending:
				q.unacked++
				q.ctr.delivered(true, e.Redelivered)
				q.markDelivered(e)
			case queue.Settled:
				q.ctr.delivered(false, e.Redelivered)
				q.settleOne(e)
			default:
				continue
			}
			q.next = k + 1
			return true
		}
		a = b
	}
	return false
}

// serveHead drops what expired at the head, hands ready entries to the
// consumers and arms the expiry timer for the new head. q.mu must be held.
func (q *Queue) serveHead() {
	q.dropExpired(q.now())
	q.dispatch()
	q.armTTL()
}

// dispatch hands ready entries to consumers until either runs out.
// q.mu must be held.
func (q *Queue) dispatch() {
	if len(q.consumers) == 0 {
		return
	}
	now := q.now().UnixNano()
	for {
		e, ok := q.backlog.Peek()
		if !ok {
			return
		}
		if e.Expires != 0 && e.Expires <= now {
			q.backlog.Pop()
			q.drop(e, queue.Expired)
			continue
		}
		if e.Msg.Lost() {
			q.backlog.Pop()
			continue
		}
		if !q.offer(e) {
			return
		}
		q.backlog.Pop()
	}
}

// Kick implements queue.Queue.
func (q *Queue) Kick(ctx any) {
	q.mu.Lock()
	q.dctx = ctx
	q.dispatch()
	q.dctx = nil
	q.unlockReport()
}

// Withdraw takes back a message the store failed to write (m is marked
// lost): its entry at seq leaves the backlog, so that it is neither
// delivered nor counted. One that was delivered already stays with its
// consumer.
func (q *Queue) Withdraw(m *queue.Message, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.backlog.Remove(queue.Entry{Seq: seq, Msg: m})
}

// Get implements queue.Getter: it takes the first ready entry for
// basic.get and returns it with the number of messages left ready.
func (q *Queue) Get(noAck bool) (queue.Entry, int, bool) {
	q.mu.Lock()
	q.lastUsed = q.now()
	q.dropExpired(q.lastUsed)
	e, ok := q.backlog.Pop()
	if ok {
		if noAck {
			q.settleOne(e)
		} else {
			q.unacked++
			q.markDelivered(e)
		}
		// An expired message that is now the head is not counted.
		q.dropExpired(q.lastUsed)
	}
	n := q.backlog.Len()
	q.unlockReport()
	q.ctr.got(ok, noAck, e.Redelivered)
	return e, n, ok
}

// Settle implements queue.Queue: acknowledged and rejected entries leave
// the store (written behind, durable with the next group commit).
func (q *Queue) Settle(entries []queue.Entry, op queue.SettleOp) {
	op = op.Requeued()
	if op != queue.Requeue {
		q.settleStored(entries)
	}
	q.settle(entries, op)
}

// settle applies a settlement in memory; the store's part is the caller's.
func (q *Queue) settle(entries []queue.Entry, op queue.SettleOp) {
	switch op {
	case queue.Ack:
		q.mu.Lock()
		q.unacked -= len(entries)
		q.mu.Unlock()
		q.ctr.ack.Add(uint64(len(entries)))
	case queue.Reject:
		q.mu.Lock()
		q.unacked -= len(entries)
		for _, e := range entries {
			q.deadLetter(e.Msg, queue.Rejected)
		}
		q.unlockReport()
	case queue.Requeue:
		q.requeue(entries)
	}
}

// requeue returns taken entries to their original places, marked
// redelivered, and offers them again.
func (q *Queue) requeue(entries []queue.Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	if !q.deleted {
		for _, e := range entries {
			e.Redelivered = true
			e.Returns++
			if q.limits.HasDeliveryLimit && int64(e.Returns) > q.limits.DeliveryLimit {
				q.drop(e, queue.DeliveryLimit)
				continue
			}
			q.backlog.Requeue(e)
		}
		// Requeued messages take room again: at drop-head they are the
		// first to go, as in RabbitMQ.
		q.dropOver()
		q.serveHead()
	}
	q.unlockReport()
}

// Touch records a use of the queue (a re-declaration), restarting its
// x-expires countdown.
func (q *Queue) Touch() {
	q.mu.Lock()
	q.lastUsed = q.now()
	q.mu.Unlock()
}

// expireCheck runs on the x-expires timer.
func (q *Queue) expireCheck() {
	q.mu.Lock()
	if q.deleted || q.stopped || len(q.consumers) > 0 || q.limits.Expires <= 0 {
		q.mu.Unlock()
		return
	}
	idle := q.now().Sub(q.lastUsed)
	if idle < q.limits.Expires {
		q.expTimer.Reset(q.limits.Expires - idle)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	if q.hooks.Expired != nil {
		q.hooks.Expired(q)
	}
}

// AddConsumer implements queue.Queue. Consumers are kept by descending
// priority, in arrival order within a priority; with single active
// consumer, in arrival order only (the first is the active one).
func (q *Queue) AddConsumer(o queue.ConsumeOptions) error {
	tag, c, exclusive, priority := o.Tag, o.Consumer, o.Exclusive, o.Priority
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return queue.ErrDeleted
	case q.exclusive:
		return queue.ErrExclusiveConsumer
	case exclusive && q.limits.SingleActive:
		// RabbitMQ refuses exclusive consumers of a single active
		// consumer queue outright.
		return queue.ErrExclusiveConsumer
	case exclusive && len(q.consumers) > 0:
		return queue.ErrHasConsumers
	}
	i := len(q.consumers)
	if !q.limits.SingleActive {
		for i > 0 && q.consumers[i-1].prio < priority {
			i--
		}
	}
	q.consumers = slices.Insert(q.consumers, i, consumerSlot{tag: tag, c: c, prio: priority})
	if q.next > i {
		q.next++
	}
	q.exclusive = exclusive
	q.hadConsumer = true
	q.lastUsed = q.now()
	return nil
}

// RemoveConsumer detaches the consumer c registered under tag. It reports
// whether the queue should now be auto-deleted (it is auto-delete and its
// last consumer went away).
func (q *Queue) RemoveConsumer(tag string, c queue.Consumer) (autoDelete bool) {
	q.mu.Lock()
	defer func() {
		// Another consumer may take over (single active consumer).
		q.dispatch()
		q.unlockReport()
	}()
	for i, s := range q.consumers {
		if s.tag == tag && s.c == c {
			q.consumers = slices.Delete(q.consumers, i, i+1)
			q.exclusive = false
			if q.next > i {
				q.next--
			}
			break
		}
	}
	q.lastUsed = q.now()
	if len(q.consumers) == 0 && q.expTimer != nil && !q.deleted && !q.stopped {
		q.expTimer.Reset(q.limits.Expires)
	}
	return q.decl.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
}

// Purge implements queue.Purger.
func (q *Queue) Purge() int {
	q.mu.Lock()
	var removed []queue.Entry
	n := q.backlog.Len()
	if q.store != nil {
		removed = make([]queue.Entry, 0, n)
		for {
			e, ok := q.backlog.Pop()
			if !ok {
				break
			}
			removed = append(removed, e)
		}
	} else {
		q.backlog.Purge()
	}
	q.mu.Unlock()
	q.report(nil, removed)
	return n
}

// Stats implements queue.Queue, after dropping expired head messages.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	q.dropExpired(q.now())
	s := queue.Stats{Ready: q.backlog.Len(), ReadyBytes: q.backlog.Bytes(), Unacked: q.unacked, Consumers: len(q.consumers)}
	s.InMemory, s.InMemoryBytes = s.Ready, s.ReadyBytes
	if pb, ok := q.backlog.(*pagedBacklog); ok {
		s.InMemory = pb.mem.Len()
		s.InMemoryBytes = pb.mem.Bytes()
	}
	q.unlockReport()
	return s
}

// Deleted reports whether Delete has been called.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Delete implements queue.Queue. A stored queue's record and entries
// leave the store.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (ready int, consumers []queue.ConsumerRef, err error) {
	q.mu.Lock()
	defer func() {
		marked := q.marked
		q.mu.Unlock()
		if err == nil && q.store != nil && q.typ.forget(q) {
			q.typ.logErr(q.store.DeleteQueue(q.decl.VHost, q.decl.Name, q.decl.ID))
			if marked {
				q.typ.logErr(q.store.DeleteBlob(recoveryMarkKey(q.decl.ID)))
			}
		}
	}()
	switch {
	case q.deleted:
		return 0, nil, nil
	case ifUnused && len(q.consumers) > 0:
		return 0, nil, queue.ErrInUse
	case ifEmpty && q.backlog.Len() > 0:
		return 0, nil, queue.ErrNotEmpty
	}
	q.deleted = true
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
	}
	if q.expTimer != nil {
		q.expTimer.Stop()
	}
	ready = q.backlog.Purge()
	for _, s := range q.consumers {
		consumers = append(consumers, queue.ConsumerRef{Tag: s.tag, Consumer: s.c})
	}
	q.consumers = nil
	return ready, consumers, nil
}

// Stop implements queue.Stopper: the queue's TTL and x-expires timers end,
// and none is armed again, for a broker shutting down (nothing expires
// into a closed store). The queue keeps its messages.
func (q *Queue) Stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
		q.ttlAt = 0
	}
	if q.expTimer != nil {
		q.expTimer.Stop()
	}
}
