package amqp

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

// goldenTable holds every field type of RabbitMQ's dialect, keys sorted.
const goldenTable = `
00000093                                   // table size 147
01 41 41 00000008 74 01 49 00000001 56     // "A": A [t true, I 1, V]
01 42 42 ff                                // "B": B 255
01 44 44 02 fffffed4                       // "D": D scale 2, -300
01 46 46 00000008 01 6e 53 00000001 76     // "F": F {"n": S "v"}
01 49 49 80000000                          // "I": I -2147483648
01 4c 4c ffffffffffffffff                  // "L": L 2^64-1
01 53 53 00000003 616263                   // "S": S "abc"
01 54 54 0000000065a0bc00                  // "T": T 2024-01-12 04:20:48 UTC
01 56 56                                   // "V": V
01 62 62 80                                // "b": b -128
01 64 64 400921fb54442d18                  // "d": d pi
01 66 66 3fc00000                          // "f": f 1.5
01 69 69 ffffffff                          // "i": i 2^32-1
01 6c 6c 8000000000000000                  // "l": l -2^63
01 73 73 8000                              // "s": s -32768
01 74 74 00                                // "t": t false
01 75 75 ffff                              // "u": u 65535
01 78 78 00000002 00ff                     // "x": x [0x00 0xff]
`

func goldenTableValue() Table {
	return Table{
		"A": []any{true, int32(1), nil},
		"B": uint8(255),
		"D": Decimal{Scale: 2, Value: -300},
		"F": Table{"n": "v"},
		"I": int32(math.MinInt32),
		"L": uint64(math.MaxUint64),
		"S": "abc",
		"T": time.Unix(0x65a0bc00, 0).UTC(),
		"V": nil,
		"b": int8(-128),
		"d": math.Pi,
		"f": float32(1.5),
		"i": uint32(math.MaxUint32),
		"l": int64(math.MinInt64),
		"s": int16(math.MinInt16),
		"t": false,
		"u": uint16(65535),
		"x": []byte{0, 0xff},
	}
}

func TestTableGolden(t *testing.T) {
	want := unhex(t, goldenTable)
	got, err := AppendTable(nil, goldenTableValue())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n got %x\nwant %x", got, want)
	}
	tab, n, err := DecodeTable(append(want, 0xAA)) // trailing byte is not consumed
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("consumed %d, want %d", n, len(want))
	}
	if !reflect.DeepEqual(tab, goldenTableValue()) {
		t.Fatalf("decode:\n got %#v\nwant %#v", tab, goldenTableValue())
	}
}

func TestTableEncodeGoTypes(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want any
	}{
		{int(7), int32(7)},
		{int(-1 << 40), int64(-1 << 40)},
		{uint(7), int32(7)},
		{uint(1 << 40), int64(1 << 40)},
		{uint(math.MaxUint64), uint64(math.MaxUint64)},
		{map[string]any{"a": "b"}, Table{"a": "b"}},
		{Table{}, Table{}},
		{[]any{}, []any{}},
		{[]byte{}, []byte{}},
		{time.Time{}, time.Unix(0, 0).UTC()},
	} {
		b, err := AppendTable(nil, Table{"k": tc.in})
		if err != nil {
			t.Fatalf("%T: %v", tc.in, err)
		}
		got, _, err := DecodeTable(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got["k"], tc.want) {
			t.Errorf("%T %v: decoded %#v, want %#v", tc.in, tc.in, got["k"], tc.want)
		}
	}
	if _, err := AppendTable(nil, Table{"k": complex(1, 2)}); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("complex: err = %v", err)
	}
	if b, err := AppendTable(nil, nil); err != nil || !bytes.Equal(b, []byte{0, 0, 0, 0}) {
		t.Errorf("nil table: %x, %v", b, err)
	}
	if tab, n, err := DecodeTable([]byte{0, 0, 0, 0}); tab != nil || n != 4 || err != nil {
		t.Errorf("empty table: %v %d %v", tab, n, err)
	}
}

