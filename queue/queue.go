package queue

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// Consumer receives deliveries from a queue.
type Consumer interface {
	// Deliver offers e. It returns Refused, taking nothing, when the consumer
	// cannot take a message now (no prefetch credit, flow stopped, its
	// connection's outbound buffer is full); the queue then tries the next
	// consumer and waits for a Kick. Pending means the delivery awaits an
	// ack (Settle or Requeue follows); Settled means it needs none (no-ack).
	// Deliver is called with the queue's lock held, so it must not call back
	// into the queue.
	Deliver(q *Queue, e Entry) Outcome
}

// Outcome is a consumer's answer to Deliver.
type Outcome uint8

// Outcomes of Deliver.
const (
	Refused Outcome = iota
	Pending
	Settled
)

// Errors from AddConsumer and Delete.
var (
	// ErrExclusiveConsumer: the queue already has an exclusive consumer.
	ErrExclusiveConsumer = errors.New("queue: in exclusive use")
	// ErrHasConsumers: an exclusive consumer was asked for while others exist.
	ErrHasConsumers = errors.New("queue: cannot obtain exclusive access")
	// ErrDeleted: the queue is gone.
	ErrDeleted  = errors.New("queue: deleted")
	ErrInUse    = errors.New("queue: in use")
	ErrNotEmpty = errors.New("queue: not empty")
)

// Decl is what a queue was declared with.
type Decl struct {
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       map[string]any
	// Owner identifies the connection that owns an exclusive queue.
	Owner uint64
	// ID is the durable store's id for the queue, 0 when not stored.
	ID uint64
}

// Reason is why a message was dead-lettered, as x-death spells it.
type Reason string

// Dead-letter reasons.
const (
	Rejected Reason = "rejected"
	// DeliveryLimit: returned more often than x-delivery-limit allows.
	DeliveryLimit Reason = "delivery_limit"
	Expired       Reason = "expired"
	MaxLen        Reason = "maxlen"
)

// Dead is a message leaving a queue other than by acknowledgement.
type Dead struct {
	Msg    *Message
	Reason Reason
}

// Hooks are how a queue reports events its owner acts on. They are called
// without the queue's lock held, on whichever goroutine caused the event
// (a timer's, for expiry).
type Hooks struct {
	// DeadLetter receives messages rejected, expired or dropped for length
	// while the queue has a dead-letter exchange.
	DeadLetter func(q *Queue, dead []Dead)
	// Expired is called when the queue has been unused for its x-expires.
	Expired func(q *Queue)
	// Removed receives entries that left the backlog without being
	// delivered: expired, dropped for length, purged. The owner settles
	// them in the durable store.
	Removed func(q *Queue, entries []Entry)
}

// Options configure a new queue.
type Options struct {
	Backlog Backlog // default: in memory
	Limits  Limits
	Hooks   Hooks
	// Now is the clock (default time.Now); tests replace it.
	Now func() time.Time
}

type consumerSlot struct {
	tag  string
	c    Consumer
	prio int
}

// Queue is one queue. Its methods are safe for concurrent use; a single
// mutex guards the backlog and the consumer list. Lock order: a queue's lock
// may be taken before a channel's lock (Deliver), never after it.
type Queue struct {
	Decl
	limits Limits
	hooks  Hooks
	now    func() time.Time
	// countDeliveries: a quorum queue, whose deliveries carry
	// x-delivery-count. Set at creation, never changed.
	countDeliveries bool

	mu          sync.Mutex
	dctx        any // EnqueueFor's ctx while it holds mu, else nil
	backlog     Backlog
	consumers   []consumerSlot
	next        int // round-robin position in consumers
	exclusive   bool
	hadConsumer bool
	seq         uint64
	unacked     int
	deleted     bool
	dead        []Dead  // dead letters waiting to be reported after unlock
	removed     []Entry // removed entries waiting to be reported after unlock
	ttlTimer    *time.Timer
	ttlAt       int64 // when ttlTimer fires, unix nanos; 0 = not armed
	expTimer    *time.Timer
	lastUsed    time.Time
	ctr         counters // message_stats (stats.go)
}

// New returns an empty queue.
func New(d Decl, o Options) *Queue {
	if o.Limits == (Limits{}) {
		o.Limits = Limits{MaxLength: -1, MaxLengthBytes: -1}
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
	q := &Queue{Decl: d, limits: o.Limits, hooks: o.Hooks, now: o.Now, backlog: o.Backlog}
	q.countDeliveries = d.Args["x-queue-type"] == "quorum"
	q.lastUsed = q.now()
	if q.limits.Expires > 0 {
		q.expTimer = time.AfterFunc(q.limits.Expires, q.expireCheck)
	}
	return q
}

// CountsDeliveries reports whether deliveries carry x-delivery-count, as
// RabbitMQ's quorum queues do.
func (q *Queue) CountsDeliveries() bool { return q.countDeliveries }

// Limits returns the limits the queue was created with.
func (q *Queue) Limits() Limits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.limits
}

