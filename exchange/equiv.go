package exchange

import (
	"fmt"
	"strconv"

	"github.com/warrenmq/warren/binding"
)

// InequivalentError says why a re-declaration is not equivalent to the
// existing exchange. RabbitMQ closes the channel with 406 PRECONDITION_FAILED
// and the text ReplyText returns.
type InequivalentError struct {
	Exchange string
	Arg      string // "type", "durable", "auto_delete", "internal" or "alternate-exchange"
	Received string // already formatted as RabbitMQ does: 'x', none, or the value 'x' of type 't'
	Current  string
}

func (e *InequivalentError) Error() string {
	return fmt.Sprintf("inequivalent arg '%s' for exchange '%s': received %s but current is %s",
		e.Arg, e.Exchange, e.Received, e.Current)
}

// ReplyText returns RabbitMQ's reply text without the "PRECONDITION_FAILED - "
// prefix, e.g. "inequivalent arg 'durable' for exchange 'x' in vhost '/':
// received 'true' but current is 'false'".
func (e *InequivalentError) ReplyText(vhost string) string {
	return fmt.Sprintf("inequivalent arg '%s' for exchange '%s' in vhost '%s': received %s but current is %s",
		e.Arg, e.Exchange, vhost, e.Received, e.Current)
}

// Equivalent reports whether d may re-declare e (CheckEquivalent returns nil).
func (e *Exchange) Equivalent(d Decl) bool { return e.CheckEquivalent(d) == nil }

// CheckEquivalent applies RabbitMQ's re-declare rule: type, durable,
// auto-delete and internal must be equal, in that order of checking, and of
// the arguments only "alternate-exchange" is compared (present in both with
// equal values, or absent from both); other arguments may differ freely. The
// error is an *InequivalentError.
//
// Verified against RabbitMQ 3.10.8: a []byte alternate-exchange equal to the
// current string one is accepted on re-declare (although declaring a new
// exchange with it is refused, see ValidateArgs).
func (e *Exchange) CheckEquivalent(d Decl) error {
	fail := func(arg, received, current string) error {
		return &InequivalentError{Exchange: e.Name, Arg: arg, Received: received, Current: current}
	}
	quote := func(s string) string { return "'" + s + "'" }
	switch {
	case d.Kind != e.Kind:
		return fail("type", quote(d.Kind.String()), quote(e.Kind.String()))
	case d.Durable != e.Durable:
		return fail("durable", quote(strconv.FormatBool(d.Durable)), quote(strconv.FormatBool(e.Durable)))
	case d.AutoDelete != e.AutoDelete:
		return fail("auto_delete", quote(strconv.FormatBool(d.AutoDelete)), quote(strconv.FormatBool(e.AutoDelete)))
	case d.Internal != e.Internal:
		return fail("internal", quote(strconv.FormatBool(d.Internal)), quote(strconv.FormatBool(e.Internal)))
	}
	cur, hasCur := e.Args[argAlternateExchange]
	req, hasReq := d.Args[argAlternateExchange]
	switch {
	case !hasCur && !hasReq:
		return nil
	case hasCur && hasReq:
		if binding.ValueEqual(cur, req) {
			return nil
		}
		return fail(argAlternateExchange, quoteValue(req), quoteValue(cur))
	case hasCur:
		return fail(argAlternateExchange, "none", typedValue(cur))
	default:
		return fail(argAlternateExchange, typedValue(req), "none")
	}
}

// quoteValue formats a bare value as RabbitMQ's val/1 does: 'x'.
func quoteValue(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + x + "'"
	case []byte:
		return "'" + string(x) + "'"
	}
	return "'" + binding.ErlangTerm(v) + "'"
}

// typedValue formats a typed value as RabbitMQ's val/1 does:
// the value 'x' of type 'longstr'.
func typedValue(v any) string {
	return fmt.Sprintf("the value %s of type '%s'", quoteValue(v), binding.TypeName(v))
}

// ArgTypeError is returned by ValidateArgs for an argument of the wrong type.
// RabbitMQ replies 406 PRECONDITION_FAILED with ReplyText.
type ArgTypeError struct {
	Arg  string // "alternate-exchange"
	Type string // RabbitMQ's name of the type received, e.g. "signedint"
}

func (e *ArgTypeError) Error() string {
	return fmt.Sprintf("invalid type '%s' for arg '%s'", e.Type, e.Arg)
}

// ReplyText returns RabbitMQ's text without the "PRECONDITION_FAILED - "
// prefix, e.g. "invalid type 'signedint' for arg 'alternate-exchange' in
// exchange 'x' in vhost '/'".
func (e *ArgTypeError) ReplyText(exchange, vhost string) string {
	return fmt.Sprintf("invalid type '%s' for arg '%s' in exchange '%s' in vhost '%s'",
		e.Type, e.Arg, exchange, vhost)
}

// ValidateArgs checks exchange.declare arguments as RabbitMQ does when it
// creates an exchange: "alternate-exchange", if present, must be a string
// (longstr; a []byte is refused as 'binary'). Other arguments are accepted
// and ignored. The error is an *ArgTypeError. RabbitMQ checks equivalence
// with an existing exchange before this, so call it only for new exchanges.
func ValidateArgs(args map[string]any) error {
	if v, ok := args[argAlternateExchange]; ok {
		if _, ok := v.(string); !ok {
			return &ArgTypeError{Arg: argAlternateExchange, Type: binding.TypeName(v)}
		}
	}
	return nil
}
