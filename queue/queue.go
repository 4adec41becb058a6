package queue

import (
	"errors"
	"fmt"
	"time"
)

// This file is the seam between the broker and its queue types: what the
// channel and the vhost call on any queue, whatever keeps its messages. A
// classic queue (package classic), a direct reply-to pseudo-queue (package
// replyto) and, later, stream and quorum queues implement it. The broker
// never looks behind it: a delivery carries the queue it came from and an
// Entry, whose Seq is the type's own reference (a classic queue's
// sequence number, a stream's offset, a quorum queue's log index).
//
// Lock order: a queue's own lock may be taken before a channel's lock
// (Consumer.Deliver runs under it), never after it. Methods are safe for
// concurrent use unless they say otherwise.

// Queue is one queue of any type.
type Queue interface {
	// Decl is what the queue was declared with. It never changes; the
	// caller must not modify it.
	Decl() *Decl
	// Type is the queue's type, which takes its publishes.
	Type() Type

	// AddConsumer attaches c. Deliveries start with the next Kick, so that
	// the caller can first confirm the subscription to its client. Errors:
	// ErrExclusiveConsumer, ErrHasConsumers, ErrDeleted, or an *ArgError
	// for a consumer argument the type refuses.
	AddConsumer(o ConsumeOptions) error
	// RemoveConsumer detaches the consumer c registered under tag. It
	// reports whether the queue should now be auto-deleted (it is
	// auto-delete and its last consumer went away).
	RemoveConsumer(tag string, c Consumer) (autoDelete bool)
	// Kick offers ready messages to the consumers again, after one got
	// credit back. ctx is handed to Consumer.Deliver.
	Kick(ctx any)
	// Settle ends deliveries the queue handed out (by Deliver or Get): the
	// queue writes its own store or log operation for them.
	Settle(entries []Entry, op SettleOp)

	// Delete marks the queue deleted and drops its messages and its store
	// record. With ifUnused it refuses (ErrInUse) while consumers are
	// attached; with ifEmpty it refuses (ErrNotEmpty) while messages are
	// ready. It returns how many messages were ready and the consumers
	// that were attached, to be told of the cancellation. Deleting a
	// deleted queue returns zero values.
	Delete(ifUnused, ifEmpty bool) (ready int, consumers []ConsumerRef, err error)
	// Deleted reports whether Delete has been called.
	Deleted() bool
	// Touch records a use of the queue (a re-declaration), for x-expires.
	Touch()

	// Stats is a snapshot of the queue's counts; MessageStats of its
	// event counters (RabbitMQ's message_stats).
	Stats() Stats
	MessageStats() MessageStats
	// DeliveryProps returns the content properties a delivery of e
	// carries: the message's own, or a copy with headers the type adds
	// (x-delivery-count, x-stream-offset).
	DeliveryProps(e Entry) []byte
}

// Type is one kind of queue, as x-queue-type names it. It describes its
// declarations, creates and recovers queues, and takes the publishes
// routed to its queues: all of one message's queues of the type at once,
// so that a type can store the message once for all of them.
type Type interface {
	// Info names the type and the arguments it refuses.
	Info() TypeInfo
	// New creates a queue from a checked declaration (Registry.Check).
	New(d Decl, l Limits, h Hooks) (Queue, error)
	// Publish hands m to qs, every one of them a queue of this type. done
	// is called once the type lets the publisher's confirm go (the store
	// write is durable), with the error that makes it a nack; it may be
	// called before Publish returns. ctx is handed to Consumer.Deliver.
	// Publish reports whether any queue took the message and whether one
	// refused it for its length limit.
	Publish(m *Message, qs []Queue, ctx any, done func(error)) (routed, dropped bool)
}

// TypeInfo describes a queue type's declarations.
type TypeInfo struct {
	Name string // the x-queue-type value
	// Module is RabbitMQ's module name of the type, as its error texts
	// name it.
	Module string
	// Refused lists the arguments the type refuses, by RabbitMQ 3.10.
	Refused []string
	// Replicated: the type needs durable, non-exclusive, non-auto-delete
	// declarations (quorum and stream queues).
	Replicated bool
	// Compared lists the arguments whose values a re-declaration must
	// repeat, in the order RabbitMQ 3.10 compares them (after the durable
	// and auto-delete flags); the others are ignored on re-declaration.
	Compared []string
	// CheckArgs, if set, checks the values of the type's own arguments
	// (those ParseArgs does not know), after ParseArgs and before the
	// refused arguments and the flags (Registry.Check). It gets the
	// declaration's arguments without the refused ones. A *RefusedError
	// it returns is reported after the flags, where RabbitMQ's type
	// checks its own limits when it declares the queue (the stream's
	// largest segment size).
	CheckArgs func(args map[string]any) error
}

// SettleOp is how a delivery ends.
type SettleOp uint8

