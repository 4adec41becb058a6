// filter.go: stream filtering as RabbitMQ 3.13 has it over AMQP 0-9-1 (issue
// 13, section 1): a publisher tags a message with the x-stream-filter-value
// header; a consumer with x-stream-filter (a string or an array of strings)
// receives the messages tagged with one of them, and with
// x-stream-match-unfiltered also those without a tag. RabbitMQ filters by
// chunk with a Bloom filter and leaves the rest to the client; Warren
// filters each message exactly, on the broker.

package stream

import (
	"fmt"
	"slices"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// Filtering's header and consumer arguments.
const (
	HeaderFilterValue   = "x-stream-filter-value"
	ArgFilter           = "x-stream-filter"
	ArgMatchUnfiltered  = "x-stream-match-unfiltered"
	maxFilterValueBytes = 255
)

// filter is a consumer's x-stream-filter; nil passes everything.
type filter struct {
	values     []string
	unfiltered bool
}

// parseFilter reads a consumer's filter arguments: nil when it has none.
func parseFilter(args map[string]any) (*filter, error) {
	v, ok := args[ArgFilter]
	u, hasU := args[ArgMatchUnfiltered]
	if !ok {
		if hasU {
			if _, isBool := u.(bool); !isBool {
				return nil, &queue.ArgError{Arg: ArgMatchUnfiltered, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(u))}
			}
		}
		return nil, nil
	}
	f := &filter{}
	switch x := v.(type) {
	case string:
		f.values = []string{x}
	case []byte:
		f.values = []string{string(x)}
	case []any:
		for _, e := range x {
			switch s := e.(type) {
			case string:
				f.values = append(f.values, s)
			case []byte:
				f.values = append(f.values, string(s))
			default:
				return nil, &queue.ArgError{Arg: ArgFilter, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(e))}
			}
		}
	default:
		return nil, &queue.ArgError{Arg: ArgFilter, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
	}
	if hasU {
		b, isBool := u.(bool)
		if !isBool {
			return nil, &queue.ArgError{Arg: ArgMatchUnfiltered, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(u))}
		}
		f.unfiltered = b
	}
	return f, nil
}

// match says whether a record with the filter value value (has: it has
// one) passes f.
func (f *filter) match(value string, has bool) bool {
	if f == nil {
		return true
	}
	if !has {
		return f.unfiltered
	}
	return slices.Contains(f.values, value)
}

// Headers a stream reads of a published message.
var streamHeaders = []string{HeaderFilterValue, "x-stream-partition", "x-stream-partition-key"}

// publishHeaders are the headers of a message a stream acts on.
type publishHeaders struct {
	filter    string
	hasFilter bool
	partition any // x-stream-partition, nil when absent
	key       any // x-stream-partition-key, nil when absent
}

// noHeaders is the reading of a message without stream headers.
var noHeaders publishHeaders

// headersOf returns the stream headers of m: the reading CheckPublish
// kept in m.Parsed, else read now (from the broker's index of the
// properties, m.Headers, when it has one). keep stores the reading in m
// for a later Publish; without it, a reading with stream headers is made
// in into, so that it does not escape.
func headersOf(m *queue.Message, keep bool, into *publishHeaders) *publishHeaders {
	if h, ok := m.Parsed.(*publishHeaders); ok {
		return h
	}
	raw := m.Headers
	if !m.HeadersIndexed {
		idx, err := amqp.IndexProperties(m.Props)
		if err != nil {
			raw = nil
		} else {
			raw = idx.HeadersRaw(m.Props)
		}
	}
	h := &noHeaders
	if raw != nil {
		if keep {
			into = new(publishHeaders)
		}
		if readHeaders(raw, into) {
			h = into
		}
	}
	if keep {
		m.Parsed = h
	}
	return h
}

// readHeaders reads the stream headers of an encoded headers table into
// h, without decoding the rest of it, reporting whether it has any. A
// filter value that is not a string, or is longer than 255 bytes, is no
// filter value (RabbitMQ ignores it too).
func readHeaders(raw []byte, h *publishHeaders) bool {
	var vals [3]any
	if amqp.TableLookup(raw, streamHeaders, vals[:]) != nil {
		return false
	}
	switch v := vals[0].(type) {
	case string:
		h.filter, h.hasFilter = v, true
	case []byte:
		h.filter, h.hasFilter = string(v), true
	}
	if len(h.filter) > maxFilterValueBytes {
		h.filter, h.hasFilter = "", false
	}
	h.partition, h.key = vals[1], vals[2]
	return h.hasFilter || h.partition != nil || h.key != nil
}
