package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Table is an AMQP field table in RabbitMQ's dialect. Decoded values have
// these Go types, by wire tag:
//
//	t bool        b int8     B uint8    s int16    u uint16
//	I int32       i uint32   l int64    L uint64   f float32
//	d float64     D Decimal  S string   x []byte   A []any
//	T time.Time   F Table    V nil
//
// (RabbitMQ's dialect differs from the 0-9-1 spec's table: 's' is a signed
// short and 'U', 'L'-as-signed etc. are not used.)
//
// AppendTable additionally accepts int, int64, uint, uint64 and friends,
// map[string]any, and []Table-free nested values; see appendFieldValue.
type Table map[string]any

// Decimal is the 'D' field type: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// MaxTableDepth bounds the nesting of tables and arrays accepted by the
// decoder and the encoder.
const MaxTableDepth = 64

// AppendTable appends t as a length-prefixed field table. Keys are written
// in sorted order so the encoding is deterministic. A nil table encodes as
// an empty one.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	return appendTable(dst, t, 0)
}

func appendTable(dst []byte, t Table, depth int) ([]byte, error) {
	if depth > MaxTableDepth {
		return dst, fmt.Errorf("amqp: field table nested deeper than %d", MaxTableDepth)
	}
	orig := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	start := len(dst)
	var keysBuf [16]string
	keys := keysBuf[:0]
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		if dst, err = appendShortstr(dst, k); err != nil {
			return dst[:orig], fmt.Errorf("table key %.32q: %w", k, err)
		}
		if dst, err = appendFieldValue(dst, t[k], depth); err != nil {
			return dst[:orig], fmt.Errorf("table key %.32q: %w", k, err)
		}
	}
	n := len(dst) - start
	if uint64(n) > math.MaxUint32 {
		return dst[:orig], fmt.Errorf("field table of %d bytes: %w", n, ErrStringTooLong)
	}
	binary.BigEndian.PutUint32(dst[orig:], uint32(n))
	return dst, nil
}

func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	if depth > MaxTableDepth {
		return dst, fmt.Errorf("amqp: field array nested deeper than %d", MaxTableDepth)
	}
	orig := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	start := len(dst)
	var err error
	for i, v := range a {
		if dst, err = appendFieldValue(dst, v, depth); err != nil {
			return dst[:orig], fmt.Errorf("array index %d: %w", i, err)
		}
	}
	n := len(dst) - start
	if uint64(n) > math.MaxUint32 {
		return dst[:orig], fmt.Errorf("field array of %d bytes: %w", n, ErrStringTooLong)
	}
	binary.BigEndian.PutUint32(dst[orig:], uint32(n))
	return dst, nil
}