// Settlements.
const (
	// Ack: the consumer processed the message; it leaves the queue.
	Ack SettleOp = iota
	// Reject: refused without requeue; dead-lettered when the queue has a
	// dead-letter exchange, else dropped.
	Reject
	// Requeue: returned to its place, marked redelivered.
	Requeue
	// Nack: requeued by the client (basic.nack or basic.reject with
	// requeue), as opposed to a closed channel's or a recover's Requeue.
	// A quorum queue puts it at the back, as RabbitMQ 3.10's does; every
	// other type treats it as Requeue (Requeues).
	Nack
)

// Requeued is op with Nack taken as Requeue, for the types that return
// both to the message's place.
func (op SettleOp) Requeued() SettleOp {
	if op == Nack {
		return Requeue
	}
	return op
}

// ConsumeOptions are a basic.consume's.
type ConsumeOptions struct {
	Tag       string
	Consumer  Consumer
	Exclusive bool
	// Priority is the x-priority argument.
	Priority int
	// Args are the consume arguments, for types that read more of them
	// (x-stream-offset).
	Args map[string]any
	// NoAck: the consumer acknowledges nothing (streams refuse it).
	NoAck bool
	// Prefetch is the consumer's own prefetch limit, 0 for none (streams
	// need one).
	Prefetch uint16
}

// Consumer receives deliveries from a queue.
type Consumer interface {
	// Deliver offers e from q. It returns Refused, taking nothing, when
	// the consumer cannot take a message now (no prefetch credit, flow
	// stopped, its connection's outbound buffer is full); the queue then
	// tries the next consumer and waits for a Kick (a quorum queue keeps
	// what a Busy consumer refused checked out to it, and offers it
	// again at the Kick). Pending means the
	// delivery awaits a Settle; Settled means it needs none (no-ack). ctx
	// is what the caller of Kick or Type.Publish passed: the broker's way
	// to let a publisher's goroutine write another connection's socket.
	// Deliver is called with the queue's lock held, so it must not call
	// back into the queue.
	Deliver(q Queue, e Entry, ctx any) Outcome
}

// Busy is a consumer that can tell why it refused its last delivery.
// RefusedBusy reports that it refused only because its connection cannot
// take more for now (its outbound buffer is full, its channel's flow is
// stopped), not for want of credit: it takes what it refused at its next
// Kick, so a queue may keep it for it rather than give it to another
// consumer (a quorum queue does, as RabbitMQ's channel keeps what its
// quorum queue sent it, and so keeps its order). Called, like Deliver,
// under the queue's lock, right after the refused Deliver.
type Busy interface {
	RefusedBusy() bool
}

// ChannelCloser is a consumer that can tell whether its channel has
// closed. The broker removes a closed channel's consumers after it
// settled what they held (queue.Requeue), so a queue that keeps what a
// cancelled consumer holds until it is settled (a quorum queue) need
// keep nothing for one whose channel closed: whatever is still checked
// out to it goes back, as RabbitMQ's quorum queue returns what a
// consumer whose channel went down held.
type ChannelCloser interface {
	ChannelClosed() bool
}

// Outcome is a consumer's answer to Deliver.
type Outcome uint8

// Outcomes of Deliver.
const (
	Refused Outcome = iota
	Pending
	Settled
)

// ConsumerRef names a consumer attached to a queue.
type ConsumerRef struct {
	Tag      string
	Consumer Consumer
}

// Optional capabilities. A queue type implements those its queues have;
// the broker answers RabbitMQ's reply code where one is missing.
type (
	// Getter is a queue that serves basic.get.
	Getter interface {
		// Get takes the first ready message: settled at once with
		// noAck, else delivered and awaiting a Settle. It returns the
		// number of messages left ready.
		Get(noAck bool) (e Entry, remaining int, ok bool)
	}
	// Purger is a queue that serves queue.purge.
	Purger interface {
		// Purge drops every ready message and returns how many there
		// were.
		Purge() int
	}
	// Stopper is a queue with timers of its own (expiry), which a broker
	// shutting down stops.
	Stopper interface {
		// Stop ends the queue's timers; the queue keeps its messages.
		Stop()
	}
	// LimitSetter is a queue whose limits follow policies.
	LimitSetter interface {
		// SetLimits replaces the queue's limits (a policy changed).
		SetLimits(l Limits)
	}
	// DeclareCounter is a queue whose declare-ok counts are not its
	// Stats' (streams: RabbitMQ 3.10 reports no consumers).
	DeclareCounter interface {
		DeclareCounts() (messages, consumers int)
	}
	// NackRefuser is a queue some of whose deliveries cannot be nacked
	// or rejected (a stream's plain consumers': RabbitMQ answers 540
	// NOT_IMPLEMENTED; its group members' can). Settle with Requeue
	// still ends such deliveries of a closed channel.
	NackRefuser interface {
		RefusesNack(e Entry) bool
	}
	// PublishChecker is a queue that can refuse a message before it is
	// delivered anywhere (a partitioned stream: partition headers it
	// cannot honour); the broker closes the publishing channel with the
	// error, 406 PRECONDITION_FAILED.
	PublishChecker interface {
		CheckPublish(m *Message) error
	}
	// Transactional is a type whose share of a tx.commit is made durable
	// as one: after a crash, all of it or none of it is there.
	Transactional interface {
		// Commit stores pubs (each with this type's queues it was routed
		// to) and settles (of this type's queues) as one, then makes the
		// publishes visible and applies the settlements. It fills in each
		// publish's Routed and Dropped. done is called once the whole is
		// durable.
		Commit(pubs []TxPublish, settles []TxSettle, ctx any, done func(error))
	}
)

