package binding

import (
	"fmt"
	"strings"
)

// MatchMode is a headers binding's x-match mode.
type MatchMode uint8

const (
	// MatchAll (x-match "all", the default): every non-"x-" argument must
	// match a header. A binding with no such argument matches every message.
	MatchAll MatchMode = iota
	// MatchAny (x-match "any"): at least one non-"x-" argument must match. A
	// binding with no such argument matches nothing.
	MatchAny
	// MatchAllWithX (x-match "all-with-x"): like MatchAll, but arguments
	// starting with "x-" (other than x-match itself) are matched too.
	MatchAllWithX
	// MatchAnyWithX (x-match "any-with-x"): like MatchAny, with "x-"
	// arguments (other than x-match itself) matched too.
	MatchAnyWithX
)

// String returns the x-match value naming m.
func (m MatchMode) String() string {
	switch m {
	case MatchAll:
		return "all"
	case MatchAny:
		return "any"
	case MatchAllWithX:
		return "all-with-x"
	case MatchAnyWithX:
		return "any-with-x"
	}
	return fmt.Sprintf("MatchMode(%d)", uint8(m))
}

// HeadersArgsError is the error ValidateHeadersArgs returns. RabbitMQ rejects
// such a queue.bind or exchange.bind with 406 PRECONDITION_FAILED and the text
// Error() returns.
type HeadersArgsError struct {
	Value any // the x-match value
}

func (e *HeadersArgsError) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("Invalid x-match field value %s; expected all, any, all-with-x, or any-with-x",
			ErlangTerm(s))
	}
	return fmt.Sprintf("Invalid x-match field type %s (value %s); expected longstr",
		TypeName(e.Value), ErlangTerm(e.Value))
}

// ValidateHeadersArgs checks the binding arguments of a headers-exchange
// binding as RabbitMQ does: x-match may be absent or a string (longstr) equal
// to "all", "any", "all-with-x" or "any-with-x" (case-sensitive). A []byte
// (binary) x-match is rejected, as in RabbitMQ. The error is a
// *HeadersArgsError. Other exchange types do not validate binding arguments.
func ValidateHeadersArgs(args map[string]any) error {
	v, ok := args["x-match"]
	if !ok {
		return nil
	}
	if s, ok := v.(string); ok {
		if _, ok := parseMatchMode(s); ok {
			return nil
		}
	}
	return &HeadersArgsError{Value: v}
}

func parseMatchMode(s string) (MatchMode, bool) {
	switch s {
	case "all":
		return MatchAll, true
	case "any":
		return MatchAny, true
	case "all-with-x":
		return MatchAllWithX, true
	case "any-with-x":
		return MatchAnyWithX, true
	}
	return MatchAll, false
}

// headersMode returns the mode of binding args; like RabbitMQ, an absent or
// invalid x-match means "all" (bindings are validated before they are added).
func headersMode(args map[string]any) MatchMode {
	s, _ := args["x-match"].(string)
	m, _ := parseMatchMode(s)
	return m
}

type headerCond struct {
	name    string
	value   any
	present bool // the argument is void (nil): the header must only be present
}

type headersBinding struct {
	dest  Destination
	key   string
	args  map[string]any // the stored copy, for identity
	mode  MatchMode
	conds []headerCond
}

func compileHeaders(b Binding, args map[string]any) *headersBinding {
	hb := &headersBinding{dest: b.Dest, key: b.Key, args: args, mode: headersMode(args)}
	withX := hb.mode == MatchAllWithX || hb.mode == MatchAnyWithX
	for k, v := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		hb.conds = append(hb.conds, headerCond{name: k, value: v, present: v == nil})
	}
	return hb
}

func (hb *headersBinding) matches(headers map[string]any) bool {
	switch hb.mode {
	case MatchAny, MatchAnyWithX:
		for i := range hb.conds {
			c := &hb.conds[i]
			if v, ok := headers[c.name]; ok && (c.present || ValueEqual(c.value, v)) {
				return true
			}
		}
		return false
	default:
		if len(headers) < len(hb.conds) {
			return false // some argument has no header
		}
		for i := range hb.conds {
			c := &hb.conds[i]
			v, ok := headers[c.name]
			if !ok || !(c.present || ValueEqual(c.value, v)) {
				return false
			}
		}
		return true
	}
}

// Headers matches message headers against binding arguments, as RabbitMQ's
// headers exchange does; the routing key is ignored. Matching is a linear scan
// of the bindings. Values compare with ValueEqual; an argument whose value is
// void (nil) only requires the header to be present. Call ValidateHeadersArgs
// before Add: Add itself treats an invalid x-match as "all". The zero value is
// ready to use.
type Headers struct {
	set      bindSet
	bindings []*headersBinding
}

var _ Matcher = (*Headers)(nil)

// NewHeaders returns an empty Headers matcher.
func NewHeaders() *Headers { return &Headers{} }

// Add implements Matcher.
func (m *Headers) Add(b Binding) bool {
	args, ok := m.set.add(b)
	if !ok {
		return false
	}
	m.bindings = append(m.bindings, compileHeaders(b, args))
	return true
}

// Remove implements Matcher.
func (m *Headers) Remove(b Binding) bool {
	args, ok := m.set.remove(b)
	if !ok {
		return false
	}
	for i, hb := range m.bindings {
		if hb.dest == b.Dest && hb.key == b.Key && ArgsEqual(hb.args, args) {
			m.bindings = deleteAt(m.bindings, i)
			break
		}
	}
	return true
}

func deleteAt(s []*headersBinding, i int) []*headersBinding {
	copy(s[i:], s[i+1:])
	s[len(s)-1] = nil
	return s[:len(s)-1]
}

// RemoveDest implements Matcher.
func (m *Headers) RemoveDest(d Destination) int {
	n := len(m.set.removeDest(d))
	if n == 0 {
		return 0
	}
	kept := m.bindings[:0]
	for _, hb := range m.bindings {
		if hb.dest != d {
			kept = append(kept, hb)
		}
	}
	clear(m.bindings[len(kept):])
	m.bindings = kept
	return n
}

// Match implements Matcher. key is ignored; nil headers is an empty table.
func (m *Headers) Match(_ string, headers map[string]any, out []Destination) []Destination {
	start := len(out)
	for _, hb := range m.bindings {
		if hb.matches(headers) {
			out = append(out, hb.dest)
		}
	}
	return dedup(out, start)
}

// Len implements Matcher.
func (m *Headers) Len() int { return m.set.n }

// Bindings implements Matcher.
func (m *Headers) Bindings() []Binding { return m.set.list() }
