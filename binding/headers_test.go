package binding

import (
	"errors"
	"testing"
	"time"
)

// decimal stands in for the codec's decimal struct.
type decimal struct {
	Scale uint8
	Value int32
}

// table stands in for the codec's named table type (amqp.Table).
type table map[string]any

// rabbitHeadersCases were each run against a headers exchange of RabbitMQ
// 3.10.8 (one binding with args, one message with hdrs).
var rabbitHeadersCases = []struct {
	name       string
	args, hdrs map[string]any
	want       bool
}{
	{"int vs long", map[string]any{"a": int32(1)}, map[string]any{"a": int64(1)}, true},
	{"int vs double", map[string]any{"a": int32(1)}, map[string]any{"a": float64(1)}, true},
	{"int vs float", map[string]any{"a": int32(1)}, map[string]any{"a": float32(1)}, true},
	{"float vs double exact", map[string]any{"a": float32(1.5)}, map[string]any{"a": float64(1.5)}, true},
	{"float vs double inexact", map[string]any{"a": float32(0.1)}, map[string]any{"a": float64(0.1)}, false},
	{"int vs bool", map[string]any{"a": int32(1)}, map[string]any{"a": true}, false},
	{"longstr vs binary", map[string]any{"a": "x"}, map[string]any{"a": []byte("x")}, true},
	{"void means present", map[string]any{"a": nil}, map[string]any{"a": "anything"}, true},
	{"void absent", map[string]any{"a": nil}, map[string]any{"b": "anything"}, false},
	{"void vs void", map[string]any{"a": nil}, map[string]any{"a": nil}, true},
	{"str vs void", map[string]any{"a": "x"}, map[string]any{"a": nil}, false},
	{"long vs timestamp", map[string]any{"a": int64(5)}, map[string]any{"a": time.Unix(5, 0)}, true},
	{"array int vs long", map[string]any{"a": []any{int32(1)}}, map[string]any{"a": []any{int64(1)}}, false},
	{"array same", map[string]any{"a": []any{int32(1)}}, map[string]any{"a": []any{int32(1)}}, true},
	{"array str vs bin", map[string]any{"a": []any{"x"}}, map[string]any{"a": []any{[]byte("x")}}, false},
	{"table int vs long", map[string]any{"a": map[string]any{"b": int32(1)}}, map[string]any{"a": map[string]any{"b": int64(1)}}, false},
	{"table same", map[string]any{"a": map[string]any{"b": int32(1)}}, map[string]any{"a": map[string]any{"b": int32(1)}}, true},
	{"named table same", map[string]any{"a": table{"b": int32(1)}}, map[string]any{"a": table{"b": int32(1)}}, true},
	{"named table vs map", map[string]any{"a": table{"b": int32(1)}}, map[string]any{"a": map[string]any{"b": int32(1)}}, true},
	{"decimal scale differs", map[string]any{"a": decimal{1, 10}}, map[string]any{"a": decimal{0, 1}}, false},
	{"decimal same", map[string]any{"a": decimal{1, 10}}, map[string]any{"a": decimal{1, 10}}, true},
	{"decimal vs int", map[string]any{"a": decimal{0, 1}}, map[string]any{"a": int32(1)}, false},
	{"empty all", map[string]any{}, map[string]any{}, true},
	{"empty any", map[string]any{"x-match": "any"}, map[string]any{}, false},
	{"x- ignored in all", map[string]any{"x-match": "all", "x-foo": "1"}, map[string]any{}, true},
	{"x- matched in all-with-x", map[string]any{"x-match": "all-with-x", "x-foo": "1"}, map[string]any{}, false},
	{"x- matched in all-with-x ok", map[string]any{"x-match": "all-with-x", "x-foo": "1"}, map[string]any{"x-foo": "1"}, true},
	{"any-with-x", map[string]any{"x-match": "any-with-x", "x-foo": "1", "a": "2"}, map[string]any{"x-foo": "1"}, true},
	{"x-match itself never matched", map[string]any{"x-match": "any-with-x"}, map[string]any{"x-match": "any-with-x"}, false},
	{"all-with-x empty", map[string]any{"x-match": "all-with-x"}, map[string]any{}, true},
	{"any one of two", map[string]any{"x-match": "any", "a": "1", "b": "2"}, map[string]any{"b": "2"}, true},
	{"all one of two", map[string]any{"x-match": "all", "a": "1", "b": "2"}, map[string]any{"b": "2"}, false},
	{"x- ignored in any", map[string]any{"x-match": "any", "x-a": "1"}, map[string]any{"x-a": "1"}, false},
	{"byte -1 vs ubyte 255", map[string]any{"a": int8(-1)}, map[string]any{"a": uint8(255)}, false},
	{"2^53 long vs double", map[string]any{"a": int64(1) << 53}, map[string]any{"a": float64(1 << 53)}, true},
	{"2^53+1 long vs double", map[string]any{"a": int64(1)<<53 + 1}, map[string]any{"a": float64(1 << 53)}, false},
	{"false vs 0", map[string]any{"a": false}, map[string]any{"a": int32(0)}, false},
	{"empty str vs void", map[string]any{"a": ""}, map[string]any{"a": nil}, false},
}