// TxPublish is one publish of a transaction.
type TxPublish struct {
	Msg             *Message
	Queues          []Queue
	Routed, Dropped bool // set by Commit
}

// TxSettle is one settlement of a transaction, of one queue's entries.
type TxSettle struct {
	Queue   Queue
	Entries []Entry
	Op      SettleOp
}

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
	// ErrNoAckRefused: the type takes no consumers with automatic
	// acknowledgement (streams; RabbitMQ answers 540).
	ErrNoAckRefused = errors.New("queue: automatic acknowledgement not supported")
	// ErrPrefetchRequired: the type needs a per-consumer prefetch limit
	// (streams; RabbitMQ answers 406).
	ErrPrefetchRequired = errors.New("queue: consumer prefetch count is not set")
)

// OffsetError is a consumer's x-stream-offset the type cannot read. RabbitMQ
// 3.10 crashes on an unknown offset string: 541 INTERNAL_ERROR.
type OffsetError struct{ Value any }

func (e *OffsetError) Error() string {
	return fmt.Sprintf("queue: invalid x-stream-offset %v", e.Value)
}

// CrashError is an argument value RabbitMQ 3.10 crashes on (an x-max-age
// without a leading number): it closes the connection with a bare 541
// INTERNAL_ERROR, and so does Warren.
type CrashError struct {
	Arg   string
	Value any
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("queue: invalid %s %v", e.Arg, e.Value)
}

// Decl is what a queue was declared with.
type Decl struct {
	VHost      string
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

// Stored reports whether the declaration is written to the store: durable
// and not exclusive (exclusive queues die with their connection, restarts
// included).
func (d *Decl) Stored() bool { return d.Durable && !d.Exclusive }

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

// Dead is a message leaving a queue other than by acknowledgement, bound
// for the queue's dead-letter exchange.
type Dead struct {
	Msg    *Message
	Reason Reason
	// Exchange is the dead-letter exchange; RoutingKey replaces the
	// message's routing keys when HasRoutingKey.
	Exchange      string
	RoutingKey    string
	HasRoutingKey bool
}

// Hooks are how a queue reports events its owner acts on. They are called
// without the queue's lock held, on whichever goroutine caused the event
// (a timer's, for expiry).
type Hooks struct {
	// DeadLetter receives messages rejected, expired or dropped for length
	// while the queue has a dead-letter exchange.
	DeadLetter func(q Queue, dead []Dead)
	// Expired is called when the queue has been unused for its x-expires.
	Expired func(q Queue)
	// Cancel is called when the queue dropped a consumer of its own
	// accord (a stream's rebalance with x-stream-cancel-on-rebalance): the
	// broker forgets it and tells its client with basic.cancel.
	Cancel func(q Queue, c ConsumerRef)
}

// Stats is a snapshot of a queue's counts.
type Stats struct {
	Ready      int
	ReadyBytes int64
	Unacked    int
	Consumers  int
	// InMemory and InMemoryBytes estimate the ready messages held in
	// memory (a paging queue keeps a window of them).
	InMemory      int
	InMemoryBytes int64
}

// MessageStats is a snapshot of a queue's event counters, named as
// RabbitMQ's message_stats fields.
type MessageStats struct {
	Publish, Deliver, DeliverNoAck, Get, GetNoAck, GetEmpty, Redeliver, Ack uint64
}

// Add adds o to s.
func (s *MessageStats) Add(o MessageStats) {
	s.Publish += o.Publish
	s.Deliver += o.Deliver
	s.DeliverNoAck += o.DeliverNoAck
	s.Get += o.Get
	s.GetNoAck += o.GetNoAck
	s.GetEmpty += o.GetEmpty
	s.Redeliver += o.Redeliver
	s.Ack += o.Ack
}

// Entry is a message's place in one queue, and the reference a delivery
// carries back to it.
type Entry struct {
	// Seq is the type's reference: for a classic queue the sequence
	// number that orders it (a requeued entry returns to the place its Seq
	// gives it, ahead of every later message, as RabbitMQ does).
	Seq         uint64
	Msg         *Message
	Redelivered bool
	// Returns counts how often the entry came back to the queue unsettled;
	// quorum queues report it as x-delivery-count.
	Returns uint32
	// Expires is when the entry expires, in Unix nanoseconds; 0 = never.
	Expires int64
	// Ref is more of the type's reference, its own to use (a stream:
	// which cursor and partition delivered it).
	Ref uint64
}

// Clock is a queue's time source; tests replace it.
type Clock func() time.Time
