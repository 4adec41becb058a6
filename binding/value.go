package binding

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// ValueEqual reports whether two field-table values are equal the way
// RabbitMQ's headers exchange compares a binding argument with a message
// header (Erlang's == on the decoded values, with the field types dropped):
//
//   - all integer types and timestamps compare by numeric value
//     (int32(1) == int64(1) == uint8(1) == time.Unix(1, 0));
//   - integers and floats compare numerically and exactly (int32(1) ==
//     float64(1.0), but float32(0.1) != float64(0.1));
//   - string and []byte compare by bytes (both are Erlang binaries);
//   - bool only equals bool; nil (void) only equals nil;
//   - decimals are equal only with the same scale and unscaled value;
//   - arrays and nested tables compare element by element *with* their types
//     (there the type tags are part of the Erlang terms): [int32(1)] !=
//     [int64(1)], ["x"] != [[]byte("x")].
//
// Deviation: RabbitMQ keeps nested tables as ordered lists, so two nested
// tables with the same entries in a different wire order differ there; a Go map
// has no order, so here they are equal.
func ValueEqual(a, b any) bool {
	if x, ok := a.(string); ok { // the common case first
		switch y := b.(type) {
		case string:
			return x == y
		case []byte:
			return x == string(y)
		}
		return false
	}
	if na, ok := numOf(a); ok {
		nb, ok := numOf(b)
		return ok && na.equal(nb)
	}
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case []byte:
			return x == string(y)
		}
		return false
	case []byte:
		switch y := b.(type) {
		case string:
			return string(x) == y
		case []byte:
			return bytes.Equal(x, y)
		}
		return false
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return TypedEqual(a, b)
}

// TypedEqual reports whether a and b have the same field type and equal
// values; it is how values inside arrays and nested tables compare, and how
// binding arguments compare for binding identity.
func TypedEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int8:
		y, ok := b.(int8)
		return ok && x == y
	case uint8:
		y, ok := b.(uint8)
		return ok && x == y
	case int16:
		y, ok := b.(int16)
		return ok && x == y
	case uint16:
		y, ok := b.(uint16)
		return ok && x == y
	case int32:
		y, ok := b.(int32)
		return ok && x == y
	case uint32:
		y, ok := b.(uint32)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case uint64:
		y, ok := b.(uint64)
		return ok && x == y
	case int:
		y, ok := b.(int)
		return ok && x == y
	case float32:
		y, ok := b.(float32)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Unix() == y.Unix()
	case []any:
		y, ok := b.([]any)
		if !ok {
			return reflectTypedEqual(a, b)
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !TypedEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return reflectTypedEqual(a, b)
		}
		return ArgsEqual(x, y)
	}
	return reflectTypedEqual(a, b)
}

// reflectTypedEqual handles types the codec may define itself (a named
// table or array type, a decimal struct).
func reflectTypedEqual(a, b any) bool {
	if b == nil {
		return false
	}
	if ma, ok := asTable(a); ok {
		mb, ok := asTable(b)
		return ok && ArgsEqual(ma, mb)
	}
	if sa, ok := asArray(a); ok {
		sb, ok := asArray(b)
		if !ok || len(sa) != len(sb) {
			return false
		}
		for i := range sa {
			if !TypedEqual(sa[i], sb[i]) {
				return false
			}
		}
		return true
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb || !ta.Comparable() {
		return false
	}
	return a == b
}

// asTable converts a map[string]any or a named map type with string keys and
// interface values into a map[string]any without copying when possible.
func asTable(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String ||
		rv.Type().Elem().Kind() != reflect.Interface {
		return nil, false
	}
	if rv.Type().ConvertibleTo(tableType) {
		return rv.Convert(tableType).Interface().(map[string]any), true
	}
	return nil, false
}

var (
	tableType = reflect.TypeFor[map[string]any]()
	arrayType = reflect.TypeFor[[]any]()
)

func asArray(v any) ([]any, bool) {
	if s, ok := v.([]any); ok {
		return s, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || !rv.Type().ConvertibleTo(arrayType) {
		return nil, false
	}
	return rv.Convert(arrayType).Interface().([]any), true
}

// ArgsEqual reports whether two tables have the same keys and TypedEqual
// values. nil and empty tables are equal.
func ArgsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !TypedEqual(va, vb) {
			return false
		}
	}
	return true
}

