package exchange

import (
	"errors"
	"testing"

	"github.com/warrenmq/warren/binding"
)

func TestParseKind(t *testing.T) {
	for _, k := range []Kind{Direct, Fanout, Topic, Headers} {
		got, ok := ParseKind(k.String())
		if !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, ok)
		}
	}
	for _, s := range []string{"", "foo", "Direct", "x-consistent-hash", "queue"} {
		if _, ok := ParseKind(s); ok {
			t.Errorf("ParseKind(%q) ok", s)
		}
	}
}

func TestUnknownKindText(t *testing.T) {
	// As RabbitMQ 3.10.8 replied (503 COMMAND_INVALID).
	for s, want := range map[string]string{
		"foo":               "invalid exchange type 'foo'",
		"queue":             "invalid exchange type 'queue'",
		"":                  "invalid exchange type ''",
		"x-foo":             "unknown exchange type 'x-foo'",
		"Direct":            "unknown exchange type 'Direct'",
		"x-consistent-hash": "unknown exchange type 'x-consistent-hash'",
	} {
		if got := UnknownKindText(s); got != want {
			t.Errorf("UnknownKindText(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEquivalence(t *testing.T) {
	base := Decl{Name: "p.eq", Kind: Direct, AutoDelete: true,
		Args: map[string]any{"alternate-exchange": "ae1", "foo": "1"}}
	x := New(base)
	with := func(f func(d *Decl)) Decl {
		d := base
		d.Args = map[string]any{"alternate-exchange": "ae1"}
		f(&d)
		return d
	}
	// Reply texts as RabbitMQ 3.10.8 sent them after "PRECONDITION_FAILED - ".
	tests := []struct {
		name string
		d    Decl
		want string // "" for equivalent
	}{
		{"same AE, other args dropped", with(func(d *Decl) {}), ""},
		{"other args differ", with(func(d *Decl) { d.Args["foo"] = "2"; d.Args["x-bar"] = int32(1) }), ""},
		{"AE as binary", with(func(d *Decl) { d.Args["alternate-exchange"] = []byte("ae1") }), ""},
		{"AE differs", with(func(d *Decl) { d.Args["alternate-exchange"] = "ae2" }),
			"inequivalent arg 'alternate-exchange' for exchange 'p.eq' in vhost '/': received 'ae2' but current is 'ae1'"},
		{"AE missing", with(func(d *Decl) { d.Args = nil }),
			"inequivalent arg 'alternate-exchange' for exchange 'p.eq' in vhost '/': received none but current is the value 'ae1' of type 'longstr'"},
		{"type", with(func(d *Decl) { d.Kind = Fanout }),
			"inequivalent arg 'type' for exchange 'p.eq' in vhost '/': received 'fanout' but current is 'direct'"},
		{"durable", with(func(d *Decl) { d.Durable = true }),
			"inequivalent arg 'durable' for exchange 'p.eq' in vhost '/': received 'true' but current is 'false'"},
		{"auto_delete", with(func(d *Decl) { d.AutoDelete = false }),
			"inequivalent arg 'auto_delete' for exchange 'p.eq' in vhost '/': received 'false' but current is 'true'"},
		{"internal", with(func(d *Decl) { d.Internal = true }),
			"inequivalent arg 'internal' for exchange 'p.eq' in vhost '/': received 'true' but current is 'false'"},
		{"type checked before durable", with(func(d *Decl) { d.Kind = Topic; d.Durable = true }),
			"inequivalent arg 'type' for exchange 'p.eq' in vhost '/': received 'topic' but current is 'direct'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := x.CheckEquivalent(tt.d)
			if x.Equivalent(tt.d) != (err == nil) {
				t.Fatal("Equivalent disagrees with CheckEquivalent")
			}
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ie *InequivalentError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v", err)
			}
			if got := ie.ReplyText("/"); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	// No AE originally, one requested.
	y := New(Decl{Name: "p.eq", Kind: Direct, AutoDelete: true})
	err := y.CheckEquivalent(Decl{Name: "p.eq", Kind: Direct, AutoDelete: true,
		Args: map[string]any{"alternate-exchange": "x"}})
	var ie *InequivalentError
	want := "inequivalent arg 'alternate-exchange' for exchange 'p.eq' in vhost '/': received the value 'x' of type 'longstr' but current is none"
	if !errors.As(err, &ie) || ie.ReplyText("/") != want {
		t.Errorf("none->AE: %v", err)
	}
}

func TestValidateArgs(t *testing.T) {
	// As RabbitMQ 3.10.8 replied (406 PRECONDITION_FAILED) to a new exchange.
	for v, want := range map[any]string{
		int32(1): "invalid type 'signedint' for arg 'alternate-exchange' in exchange 'p.eq2' in vhost '/'",
		true:     "invalid type 'bool' for arg 'alternate-exchange' in exchange 'p.eq2' in vhost '/'",
	} {
		err := ValidateArgs(map[string]any{"alternate-exchange": v})
		var ae *ArgTypeError
		if !errors.As(err, &ae) || ae.ReplyText("p.eq2", "/") != want {
			t.Errorf("%v: %v", v, err)
		}
	}
	err := ValidateArgs(map[string]any{"alternate-exchange": []byte("zz")})
	var ae *ArgTypeError
	if !errors.As(err, &ae) || ae.Type != "binary" {
		t.Errorf("binary AE: %v", err)
	}
	if err := ValidateArgs(map[string]any{"alternate-exchange": "ae", "anything": 1}); err != nil {
		t.Error(err)
	}
	if err := ValidateArgs(nil); err != nil {
		t.Error(err)
	}
}

func TestExchangeBasics(t *testing.T) {
	args := map[string]any{"alternate-exchange": "ae"}
	x := New(Decl{Name: "h", Kind: Headers, Durable: true, Args: args})
	args["alternate-exchange"] = "changed"
	if x.AlternateExchange() != "ae" || x.Args["alternate-exchange"] != "ae" {
		t.Fatal("New must copy args")
	}
	if d := x.Decl(); d.Name != "h" || d.Kind != Headers || !d.Durable {
		t.Fatalf("Decl = %+v", d)
	}
	if x.HasBindings() {
		t.Fatal("HasBindings on new exchange")
	}
	q1 := binding.Destination{Kind: binding.Queue, Name: "q1"}
	_, err := x.Bind(binding.Binding{Dest: q1, Args: map[string]any{"x-match": "foo"}})
	var he *binding.HeadersArgsError
	if !errors.As(err, &he) {
		t.Fatalf("invalid x-match: err = %v", err)
	}
	if added, err := x.Bind(binding.Binding{Dest: q1, Args: map[string]any{"a": "1"}}); !added || err != nil {
		t.Fatal(added, err)
	}
	if added, err := x.Bind(binding.Binding{Dest: q1, Args: map[string]any{"a": "1"}}); added || err != nil {
		t.Fatal("duplicate bind", added, err)
	}
	if got := x.Route("", map[string]any{"a": "1"}, nil); len(got) != 1 {
		t.Fatalf("Route = %v", got)
	}
	if len(x.Bindings()) != 1 || x.BindingCount() != 1 || !x.HasBindings() {
		t.Fatal("bindings")
	}
	if !x.Unbind(binding.Binding{Dest: q1, Args: map[string]any{"a": "1"}}) || x.HasBindings() {
		t.Fatal("Unbind")
	}
	// x-match is not validated for other kinds (as RabbitMQ).
	d := New(Decl{Name: "d", Kind: Direct})
	if _, err := d.Bind(binding.Binding{Dest: q1, Key: "k", Args: map[string]any{"x-match": "foo"}}); err != nil {
		t.Fatal(err)
	}
	if d.UnbindDest(q1) != 1 || d.HasBindings() {
		t.Fatal("UnbindDest")
	}
	if New(Decl{Kind: Direct, Args: map[string]any{"alternate-exchange": int32(1)}}).AlternateExchange() != "" {
		t.Fatal("non-string AE")
	}
}
