// Package queue is the seam between the broker and its queue types: the
// Queue and Type interfaces (queue.go) that the channel and the vhost call,
// the registry of types keyed by x-queue-type (types.go), and what every
// type shares: messages, entries, consumers, declarations and their
// argument checks in RabbitMQ's words (args.go). It knows nothing of
// sockets, channels or stores. The types live in their own packages:
// classic queues in queue/classic, direct reply-to in queue/replyto; the
// contract every type passes is queue/queuetest.
package queue

import (
	"fmt"
	"math/big"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
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
	// Headers is the encoded headers table of Props (length prefix
	// included, aliasing Props; nil when it has none) when HeadersIndexed:
	// the broker indexed a publish's properties once, so a queue type
	// reading a header need not index them again. Messages built
	// otherwise leave both unset and a type indexes Props itself.
	Headers        []byte
	HeadersIndexed bool
	// Parsed is a queue type's reading of Props for routing (a
	// partitioned stream's headers), made by its CheckPublish and reused
	// by its Publish. Both run on the publishing goroutine before any
	// queue has the message; nothing else touches it.
	Parsed any
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

// NewStored rebuilds a message read back from a durable store or a spill
// file, reading the properties a queue needs (priority, expiration).
func NewStored(exchange, routingKey string, props, body []byte, storeID uint64) *Message {
	m := &Message{
		Exchange: exchange, RoutingKey: routingKey, Props: props, Body: body,
		Persistent: storeID != 0 || amqp.PropDeliveryMode(props) == 2, StoreID: storeID,
	}
	m.Priority, _ = amqp.PropPriority(props)
	if exp, ok := amqp.PropExpiration(props); ok {
		m.TTL, m.HasTTL = ParseExpiration(exp)
	}
	return m
}

// MaxExpiration caps a message TTL (RabbitMQ takes any non-negative
// integer; beyond a century it makes no difference).
const MaxExpiration = 100 * 365 * 24 * time.Hour

// parseExpiration reads the expiration property: a whole number of
// milliseconds, optionally signed, as Erlang's string:to_integer reads it
// for RabbitMQ; negative numbers and trailing characters are refused
// (ExpirationError says why).
func ParseExpiration(exp string) (time.Duration, bool) {
	n, rest, ok := leadingInteger(exp)
	if !ok || rest != "" || n.Sign() < 0 {
		return 0, false
	}
	if !n.IsInt64() || n.Int64() > int64(MaxExpiration/time.Millisecond) {
		return MaxExpiration, true
	}
	return time.Duration(n.Int64()) * time.Millisecond, true
}

// expirationError is RabbitMQ's reason for refusing exp.
func ExpirationError(exp string) string {
	n, rest, ok := leadingInteger(exp)
	switch {
	case !ok:
		return "no_integer"
	case rest != "":
		return fmt.Sprintf("{leftover_string,%q}", rest)
	case n.Sign() < 0:
		return fmt.Sprintf("{value_negative,%s}", n)
	}
	return "no_integer"
}

// leadingInteger reads an optionally signed decimal integer at the start
// of s and returns it with what follows it.
func leadingInteger(s string) (*big.Int, string, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return nil, s, false
	}
	n, ok := new(big.Int).SetString(s[:j], 10)
	return n, s[j:], ok
}

// WithHeader returns props with the header key set to v, for a delivery
// property a queue type adds (x-delivery-count, x-stream-offset); props
// as they are if they do not decode.
func WithHeader(props []byte, key string, v any) []byte {
	return WithHeaders(props, key, v)
}

// WithHeaders is WithHeader for several headers: kv alternates keys
// (strings) and values. The headers are appended to the encoded table
// (amqp.AddHeaders); only when the message already has one of them are
// its properties decoded and encoded again.
func WithHeaders(props []byte, kv ...any) []byte {
	var keyBuf [4]string
	var valBuf [4]any
	keys, vals := keyBuf[:0], valBuf[:0]
	for i := 0; i+1 < len(kv); i += 2 {
		keys, vals = append(keys, kv[i].(string)), append(vals, kv[i+1])
	}
	if out, ok := amqp.AddHeaders(props, keys, vals); ok {
		return out
	}
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return props
	}
	h := make(amqp.Table, len(p.Headers)+len(kv)/2)
	for k, x := range p.Headers {
		h[k] = x
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i].(string)] = kv[i+1]
	}
	p.Headers = h
	b, err := p.Append(nil)
	if err != nil {
		return props
	}
	return b
}