// num is a numeric field value: an integer (as int64, or as uint64 when it
// does not fit) or a float.
type num struct {
	kind uint8 // numInt, numUint, numFloat
	i    int64
	u    uint64
	f    float64
}

const (
	numInt = iota
	numUint
	numFloat
)

func numOf(v any) (num, bool) {
	switch x := v.(type) {
	case int8:
		return num{kind: numInt, i: int64(x)}, true
	case uint8:
		return num{kind: numInt, i: int64(x)}, true
	case int16:
		return num{kind: numInt, i: int64(x)}, true
	case uint16:
		return num{kind: numInt, i: int64(x)}, true
	case int32:
		return num{kind: numInt, i: int64(x)}, true
	case uint32:
		return num{kind: numInt, i: int64(x)}, true
	case int64:
		return num{kind: numInt, i: x}, true
	case int:
		return num{kind: numInt, i: int64(x)}, true
	case uint64:
		if x > math.MaxInt64 {
			return num{kind: numUint, u: x}, true
		}
		return num{kind: numInt, i: int64(x)}, true
	case float32:
		return num{kind: numFloat, f: float64(x)}, true
	case float64:
		return num{kind: numFloat, f: x}, true
	case time.Time:
		// A timestamp is decoded by RabbitMQ as an integer of seconds.
		return num{kind: numInt, i: x.Unix()}, true
	}
	return num{}, false
}

func (a num) equal(b num) bool {
	if a.kind == numFloat && b.kind == numFloat {
		return a.f == b.f
	}
	if a.kind == numFloat {
		a, b = b, a
	}
	// a is an integer.
	if b.kind == numFloat {
		return floatEqualsInt(b.f, a)
	}
	if a.kind != b.kind {
		return false // one is > MaxInt64, the other is not
	}
	if a.kind == numUint {
		return a.u == b.u
	}
	return a.i == b.i
}

// floatEqualsInt compares exactly, as Erlang does for 1 == 1.0.
func floatEqualsInt(f float64, n num) bool {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	if n.kind == numUint {
		// n.u is in (MaxInt64, MaxUint64]; float64(2^64) is out of range.
		if f < 9223372036854775808.0 || f >= 18446744073709551616.0 {
			return false
		}
		return uint64(f) == n.u
	}
	if f < -9223372036854775808.0 || f >= 9223372036854775808.0 {
		return false
	}
	return int64(f) == n.i
}

// TypeName returns RabbitMQ's name for the field type of v, as it appears in
// error texts ("longstr", "signedint", ...).
func TypeName(v any) string {
	if name := amqp.FieldTypeName(v); name != fmt.Sprintf("%T", v) {
		return name
	}
	if _, ok := asTable(v); ok {
		return "table"
	}
	if _, ok := asArray(v); ok {
		return "array"
	}
	if strings.Contains(strings.ToLower(reflect.TypeOf(v).Name()), "decimal") {
		return "decimal"
	}
	return reflect.TypeOf(v).String()
}

// ErlangTerm formats v roughly as Erlang's ~tp prints the decoded value in
// RabbitMQ's error texts: binaries as <<"...">>, numbers and atoms plainly.
func ErlangTerm(v any) string {
	switch x := v.(type) {
	case nil:
		return "undefined"
	case string:
		return `<<"` + erlEscape(x) + `">>`
	case []byte:
		return `<<"` + erlEscape(string(x)) + `">>`
	case bool:
		return strconv.FormatBool(x)
	case float32:
		return erlFloat(float64(x))
	case float64:
		return erlFloat(x)
	case time.Time:
		return strconv.FormatInt(x.Unix(), 10)
	}
	if n, ok := numOf(v); ok {
		if n.kind == numUint {
			return strconv.FormatUint(n.u, 10)
		}
		return strconv.FormatInt(n.i, 10)
	}
	return fmt.Sprint(v)
}

// erlFloat formats like Erlang: always a fraction, "1.0", "1.5e20".
func erlFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.ContainsAny(mant, ".NI") {
		mant += ".0"
	}
	if !hasExp {
		return mant
	}
	return mant + "e" + strings.TrimPrefix(exp, "+")
}

func erlEscape(s string) string {
	if !strings.ContainsAny(s, `"\`) {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}