// appendFieldValue appends a tag and value. Integer types map to the
// smallest-surprise tag: int8 b, uint8 B, int16 s, uint16 u, int32 I,
// uint32 i, int64 l, uint64 L; int and uint use I when the value fits an
// int32 and l otherwise (uint above MaxInt64 uses L).
func appendFieldValue(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, 'V'), nil
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return append(dst, 't', b), nil
	case int8:
		return append(dst, 'b', byte(v)), nil
	case uint8:
		return append(dst, 'B', v), nil
	case int16:
		return appendU16(append(dst, 's'), uint16(v)), nil
	case uint16:
		return appendU16(append(dst, 'u'), v), nil
	case int32:
		return appendU32(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return appendU32(append(dst, 'i'), v), nil
	case int64:
		return appendU64(append(dst, 'l'), uint64(v)), nil
	case uint64:
		return appendU64(append(dst, 'L'), v), nil
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return appendU32(append(dst, 'I'), uint32(int32(v))), nil
		}
		return appendU64(append(dst, 'l'), uint64(int64(v))), nil
	case uint:
		if v <= math.MaxInt32 {
			return appendU32(append(dst, 'I'), uint32(v)), nil
		}
		if uint64(v) <= math.MaxInt64 {
			return appendU64(append(dst, 'l'), uint64(v)), nil
		}
		return appendU64(append(dst, 'L'), uint64(v)), nil
	case float32:
		return appendU32(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return appendU64(append(dst, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return appendU32(append(dst, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		return appendLongstr(append(dst, 'S'), v)
	case []byte:
		if uint64(len(v)) > math.MaxUint32 {
			return dst, fmt.Errorf("byte array of %d bytes: %w", len(v), ErrStringTooLong)
		}
		dst = appendU32(append(dst, 'x'), uint32(len(v)))
		return append(dst, v...), nil
	case []any:
		return appendArray(append(dst, 'A'), v, depth+1)
	case time.Time:
		return appendTimestamp(append(dst, 'T'), v), nil
	case Table:
		return appendTable(append(dst, 'F'), v, depth+1)
	case map[string]any:
		return appendTable(append(dst, 'F'), Table(v), depth+1)
	}
	return dst, fmt.Errorf("%T: %w", v, ErrUnsupportedValue)
}

// DecodeTable decodes a length-prefixed field table at the start of b and
// returns it with the number of bytes consumed. An empty table decodes as
// nil. Strings, byte arrays and nested tables are copies. Errors are *Error
// with code FrameError (truncation, an unknown type tag, nesting deeper than
// MaxTableDepth).
func DecodeTable(b []byte) (Table, int, error) {
	t, n, err := decodeTable(b)
	if err != nil {
		code := uint16(FrameError)
		if _, ok := err.(*badTagError); ok {
			code = codeBadFieldType
		}
		e := Errorf(code, 0, 0, "malformed field table: %v", err)
		e.Cause = err
		return nil, 0, e
	}
	return t, n, nil
}

func decodeTable(b []byte) (Table, int, error) {
	if len(b) < 4 {
		return nil, 0, errTableTruncated
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, errTableTruncated
	}
	t, err := decodeTableBody(b[4:4+n], 0)
	if err != nil {
		return nil, 0, err
	}
	return t, 4 + int(n), nil
}

var (
	errTableTruncated = &decodeError{"field table truncated"}
	errTableDepth     = &decodeError{"field table nested too deeply"}
)

type badTagError struct{ tag byte }

func (e *badTagError) Error() string { return fmt.Sprintf("unknown field value type %q", e.tag) }

func (e *badTagError) Unwrap() error { return ErrBadFieldType }

func decodeTableBody(b []byte, depth int) (Table, error) {
	if depth > MaxTableDepth {
		return nil, errTableDepth
	}
	var t Table
	for len(b) > 0 {
		kl := int(b[0])
		if len(b) < 1+kl {
			return nil, errTableTruncated
		}
		key := string(b[1 : 1+kl])
		b = b[1+kl:]
		v, rest, err := decodeFieldValue(b, depth)
		if err != nil {
			return nil, err
		}
		b = rest
		if t == nil {
			t = make(Table)
		}
		t[key] = v
	}
	return t, nil
}

func decodeArrayBody(b []byte, depth int) ([]any, error) {
	if depth > MaxTableDepth {
		return nil, errTableDepth
	}
	a := []any{}
	for len(b) > 0 {
		v, rest, err := decodeFieldValue(b, depth)
		if err != nil {
			return nil, err
		}
		b = rest
		a = append(a, v)
	}
	return a, nil
}

// decodeFieldValue decodes one tagged value from b and returns the rest.
func decodeFieldValue(b []byte, depth int) (any, []byte, error) {
	if len(b) < 1 {
		return nil, nil, errTableTruncated
	}
	tag := b[0]
	b = b[1:]
	need := func(n int) bool { return len(b) >= n }
	switch tag {
	case 't':
		if !need(1) {
			break
		}
		return b[0] != 0, b[1:], nil
	case 'b':
		if !need(1) {
			break
		}
		return int8(b[0]), b[1:], nil
	case 'B':
		if !need(1) {
			break
		}
		return b[0], b[1:], nil
	case 's':
		if !need(2) {
			break
		}
		return int16(binary.BigEndian.Uint16(b)), b[2:], nil
	case 'u':
		if !need(2) {
			break
		}
		return binary.BigEndian.Uint16(b), b[2:], nil
	case 'I':
		if !need(4) {
			break
		}
		return int32(binary.BigEndian.Uint32(b)), b[4:], nil
	case 'i':
		if !need(4) {
			break
		}
		return binary.BigEndian.Uint32(b), b[4:], nil
	case 'l':
		if !need(8) {
			break
		}
		return int64(binary.BigEndian.Uint64(b)), b[8:], nil
	case 'L':
		if !need(8) {
			break
		}
		return binary.BigEndian.Uint64(b), b[8:], nil
	case 'f':
		if !need(4) {
			break
		}
		return math.Float32frombits(binary.BigEndian.Uint32(b)), b[4:], nil
	case 'd':
		if !need(8) {
			break
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:], nil
	case 'D':
		if !need(5) {
			break
		}
		return Decimal{Scale: b[0], Value: int32(binary.BigEndian.Uint32(b[1:]))}, b[5:], nil
	case 'T':
		if !need(8) {
			break
		}
		return timeFromWire(binary.BigEndian.Uint64(b)), b[8:], nil
	case 'V':
		return nil, b, nil
	case 'S', 'x', 'A', 'F':
		if !need(4) {
			break
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			break
		}
		body, rest := b[4:4+n], b[4+n:]
		switch tag {
		case 'S':
			return string(body), rest, nil
		case 'x':
			return slices.Clone(body), rest, nil
		case 'A':
			a, err := decodeArrayBody(body, depth+1)
			return a, rest, err
		default:
			t, err := decodeTableBody(body, depth+1)
			if t == nil && err == nil {
				t = Table{}
			}
			return t, rest, err
		}
	default:
		return nil, nil, &badTagError{tag}
	}
	return nil, nil, errTableTruncated
}

// validateTableBody checks a table body (after its length) the way
// decodeTableBody would, without allocating.
func validateTableBody(b []byte, depth int) error {
	if depth > MaxTableDepth {
		return errTableDepth
	}
	for len(b) > 0 {
		kl := int(b[0])
		if len(b) < 1+kl {
			return errTableTruncated
		}
		rest, err := skipFieldValue(b[1+kl:], depth)
		if err != nil {
			return err
		}
		b = rest
	}
	return nil
}

// skipFieldValue validates one tagged value and returns the bytes after it.
func skipFieldValue(b []byte, depth int) ([]byte, error) {
	if len(b) < 1 {
		return nil, errTableTruncated
	}
	tag := b[0]
	b = b[1:]
	var n int
	switch tag {
	case 'V':
		return b, nil
	case 't', 'b', 'B':
		n = 1
	case 's', 'u':
		n = 2
	case 'I', 'i', 'f':
		n = 4
	case 'D':
		n = 5
	case 'l', 'L', 'd', 'T':
		n = 8
	case 'S', 'x', 'A', 'F':
		if len(b) < 4 {
			return nil, errTableTruncated
		}
		l := binary.BigEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return nil, errTableTruncated
		}
		body, rest := b[4:4+l], b[4+l:]
		switch tag {
		case 'A':
			if depth+1 > MaxTableDepth {
				return nil, errTableDepth
			}
			for len(body) > 0 {
				var err error
				if body, err = skipFieldValue(body, depth+1); err != nil {
					return nil, err
				}
			}
		case 'F':
			if err := validateTableBody(body, depth+1); err != nil {
				return nil, err
			}
		}
		return rest, nil
	default:
		return nil, &badTagError{tag}
	}
	if len(b) < n {
		return nil, errTableTruncated
	}
	return b[n:], nil
}

// FieldTypeName returns RabbitMQ's name for the field-table type of a
// decoded value, as its error texts spell it ("longstr", "signedint", ...).
func FieldTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int, uint64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case time.Time:
		return "timestamp"
	case []any:
		return "array"
	case Table, map[string]any:
		return "table"
	case Decimal:
		return "decimal"
	}
	return fmt.Sprintf("%T", v)
}

// TableLookup decodes the values of keys in the length-prefixed field table
// at the start of b, stepping over the other fields without decoding them:
// vals[i] becomes keys[i]'s value (the last one when a key repeats; nil
// when absent, as for a void value). vals must be as long as keys. It is
// how a queue reads a few headers of a message without decoding its
// whole table.
func TableLookup(b []byte, keys []string, vals []any) error {
	clear(vals)
	if len(b) < 4 {
		return errTableTruncated
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return errTableTruncated
	}
	b = b[4 : 4+n]
	for len(b) > 0 {
		kl := int(b[0])
		if len(b) < 1+kl {
			return errTableTruncated
		}
		key := b[1 : 1+kl]
		b = b[1+kl:]
		i := slices.IndexFunc(keys, func(k string) bool { return k == string(key) })
		var err error
		if i < 0 {
			b, err = skipFieldValue(b, 0)
		} else {
			vals[i], b, err = decodeFieldValue(b, 0)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
