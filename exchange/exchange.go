// Package exchange holds one vhost's exchanges: their kinds, RabbitMQ's
// re-declare equivalence, argument validation, and routing through
// exchange-to-exchange bindings and alternate exchanges.
//
// # Concurrency
//
// An Exchange is not synchronized. The caller (the vhost) guards its
// exchanges with a sync.RWMutex: Route and RouteAll under the read lock, Bind,
// Unbind and UnbindDest under the write lock. Route and RouteAll never modify
// an Exchange; the only state they write is the caller's own Scratch, so one
// Scratch per goroutine (per channel) is required.
//
// # The default exchange
//
// The default exchange ("") is a direct exchange to which every queue is
// implicitly bound with its own name. This package does not model it: the
// caller routes a message published to "" to the queue named by the routing
// key, if that queue exists. RabbitMQ refuses to bind to or from it (403) and
// an alternate-exchange of "" routes nothing (verified against RabbitMQ
// 3.10.8), so RouteAll never follows "".
//
// # Internal exchanges
//
// An internal exchange cannot be published to directly (the channel replies
// 403 ACCESS_REFUSED), but it is reached normally through exchange-to-exchange
// bindings and as an alternate exchange; RouteAll does not look at Internal.
//
// # Auto-delete
//
// RabbitMQ deletes an auto-delete exchange when its last binding (with it as
// the source) is removed; the caller checks HasBindings after Unbind and
// UnbindDest.
package exchange

import (
	"fmt"

	"github.com/warrenmq/warren/binding"
)

// Kind is an exchange type.
type Kind uint8

const (
	// Direct routes on an exact routing-key match.
	Direct Kind = iota
	// Fanout routes to every binding.
	Fanout
	// Topic routes on dotted-word patterns with '*' and '#'.
	Topic
	// Headers routes on the message headers.
	Headers
)

// String returns the AMQP name of the kind: "direct", "fanout", "topic" or
// "headers".
func (k Kind) String() string {
	switch k {
	case Direct:
		return "direct"
	case Fanout:
		return "fanout"
	case Topic:
		return "topic"
	case Headers:
		return "headers"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind parses an exchange type name (case-sensitive, as RabbitMQ).
//
// For an unknown type RabbitMQ 3.10 closes the connection with 503
// COMMAND_INVALID; see UnknownKindText for the reply text.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "direct":
		return Direct, true
	case "fanout":
		return Fanout, true
	case "topic":
		return Topic, true
	case "headers":
		return Headers, true
	}
	return 0, false
}

// UnknownKindText returns the reply text (without the "COMMAND_INVALID - "
// prefix) for exchange.declare with an unsupported type. RabbitMQ says
// "invalid exchange type 'foo'" when the name happens to be an existing Erlang
// atom (observed for "foo", "queue" and "") and "unknown exchange type
// 'x-foo'" otherwise (observed for "x-foo", "Direct", "x-consistent-hash");
// we cannot know Erlang's atom table, so names starting with "x-" or
// containing an upper-case letter get "unknown", all others "invalid".
func UnknownKindText(s string) string {
	word := "invalid"
	if len(s) >= 2 && s[:2] == "x-" {
		word = "unknown"
	} else {
		for i := 0; i < len(s); i++ {
			if s[i] >= 'A' && s[i] <= 'Z' {
				word = "unknown"
				break
			}
		}
	}
	return fmt.Sprintf("%s exchange type '%s'", word, s)
}

// NewMatcher returns an empty binding matcher for kind k.
func NewMatcher(k Kind) binding.Matcher {
	switch k {
	case Fanout:
		return binding.NewFanout()
	case Topic:
		return binding.NewTopic()
	case Headers:
		return binding.NewHeaders()
	}
	return binding.NewDirect()
}

// Decl is the declared shape of an exchange, as exchange.declare carries it.
type Decl struct {
	Name       string
	Kind       Kind
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
}

// Exchange is one exchange and its bindings. See the package doc for the
// locking contract. Fields other than the matcher are read-only after New.
type Exchange struct {
	Name       string
	Kind       Kind
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any // as declared (a shallow copy); do not modify

	ae      string // alternate exchange, "" for none
	matcher binding.Matcher
}

// New returns an exchange with no bindings. It does not validate d.Args; call
// ValidateArgs first, as RabbitMQ rejects bad arguments at declare time.
func New(d Decl) *Exchange {
	e := &Exchange{
		Name:       d.Name,
		Kind:       d.Kind,
		Durable:    d.Durable,
		AutoDelete: d.AutoDelete,
		Internal:   d.Internal,
		matcher:    NewMatcher(d.Kind),
	}
	if len(d.Args) > 0 {
		e.Args = make(map[string]any, len(d.Args))
		for k, v := range d.Args {
			e.Args[k] = v
		}
		e.ae, _ = d.Args[argAlternateExchange].(string)
	}
	return e
}

const argAlternateExchange = "alternate-exchange"

// AlternateExchange returns the name in the "alternate-exchange" argument, or
// "" if there is none (or it is not a string).
func (e *Exchange) AlternateExchange() string { return e.ae }

// Decl returns the declaration the exchange was created from.
func (e *Exchange) Decl() Decl {
	return Decl{Name: e.Name, Kind: e.Kind, Durable: e.Durable, AutoDelete: e.AutoDelete,
		Internal: e.Internal, Args: e.Args}
}

// Bind adds b. added is false if an identical binding exists (RabbitMQ
// answers bind-ok either way). For a headers exchange the arguments are
// validated first; a *binding.HeadersArgsError means 406 PRECONDITION_FAILED.
func (e *Exchange) Bind(b binding.Binding) (added bool, err error) {
	if e.Kind == Headers {
		if err := binding.ValidateHeadersArgs(b.Args); err != nil {
			return false, err
		}
	}
	return e.matcher.Add(b), nil
}

// Unbind removes b and reports whether it existed (RabbitMQ answers
// unbind-ok either way).
func (e *Exchange) Unbind(b binding.Binding) bool { return e.matcher.Remove(b) }

// UnbindDest removes every binding to d (for a deleted queue or exchange) and
// returns how many there were.
func (e *Exchange) UnbindDest(d binding.Destination) int { return e.matcher.RemoveDest(d) }

// Route appends to out the destinations of e's own bindings that match, each
// once; it does not follow exchange destinations or the alternate exchange
// (see RouteAll). It does not allocate once out has capacity.
func (e *Exchange) Route(key string, headers map[string]any, out []binding.Destination) []binding.Destination {
	return e.matcher.Match(key, headers, out)
}

// Bindings lists e's bindings (e as the source) in a stable order.
func (e *Exchange) Bindings() []binding.Binding { return e.matcher.Bindings() }

// HasBindings reports whether e is the source of at least one binding.
func (e *Exchange) HasBindings() bool { return e.matcher.Len() > 0 }

// BindingCount returns the number of bindings with e as the source.
func (e *Exchange) BindingCount() int { return e.matcher.Len() }