// SetLimits replaces the queue's limits (a policy changed). Length limits
// apply at once; a new x-expires restarts the countdown; entries already
// queued keep the expiry they were given.
func (q *Queue) SetLimits(l Limits) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return
	}
	q.limits = l
	if l.Overflow == DropHead {
		for q.over() {
			e, ok := q.backlog.Pop()
			if !ok {
				break
			}
			q.drop(e, MaxLen)
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
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
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

// Enqueue appends m and offers it to the consumers.
func (q *Queue) Enqueue(m *Message) EnqueueResult {
	return q.EnqueueAt(m, 0)
}

// DispatchContext is the ctx of the EnqueueFor call that is delivering, or
// nil; it is only meaningful inside Consumer.Deliver (the queue's lock is
// held there).
func (q *Queue) DispatchContext() any { return q.dctx }

// ReserveSeq takes the next sequence number, for a message that must be
// written to the durable store under it before EnqueueAt makes it visible.
func (q *Queue) ReserveSeq() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	return q.seq
}

// EnqueueAt appends m under a sequence number from ReserveSeq (0: take the
// next one). A message whose reserved place was overtaken by a later one
// takes its place by Seq among the messages not yet delivered.
func (q *Queue) EnqueueAt(m *Message, seq uint64) EnqueueResult {
	return q.EnqueueFor(m, seq, nil)
}

// EnqueueFor is EnqueueAt on behalf of ctx: the Deliver calls it makes
// find ctx in DispatchContext. The broker passes what lets a consumer on
// another connection leave its socket write to the publisher's goroutine.
func (q *Queue) EnqueueFor(m *Message, seq uint64, ctx any) EnqueueResult {
	q.mu.Lock()
	q.dctx = ctx
	r := q.enqueueLocked(m, seq)
	q.dctx = nil
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
	return r
}

func (q *Queue) enqueueLocked(m *Message, seq uint64) EnqueueResult {
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
	if q.limits.Overflow != DropHead && q.full(m.Size()) {
		if q.limits.Overflow == RejectPublishDLX {
			q.deadLetter(m, MaxLen)
		}
		return Dropped
	}
	q.ctr.publish.Add(1)
	if seq == 0 {
		q.seq++
		seq = q.seq
	}
	e := Entry{Seq: seq, Msg: m, Expires: q.expiry(m, now)}
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
	if q.limits.Overflow != DropHead {
		return
	}
	for q.over() {
		old, _ := q.backlog.Pop()
		q.drop(old, MaxLen)
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
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
}

// ExpiryFor is when m would expire if enqueued now (Unix ns; 0: never),
// for the durable store to keep with the entry.
func (q *Queue) ExpiryFor(m *Message) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.expiry(m, q.now())
}

// Restore appends a recovered entry (ascending Seq) at start-up. An entry
// recovered with an expiry keeps it.
func (q *Queue) Restore(e Entry) {
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
// queue has a dead-letter exchange, and reported as removed. q.mu must be
// held.
func (q *Queue) drop(e Entry, r Reason) {
	q.deadLetter(e.Msg, r)
	if q.hooks.Removed != nil {
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
func (q *Queue) expiry(m *Message, now time.Time) int64 {
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
		q.drop(e, Expired)
	}
}

// armTTL makes sure a timer fires when the head entry expires, so expiry
// happens without consumers. q.mu must be held.
func (q *Queue) armTTL() {
	e, ok := q.backlog.Peek()
	if !ok || e.Expires == 0 || q.deleted {
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
	if !q.deleted {
		q.dropExpired(q.now())
		q.dispatch()
		q.armTTL()
	}
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
}

// deadLetter records m for the DeadLetter hook if the queue has a
// dead-letter exchange; otherwise the message is simply dropped.
// q.mu must be held.
func (q *Queue) deadLetter(m *Message, r Reason) {
	if q.limits.HasDLX && q.hooks.DeadLetter != nil {
		q.dead = append(q.dead, Dead{Msg: m, Reason: r})
	}
}

func (q *Queue) takeDead() ([]Dead, []Entry) {
	d, r := q.dead, q.removed
	q.dead, q.removed = nil, nil
	return d, r
}

// report passes events collected under the lock to the hooks; the lock
// must not be held.
func (q *Queue) report(dead []Dead, removed []Entry) {
	if len(removed) > 0 {
		q.hooks.Removed(q, removed)
	}
	if len(dead) > 0 {
		q.hooks.DeadLetter(q, dead)
	}
}

// offer tries the consumers in priority order, round-robin among equal
// priorities starting after the last one served; a lower priority gets a
// message only when every higher one refused it. With single active
// consumer only the first consumer is tried. q.mu must be held.
func (q *Queue) offer(e Entry) bool {
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
			switch q.consumers[k].c.Deliver(q, e) {
			case Pending:
				q.unacked++
				q.ctr.delivered(true, e.Redelivered)
			case Settled:
				q.ctr.delivered(false, e.Redelivered)
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
			q.drop(e, Expired)
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

// Kick asks the queue to offer ready messages again, after a consumer got
// credit back.
func (q *Queue) Kick() { q.KickFor(nil) }

// KickFor is Kick on behalf of ctx, as EnqueueFor.
func (q *Queue) KickFor(ctx any) {
	q.mu.Lock()
	q.dctx = ctx
	q.dispatch()
	q.dctx = nil
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
}

// Withdraw takes back a message the store failed to write (m is marked
// lost): its entry at seq leaves the backlog, so that it is neither
// delivered nor counted. One that was delivered already stays with its
// consumer.
func (q *Queue) Withdraw(m *Message, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.backlog.Remove(Entry{Seq: seq, Msg: m})
}

// Get takes the first ready entry for basic.get. It returns the entry and
// the number of messages left ready.
func (q *Queue) Get() (Entry, int, bool) {
	q.mu.Lock()
	q.lastUsed = q.now()
	q.dropExpired(q.lastUsed)
	e, ok := q.backlog.Pop()
	if ok {
		q.unacked++
		// An expired message that is now the head is not counted.
		q.dropExpired(q.lastUsed)
	}
	n := q.backlog.Len()
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
	return e, n, ok
}

// Settle records that n entries taken from this queue were acknowledged or
// dropped.
func (q *Queue) Settle(n int) {
	q.mu.Lock()
	q.unacked -= n
	q.mu.Unlock()
}

// Reject settles taken entries that a client rejected without requeue:
// they are dead-lettered if the queue has a dead-letter exchange.
func (q *Queue) Reject(entries []Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	for _, e := range entries {
		q.deadLetter(e.Msg, Rejected)
	}
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
}

// Requeue returns taken entries to their original places, marked
// redelivered, and offers them again.
func (q *Queue) Requeue(entries []Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	if !q.deleted {
		for _, e := range entries {
			e.Redelivered = true
			e.Returns++
			if q.limits.HasDeliveryLimit && int64(e.Returns) > q.limits.DeliveryLimit {
				q.drop(e, DeliveryLimit)
				continue
			}
			q.backlog.Requeue(e)
		}
		// Requeued messages take room again: at drop-head they are the
		// first to go, as in RabbitMQ.
		q.dropOver()
		q.dropExpired(q.now())
		q.dispatch()
		q.armTTL()
	}
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
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
	if q.deleted || len(q.consumers) > 0 || q.limits.Expires <= 0 {
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

// AddConsumer attaches c under tag. Deliveries start with the next Kick,
// so that the caller can first confirm the subscription to its client.
// Consumers are kept by descending priority, in arrival order within a
// priority; with single active consumer, in arrival order only (the first
// is the active one).
func (q *Queue) AddConsumer(tag string, c Consumer, exclusive bool, priority int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return ErrDeleted
	case q.exclusive:
		return ErrExclusiveConsumer
	case exclusive && q.limits.SingleActive:
		// RabbitMQ refuses exclusive consumers of a single active
		// consumer queue outright.
		return ErrExclusiveConsumer
	case exclusive && len(q.consumers) > 0:
		return ErrHasConsumers
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
func (q *Queue) RemoveConsumer(tag string, c Consumer) (autoDelete bool) {
	q.mu.Lock()
	defer func() {
		// Another consumer may take over (single active consumer).
		q.dispatch()
		dead, removed := q.takeDead()
		q.mu.Unlock()
		q.report(dead, removed)
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
	if len(q.consumers) == 0 && q.expTimer != nil && !q.deleted {
		q.expTimer.Reset(q.limits.Expires)
	}
	return q.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
}

// Purge drops every ready message and returns how many there were.
func (q *Queue) Purge() int {
	q.mu.Lock()
	var removed []Entry
	n := q.backlog.Len()
	if q.hooks.Removed != nil {
		removed = make([]Entry, 0, n)
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

// Stats is a snapshot of the queue's counters.
type Stats struct {
	Ready      int
	ReadyBytes int64
	Unacked    int
	Consumers  int
}

// Stats returns the queue's counters, after dropping expired head messages.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	q.dropExpired(q.now())
	s := Stats{Ready: q.backlog.Len(), ReadyBytes: q.backlog.Bytes(), Unacked: q.unacked, Consumers: len(q.consumers)}
	dead, removed := q.takeDead()
	q.mu.Unlock()
	q.report(dead, removed)
	return s
}

// Deleted reports whether Delete has been called.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Delete marks the queue deleted and drops its messages. With ifUnused it
// refuses (ErrInUse) while consumers are attached; with ifEmpty it refuses
// (ErrNotEmpty) while messages are ready. It returns how many messages were
// ready and the consumers that were attached, to be told of the
// cancellation. Deleting a deleted queue returns zero values.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (ready int, consumers []ConsumerRef, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return 0, nil, nil
	case ifUnused && len(q.consumers) > 0:
		return 0, nil, ErrInUse
	case ifEmpty && q.backlog.Len() > 0:
		return 0, nil, ErrNotEmpty
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
		consumers = append(consumers, ConsumerRef{Tag: s.tag, Consumer: s.c})
	}
	q.consumers = nil
	return ready, consumers, nil
}

// ConsumerRef names a consumer attached to a queue.
type ConsumerRef struct {
	Tag      string
	Consumer Consumer
}
