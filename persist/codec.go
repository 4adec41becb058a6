package persist

// Record values. Each starts with a format version byte (1), then fields in
// a fixed order: strings and byte strings as uvarint length + bytes, boolean
// flags packed into one byte. The message record ends with the body, which
// takes the rest of the value (no copy of the length needed).

import (
	"encoding/binary"
	"fmt"
)

const codecV1 = 1

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func flagsOf(bs ...bool) byte {
	var f byte
	for i, v := range bs {
		if v {
			f |= 1 << i
		}
	}
	return f
}

// reader decodes a value; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

func (r *reader) byte1() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail("short value")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.fail("bad length")
		return nil
	}
	s := r.b[k : k+int(n) : k+int(n)]
	r.b = r.b[k+int(n):]
	if len(s) == 0 {
		return nil
	}
	return s
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail("short value")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) version() {
	if v := r.byte1(); r.err == nil && v != codecV1 {
		r.fail(fmt.Sprintf("unknown version %d", v))
	}
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

func encodeExchange(x ExchangeRecord) []byte {
	b := make([]byte, 0, 8+len(x.VHost)+len(x.Name)+len(x.Kind)+len(x.Args))
	b = append(b, codecV1)
	b = appendString(b, x.VHost)
	b = appendString(b, x.Name)
	b = appendString(b, x.Kind)
	b = append(b, flagsOf(x.Durable, x.AutoDelete, x.Internal))
	return appendBytes(b, x.Args)
}

func decodeExchange(v []byte) (ExchangeRecord, error) {
	r := reader{b: v}
	r.version()
	var x ExchangeRecord
	x.VHost, x.Name, x.Kind = r.str(), r.str(), r.str()
	f := r.byte1()
	x.Durable, x.AutoDelete, x.Internal = f&1 != 0, f&2 != 0, f&4 != 0
	x.Args = r.bytes()
	return x, r.end()
}

func encodeQueue(q *QueueRecord) []byte {
	b := make([]byte, 0, 20+len(q.VHost)+len(q.Name)+len(q.Args))
	b = append(b, codecV1)
	b = binary.BigEndian.AppendUint64(b, q.ID)
	b = appendString(b, q.VHost)
	b = appendString(b, q.Name)
	b = append(b, flagsOf(q.Durable, q.Exclusive, q.AutoDelete))
	return appendBytes(b, q.Args)
}

func decodeQueue(v []byte) (QueueRecord, error) {
	r := reader{b: v}
	r.version()
	var q QueueRecord
	q.ID = r.u64()
	q.VHost, q.Name = r.str(), r.str()
	f := r.byte1()
	q.Durable, q.Exclusive, q.AutoDelete = f&1 != 0, f&2 != 0, f&4 != 0
	q.Args = r.bytes()
	return q, r.end()
}

func encodeBinding(x BindingRecord) []byte {
	b := make([]byte, 0, 8+len(x.VHost)+len(x.Source)+len(x.Destination)+len(x.RoutingKey)+len(x.Args))
	b = append(b, codecV1)
	b = appendString(b, x.VHost)
	b = appendString(b, x.Source)
	b = appendString(b, x.Destination)
	b = append(b, flagsOf(x.DestIsExchange))
	b = appendString(b, x.RoutingKey)
	return appendBytes(b, x.Args)
}

func decodeBinding(v []byte) (BindingRecord, error) {
	r := reader{b: v}
	r.version()
	var x BindingRecord
	x.VHost, x.Source, x.Destination = r.str(), r.str(), r.str()
	x.DestIsExchange = r.byte1()&1 != 0
	x.RoutingKey = r.str()
	x.Args = r.bytes()
	return x, r.end()
}

func messageSize(m *MessageRecord) int {
	return 1 + 3*binary.MaxVarintLen32 + len(m.Exchange) + len(m.RoutingKey) + len(m.Props) + len(m.Body)
}

func appendMessage(b []byte, m *MessageRecord) []byte {
	b = append(b, codecV1)
	b = appendString(b, m.Exchange)
	b = appendString(b, m.RoutingKey)
	b = appendBytes(b, m.Props)
	return append(b, m.Body...)
}

// decodeMessage decodes v; the result aliases v.
func decodeMessage(v []byte) (MessageRecord, error) {
	r := reader{b: v}
	r.version()
	var m MessageRecord
	m.Exchange, m.RoutingKey = r.str(), r.str()
	m.Props = r.bytes()
	if r.err != nil {
		return MessageRecord{}, r.err
	}
	if len(r.b) > 0 {
		m.Body = r.b
	}
	return m, nil
}
