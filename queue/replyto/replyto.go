// Package replyto is direct reply-to as RabbitMQ has it, as a queue type:
// a client consumes (with no-ack) from the pseudo-queue
// amq.rabbitmq.reply-to and publishes requests with reply-to set to that
// name; the broker rewrites reply-to to a name unique to the consumer, and
// a reply published to the default exchange under that name goes straight
// to the consumer. Each consumer has a pseudo-queue of its own, which
// holds nothing: a reply the consumer cannot take at once is dropped, as
// in RabbitMQ. The pseudo-queue goes when its consumer does.
package replyto

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync"

	"github.com/warrenmq/warren/queue"
)

// Names of the pseudo-queue.
const (
	// Name is what a client consumes from and puts in reply-to.
	Name = "amq.rabbitmq.reply-to"
	// Prefix starts every rewritten reply-to, followed by the key.
	Prefix = Name + "."
)

// ErrNotDeclarable: the pseudo-queues are made by consuming, never by
// queue.declare.
var ErrNotDeclarable = errors.New("replyto: direct reply-to is not declared")

// Type is the direct reply-to type; it holds the live pseudo-queues by
// reply name.
type Type struct {
	mu     sync.Mutex
	byName map[string]*Queue
}

// NewType returns the type with no pseudo-queues.
func NewType() *Type { return &Type{byName: map[string]*Queue{}} }

// Info implements queue.Type.
func (t *Type) Info() queue.TypeInfo {
	return queue.TypeInfo{Name: "direct-reply-to", Module: "rabbit_direct_reply_to"}
}

// New implements queue.Type; use Open.
func (t *Type) New(queue.Decl, queue.Limits, queue.Hooks) (queue.Queue, error) {
	return nil, ErrNotDeclarable
}

// Open makes a pseudo-queue with a fresh reply name for one consumer; the
// consumer is attached with AddConsumer.
func (t *Type) Open(vhost string) *Queue {
	var b [16]byte
	rand.Read(b[:])
	q := &Queue{typ: t, decl: queue.Decl{VHost: vhost, Name: Prefix + base64.RawURLEncoding.EncodeToString(b[:])}}
	t.mu.Lock()
	t.byName[q.decl.Name] = q
	t.mu.Unlock()
	return q
}

// Lookup returns the pseudo-queue a reply routed with key goes to, if key
// is a live reply name.
func (t *Type) Lookup(key string) (*Queue, bool) {
	if !strings.HasPrefix(key, Prefix) {
		return nil, false
	}
	t.mu.Lock()
	q := t.byName[key]
	t.mu.Unlock()
	return q, q != nil
}

// Len is the number of live pseudo-queues.
func (t *Type) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byName)
}

// Publish implements queue.Type: each pseudo-queue hands m to its
// consumer at once; routed is false when none took it.
func (t *Type) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	for _, x := range qs {
		if x.(*Queue).deliver(m, ctx) {
			routed = true
		}
	}
	if done != nil {
		done(nil)
	}
	return routed, false
}

// Queue is one consumer's pseudo-queue.
type Queue struct {
	typ  *Type
	decl queue.Decl

	mu       sync.Mutex
	tag      string
	consumer queue.Consumer
	deleted  bool
}

func (q *Queue) deliver(m *queue.Message, ctx any) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.consumer == nil || q.deleted {
		return false
	}
	return q.consumer.Deliver(q, queue.Entry{Msg: m}, ctx) != queue.Refused
}

// Decl implements queue.Queue; Name is the reply name.
func (q *Queue) Decl() *queue.Decl { return &q.decl }

// Type implements queue.Queue.
func (q *Queue) Type() queue.Type { return q.typ }

// ErrConsumerSet: the pseudo-queue has its consumer already.
var ErrConsumerSet = errors.New("replyto: reply consumer already set")

// AddConsumer implements queue.Queue: the one consumer the pseudo-queue
// is for.
func (q *Queue) AddConsumer(o queue.ConsumeOptions) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return queue.ErrDeleted
	case q.consumer != nil:
		return ErrConsumerSet
	}
	q.tag, q.consumer = o.Tag, o.Consumer
	return nil
}

// RemoveConsumer implements queue.Queue; the pseudo-queue is then to be
// deleted.
func (q *Queue) RemoveConsumer(tag string, c queue.Consumer) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.consumer == c && q.tag == tag {
		q.consumer, q.tag = nil, ""
	}
	return q.consumer == nil && !q.deleted
}

// Kick implements queue.Queue; nothing waits.
func (q *Queue) Kick(any) {}

// Settle implements queue.Queue; deliveries need no ack.
func (q *Queue) Settle([]queue.Entry, queue.SettleOp) {}

// Delete implements queue.Queue: the reply name stops routing.
func (q *Queue) Delete(ifUnused, _ bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.deleted:
		return 0, nil, nil
	case ifUnused && q.consumer != nil:
		return 0, nil, queue.ErrInUse
	}
	q.deleted = true
	t := q.typ
	t.mu.Lock()
	delete(t.byName, q.decl.Name)
	t.mu.Unlock()
	var refs []queue.ConsumerRef
	if q.consumer != nil {
		refs = append(refs, queue.ConsumerRef{Tag: q.tag, Consumer: q.consumer})
		q.consumer = nil
	}
	return 0, refs, nil
}

// Deleted implements queue.Queue.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Touch implements queue.Queue.
func (q *Queue) Touch() {}

// Stats implements queue.Queue.
func (q *Queue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.consumer == nil {
		return queue.Stats{}
	}
	return queue.Stats{Consumers: 1}
}

// MessageStats implements queue.Queue; RabbitMQ counts no stats for the
// pseudo-queue.
func (q *Queue) MessageStats() queue.MessageStats { return queue.MessageStats{} }

// DeliveryProps implements queue.Queue.
func (q *Queue) DeliveryProps(e queue.Entry) []byte { return e.Msg.Props }
