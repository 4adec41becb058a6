// Package queue holds one queue's ordered messages and its consumers: the
// ready backlog, dispatch to consumers, requeue order and the exclusive and
// auto-delete bookkeeping. It knows nothing of sockets or channels: it
// delivers to the Consumer interface it declares and keeps messages behind
// the Backlog interface, so a disk-backed backlog slots in unchanged.
package queue

import (
	"sync/atomic"
	"time"
)

// Message is one published message. It is immutable once published and may
// be shared by many queues; a queue refers to it through an Entry.
type Message struct {
	Exchange   string
	RoutingKey string
	// Props is the content header's property flags and list exactly as the
	// publisher sent them; deliveries forward it byte for byte.
	Props []byte
	Body  []byte
	// Persistent is true for delivery-mode 2.
	Persistent bool
	// StoreID is the message's id in the durable store, 0 when it is not
	// stored (transient, or routed to no durable queue).
	StoreID uint64
	// Priority is the priority property (0 when absent).
	Priority uint8
	// TTL is the message's own expiration property, when HasTTL.
	TTL    time.Duration
	HasTTL bool
	// lost is set when the store failed to write the message: its
	// publisher was nacked, so no queue may deliver it or count it.
	lost atomic.Bool
}

// MarkLost records that the store failed to write m (see Queue.Withdraw).
func (m *Message) MarkLost() { m.lost.Store(true) }

// Lost reports whether MarkLost was called.
func (m *Message) Lost() bool { return m.lost.Load() }

// Size is the message's weight for byte-based accounting.
func (m *Message) Size() int64 { return int64(len(m.Body)) }

// Entry is a message's place in one queue.
type Entry struct {
	// Seq orders the queue: a requeued entry returns to the place its Seq
	// gives it, ahead of every later message, as RabbitMQ does.
	Seq         uint64
	Msg         *Message
	Redelivered bool
	// Returns counts how often the entry came back to the queue unsettled;
	// quorum queues report it as x-delivery-count.
	Returns uint32
	// Expires is when the entry expires, in Unix nanoseconds; 0 = never.
	Expires int64
}