func TestTableDeterministic(t *testing.T) {
	tab := Table{}
	for _, k := range []string{"z", "a", "m", "b", "y", "c", "x", "d", "w", "e", "v", "f", "u", "g", "t", "h", "s", "i"} {
		tab[k] = k
	}
	first, _ := AppendTable(nil, tab)
	for i := 0; i < 20; i++ {
		again, _ := AppendTable(nil, tab)
		if !bytes.Equal(first, again) {
			t.Fatal("encoding depends on map order")
		}
	}
}

func nested(depth int) []byte {
	// depth nested F tables: {"a": {"a": ... {}}}
	inner := []byte{0, 0, 0, 0}
	for i := 0; i < depth; i++ {
		body := append([]byte{1, 'a', 'F'}, inner...)
		inner = append([]byte{byte(len(body) >> 24), byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	}
	return inner
}

func TestTableDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"short length", []byte{0, 0, 0}},
		{"length overrun", []byte{0, 0, 0, 5, 1, 'a', 'V'}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}},
		{"key overrun", []byte{0, 0, 0, 2, 5, 'a'}},
		{"missing tag", []byte{0, 0, 0, 2, 1, 'a'}},
		{"unknown tag", []byte{0, 0, 0, 3, 1, 'a', 'Z'}},
		{"short int", []byte{0, 0, 0, 5, 1, 'a', 'I', 0, 0}},
		{"string overrun", []byte{0, 0, 0, 8, 1, 'a', 'S', 0xff, 0xff, 0xff, 0xff, 0}},
		{"array element truncated", []byte{0, 0, 0, 9, 1, 'a', 'A', 0, 0, 0, 2, 's', 0}},
		{"too deep", nested(MaxTableDepth + 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeTable(tc.in)
			wantCode(t, err, FrameError)
		})
	}
	if _, _, err := DecodeTable([]byte{0, 0, 0, 3, 1, 'a', 'Z'}); !errors.Is(err, ErrBadFieldType) {
		t.Fatalf("unknown tag: %v does not wrap ErrBadFieldType", err)
	}
	if _, err := DecodeProperties([]byte{0x20, 0, 0, 0, 0, 3, 1, 'a', 'Z'}); !errors.Is(err, ErrBadFieldType) {
		t.Fatalf("unknown tag in headers: %v does not wrap ErrBadFieldType", err)
	}
	if _, _, err := DecodeTable(nested(MaxTableDepth)); err != nil {
		t.Fatalf("depth %d should decode: %v", MaxTableDepth, err)
	}
	deep := Table{}
	cur := deep
	for i := 0; i < MaxTableDepth+2; i++ {
		next := Table{}
		cur["a"] = next
		cur = next
	}
	if _, err := AppendTable(nil, deep); err == nil {
		t.Fatal("encoding an overly deep table should fail")
	}
}

func TestTableDecodeCopies(t *testing.T) {
	in, _ := AppendTable(nil, Table{"s": "str", "x": []byte("bytes"), "k": Table{"in": "ner"}})
	tab, _, err := DecodeTable(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'X'
	}
	want := Table{"s": "str", "x": []byte("bytes"), "k": Table{"in": "ner"}}
	if !reflect.DeepEqual(tab, want) {
		t.Fatalf("decoded table aliases input: %#v", tab)
	}
}

func TestTableLookup(t *testing.T) {
	b, err := AppendTable(nil, Table{"a": int32(1), "b": "two", "c": Table{"x": true}, "d": []any{"q"}, "v": nil})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"b", "missing", "a", "d", "v"}
	vals := make([]any, len(keys))
	if err := TableLookup(b, keys, vals); err != nil {
		t.Fatal(err)
	}
	want := []any{"two", nil, int32(1), []any{"q"}, nil}
	if !reflect.DeepEqual(vals, want) {
		t.Fatalf("TableLookup = %#v, want %#v", vals, want)
	}
	for i := 1; i < len(b); i++ {
		if err := TableLookup(b[:i], keys, vals); err == nil {
			t.Fatalf("a table cut at %d of %d bytes was read", i, len(b))
		}
	}
}