func TestHeadersMatchesRabbitMQ(t *testing.T) {
	for _, tc := range rabbitHeadersCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateHeadersArgs(tc.args); err != nil {
				t.Fatal(err)
			}
			m := NewHeaders()
			m.Add(Binding{Dest: q("q"), Args: tc.args})
			if got := len(m.Match("ignored", tc.hdrs, nil)) == 1; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHeadersMoreRules(t *testing.T) {
	tests := []struct {
		name       string
		args, hdrs map[string]any
		want       bool
	}{
		{"nil headers all", map[string]any{"a": "1"}, nil, false},
		{"nil headers empty all", nil, nil, true},
		{"extra headers ok", map[string]any{"a": "1"}, map[string]any{"a": "1", "b": "2"}, true},
		{"uint64 huge vs double", map[string]any{"a": uint64(1 << 63)}, map[string]any{"a": float64(1 << 63)}, true},
		{"uint64 huge vs long", map[string]any{"a": uint64(1 << 63)}, map[string]any{"a": int64(-1 << 63)}, false},
		{"half vs int", map[string]any{"a": float64(1.5)}, map[string]any{"a": int32(1)}, false},
		{"any with void", map[string]any{"x-match": "any", "a": nil, "b": "z"}, map[string]any{"a": int8(0)}, true},
		{"all-with-x void x", map[string]any{"x-match": "all-with-x", "x-a": nil}, map[string]any{"x-a": "v"}, true},
		{"nested array of tables", map[string]any{"a": []any{map[string]any{"k": "v"}}}, map[string]any{"a": []any{map[string]any{"k": "v"}}}, true},
		{"array length", map[string]any{"a": []any{"v"}}, map[string]any{"a": []any{"v", "v"}}, false},
		{"timestamp vs timestamp", map[string]any{"a": time.Unix(7, 0)}, map[string]any{"a": time.Unix(7, 0).In(time.FixedZone("x", 3600))}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewHeaders()
			m.Add(Binding{Dest: q("q"), Args: tc.args})
			if got := len(m.Match("", tc.hdrs, nil)) == 1; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateHeadersArgs(t *testing.T) {
	// Texts as RabbitMQ 3.10.8 sent them after "PRECONDITION_FAILED - ".
	tests := []struct {
		v    any
		want string
	}{
		{"foo", `Invalid x-match field value <<"foo">>; expected all, any, all-with-x, or any-with-x`},
		{"ALL", `Invalid x-match field value <<"ALL">>; expected all, any, all-with-x, or any-with-x`},
		{int32(1), `Invalid x-match field type signedint (value 1); expected longstr`},
		{[]byte("all"), `Invalid x-match field type binary (value <<"all">>); expected longstr`},
	}
	for _, tt := range tests {
		err := ValidateHeadersArgs(map[string]any{"x-match": tt.v})
		var he *HeadersArgsError
		if !errors.As(err, &he) {
			t.Fatalf("%v: err = %v", tt.v, err)
		}
		if err.Error() != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.v, err, tt.want)
		}
	}
	for _, ok := range []map[string]any{nil, {}, {"x-match": "all"}, {"x-match": "any"},
		{"x-match": "all-with-x"}, {"x-match": "any-with-x"}, {"other": 1}} {
		if err := ValidateHeadersArgs(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

func TestHeadersIdentityAndDedup(t *testing.T) {
	m := NewHeaders()
	a1 := map[string]any{"a": int32(1)}
	a2 := map[string]any{"a": int64(1)} // a different binding: types differ
	if !m.Add(Binding{Dest: q("q"), Args: a1}) || !m.Add(Binding{Dest: q("q"), Args: a2}) {
		t.Fatal("Add = false")
	}
	if m.Add(Binding{Dest: q("q"), Args: map[string]any{"a": int32(1)}}) {
		t.Fatal("duplicate Add = true")
	}
	if !m.Add(Binding{Dest: q("q"), Key: "k", Args: a1}) {
		t.Fatal("Add with another key = false")
	}
	got := m.Match("", map[string]any{"a": uint8(1)}, nil)
	if len(got) != 1 {
		t.Fatalf("Match = %v, want q once", got)
	}
	a1["a"] = "mutated" // the matcher kept its own copy
	if got := m.Match("", map[string]any{"a": uint8(1)}, nil); len(got) != 1 {
		t.Fatalf("after caller mutation Match = %v", got)
	}
	if !m.Remove(Binding{Dest: q("q"), Args: map[string]any{"a": int32(1)}}) {
		t.Fatal("Remove = false")
	}
	if m.Len() != 2 {
		t.Fatalf("Len = %d", m.Len())
	}
	if n := m.RemoveDest(q("q")); n != 2 || m.Len() != 0 || len(m.bindings) != 0 {
		t.Fatalf("RemoveDest = %d, Len %d, %d compiled", n, m.Len(), len(m.bindings))
	}
}
