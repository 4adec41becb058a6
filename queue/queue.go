package queue

import (
	"errors"
	"sync"
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

// Errors from AddConsumer.
var (
	// ErrExclusiveConsumer: the queue already has an exclusive consumer.
	ErrExclusiveConsumer = errors.New("queue: in exclusive use")
	// ErrHasConsumers: an exclusive consumer was asked for while others exist.
	ErrHasConsumers = errors.New("queue: cannot obtain exclusive access")
	// ErrDeleted: the queue is gone.
	ErrDeleted = errors.New("queue: deleted")
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
}

type consumerSlot struct {
	tag string
	c   Consumer
}

// Queue is one queue. Its methods are safe for concurrent use; a single
// mutex guards the backlog and the consumer list. Lock order: a queue's lock
// may be taken before a channel's lock (Deliver), never after it.
type Queue struct {
	Decl

	mu          sync.Mutex
	backlog     Backlog
	consumers   []consumerSlot
	next        int // round-robin position in consumers
	exclusive   bool
	hadConsumer bool
	seq         uint64
	unacked     int
	deleted     bool
}

// New returns an empty queue keeping its messages in backlog (a memory
// backlog when nil).
func New(d Decl, backlog Backlog) *Queue {
	if backlog == nil {
		backlog = NewMemBacklog()
	}
	return &Queue{Decl: d, backlog: backlog}
}

// Enqueue appends m and offers it to the consumers. It reports false when
// the queue has been deleted.
func (q *Queue) Enqueue(m *Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return false
	}
	q.seq++
	e := Entry{Seq: q.seq, Msg: m}
	if q.backlog.Len() == 0 && q.offer(e) {
		return true
	}
	q.backlog.Push(e)
	return true
}

// offer tries every consumer once, starting after the last one served.
// q.mu must be held.
func (q *Queue) offer(e Entry) bool {
	n := len(q.consumers)
	for i := 0; i < n; i++ {
		k := (q.next + i) % n
		switch q.consumers[k].c.Deliver(q, e) {
		case Pending:
			q.unacked++
		case Settled:
		default:
			continue
		}
		q.next = (k + 1) % n
		return true
	}
	return false
}

// dispatch hands ready entries to consumers until either runs out.
// q.mu must be held.
func (q *Queue) dispatch() {
	for len(q.consumers) > 0 {
		e, ok := q.backlog.Peek()
		if !ok || !q.offer(e) {
			return
		}
		q.backlog.Pop()
	}
}

// Kick asks the queue to offer ready messages again, after a consumer got
// credit back.
func (q *Queue) Kick() {
	q.mu.Lock()
	q.dispatch()
	q.mu.Unlock()
}

// Get takes the first ready entry for basic.get. It returns the entry and
// the number of messages left ready.
func (q *Queue) Get() (Entry, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.backlog.Pop()
	if ok {
		q.unacked++
	}
	return e, q.backlog.Len(), ok
}

// Settle records that n entries taken from this queue were acknowledged,
// rejected without requeue or delivered with no-ack.
func (q *Queue) Settle(n int) {
	q.mu.Lock()
	q.unacked -= n
	q.mu.Unlock()
}

// Requeue returns taken entries to their original places, marked
// redelivered, and offers them again.
func (q *Queue) Requeue(entries []Entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.unacked -= len(entries)
	if q.deleted {
		return
	}
	for _, e := range entries {
		e.Redelivered = true
		q.backlog.Requeue(e)
	}
	q.dispatch()
}

// AddConsumer attaches c under tag. Deliveries start with the next Kick,
// so that the caller can first confirm the subscription to its client.
func (q *Queue) AddConsumer(tag string, c Consumer, exclusive bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return ErrDeleted
	case q.exclusive:
		return ErrExclusiveConsumer
	case exclusive && len(q.consumers) > 0:
		return ErrHasConsumers
	}
	q.consumers = append(q.consumers, consumerSlot{tag: tag, c: c})
	q.exclusive = exclusive
	q.hadConsumer = true
	return nil
}

// RemoveConsumer detaches the consumer c registered under tag. It reports
// whether the queue should now be auto-deleted (it is auto-delete and its
// last consumer went away).
func (q *Queue) RemoveConsumer(tag string, c Consumer) (autoDelete bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, s := range q.consumers {
		if s.tag == tag && s.c == c {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			q.exclusive = false
			if q.next > i {
				q.next--
			}
			if q.next >= len(q.consumers) {
				q.next = 0
			}
			break
		}
	}
	return q.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
}

// Purge drops every ready message and returns how many there were.
func (q *Queue) Purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.backlog.Purge()
}

// Stats is a snapshot of the queue's counters.
type Stats struct {
	Ready      int
	ReadyBytes int64
	Unacked    int
	Consumers  int
}

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{Ready: q.backlog.Len(), ReadyBytes: q.backlog.Bytes(), Unacked: q.unacked, Consumers: len(q.consumers)}
}

// Deleted reports whether Delete has been called.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Errors from Delete.
var (
	ErrInUse    = errors.New("queue: in use")
	ErrNotEmpty = errors.New("queue: not empty")
)

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
