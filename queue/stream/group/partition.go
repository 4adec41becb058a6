// partition.go: which partition of a partitioned stream a published
// message goes to (issue 13, section 2): MurmurHash3 x86_32 with RabbitMQ's
// super-stream seed, the key of a header value, the round-robin counter of a
// publishing channel, and the precedence of the rules.

package group

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Headers and arguments of partitioned streams. The names are part of
// Warren's interface.
const (
	// HeaderPartition is the publisher's explicit partition (an integer), and
	// the partition of a delivery.
	HeaderPartition = "x-stream-partition"
	// HeaderPartitionKey is the publisher's partition key (a string, or a
	// number hashed as its decimal text).
	HeaderPartitionKey = "x-stream-partition-key"
	// ArgPartitions is the declare argument with the partition count.
	ArgPartitions = "x-stream-partitions"
	// ArgPartitionBy is the declare argument that, set to "routing-key",
	// hashes the routing key of a message that names no partition or key.
	ArgPartitionBy = "x-stream-partition-by"
)

// MaxPartitions is the largest x-stream-partitions a stream accepts.
const MaxPartitions = 1024

// Seed is the MurmurHash3 seed RabbitMQ's stream clients (Java, Go, .NET,
// Python) use to route a super stream's messages by key; using it here
// makes a key land on the same partition number whichever client computes
// it.
const Seed uint32 = 104729

// Murmur3 is MurmurHash3 x86_32 (Austin Appleby's, as in SMHasher) of data
// with seed. It takes a string or a byte slice, so hashing a string does not
// copy it.
func Murmur3[T ~string | ~[]byte](data T, seed uint32) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	n := len(data)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n - i {
	case 3:
		k ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[i])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// KeyPartition is the partition of key among n (n >= 1): its hash with
// Seed modulo n, both unsigned (Java's Integer.remainderUnsigned).
func KeyPartition[T ~string | ~[]byte](key T, n int) int {
	return int(Murmur3(key, Seed) % uint32(n))
}

// PartitionError is a published message whose partition headers cannot be
// honoured. The broker closes the publishing channel with 406
// PRECONDITION_FAILED and this text: a message is never routed to a
// partition it did not ask for.
type PartitionError struct {
	Header string // HeaderPartition or HeaderPartitionKey
	Reason string
}

func (e *PartitionError) Error() string {
	return fmt.Sprintf("invalid header '%s': %s", e.Header, e.Reason)
}

// KeyText is the text a partition key header value is hashed as: a string
// or byte array as it is, an integer of any width as its decimal text (so
// 42 sent as a long and "42" sent as a string land together). Other types
// (floats, decimals, booleans, tables, timestamps) have no text every client
// library would agree on and are refused.
func KeyText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	}
	if n, ok := queue.IntValue(v); ok {
		return strconv.FormatInt(n, 10), nil
	}
	return "", &PartitionError{HeaderPartitionKey, fmt.Sprintf("expected a string or an integer, got %s", amqp.FieldTypeName(v))}
}

// RoundRobin spreads a publishing channel's messages that name no partition
// over the partitions in turn. The zero value starts at partition 0. It is
// not safe for concurrent use: it belongs to one channel, used from that
// channel's goroutine.
type RoundRobin struct {
	n uint64
}

// Next is the partition (of parts >= 1) for the channel's next unkeyed
// message. One counter serves every stream the channel publishes to; each
// stream still sees its partitions in turn when it is the only one, and an
// even spread over time otherwise.
func (r *RoundRobin) Next(parts int) int {
	p := int(r.n % uint64(parts))
	r.n++
	return p
}

// Router is a partitioned stream's routing configuration, fixed at declare.
type Router struct {
	Partitions   int  // 1..MaxPartitions
	ByRoutingKey bool // x-stream-partition-by: routing-key
}

// ErrNoPartitions is a Router with a partition count below 1.
var ErrNoPartitions = errors.New("group: stream has no partitions")

// Route is the partition of a published message with the given headers
// and routing key, by the first rule of issue 13 that applies:
//  1. header x-stream-partition (an integer in [0, Partitions); any other
//     value is a *PartitionError);
//  2. header x-stream-partition-key, hashed (see KeyText, KeyPartition);
//  3. the routing key, hashed the same way, when ByRoutingKey;
//  4. rr.Next, the publishing channel's round robin (rr is advanced only
//     when this rule is used).
//
// A header present with a void value counts as absent.
func (r Router) Route(headers map[string]any, routingKey string, rr *RoundRobin) (int, error) {
	return r.RouteValues(headers[HeaderPartition], headers[HeaderPartitionKey], routingKey, rr)
}

// RouteValues is Route given the two headers' values (nil when absent or
// void), for a caller that read them without decoding the whole table.
func (r Router) RouteValues(partition, key any, routingKey string, rr *RoundRobin) (int, error) {
	if r.Partitions < 1 {
		return 0, ErrNoPartitions
	}
	if v := partition; v != nil {
		n, isInt := queue.IntValue(v)
		if !isInt {
			if x, big := v.(uint64); big {
				return 0, &PartitionError{HeaderPartition, fmt.Sprintf("partition %d out of range: the stream has %d partitions (0..%d)", x, r.Partitions, r.Partitions-1)}
			}
			return 0, &PartitionError{HeaderPartition, fmt.Sprintf("expected an integer, got %s", amqp.FieldTypeName(v))}
		}
		if n < 0 || n >= int64(r.Partitions) {
			return 0, &PartitionError{HeaderPartition, fmt.Sprintf("partition %d out of range: the stream has %d partitions (0..%d)", n, r.Partitions, r.Partitions-1)}
		}
		return int(n), nil
	}
	if v := key; v != nil {
		key, err := KeyText(v)
		if err != nil {
			return 0, err
		}
		return KeyPartition(key, r.Partitions), nil
	}
	if r.ByRoutingKey {
		return KeyPartition(routingKey, r.Partitions), nil
	}
	return rr.Next(r.Partitions), nil
}
