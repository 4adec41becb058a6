package server

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/queue"
)

// The domain API's errors (domain.go). Each names what went wrong with the
// objects involved; replyError alone turns one into its AMQP reply code and
// RabbitMQ's text, and each Error method returns that same text, so logs,
// the AMQP handlers and the management API all read one wording.

// NotFoundError: the named object does not exist (404 NOT_FOUND).
type NotFoundError struct {
	Kind  string // "queue", "exchange", "vhost" or "connection"
	Name  string
	VHost string // "" for a vhost or a connection
}

// LockedError: the queue is exclusive to another connection, or its
// exclusive property does not match the declaration's (405
// RESOURCE_LOCKED).
type LockedError struct {
	Name, VHost string
}

// SingleActiveGetError: basic.get on a quorum queue with single active
// consumer, which RabbitMQ 3.10's rabbit_fifo refuses (405
// RESOURCE_LOCKED).
type SingleActiveGetError struct {
	Name, VHost string
}

// AccessReason is why an AccessError refused an operation.
type AccessReason uint8

// Reasons of AccessError.
const (
	// NoPermission: the user lacks Perm on the resource (Kind, Name).
	NoPermission AccessReason = iota
	// NoTopicPermission: the user may not use routing key Name with topic
	// exchange Exchange.
	NoTopicPermission
	// ReservedName: a new object's name starts with "amq.".
	ReservedName
	// SystemExchange: the exchange is one of the broker's own ("amq.*").
	SystemExchange
	// DefaultExchange: the default exchange cannot be declared, deleted or
	// bound.
	DefaultExchange
	// InternalExchange: publishing to an internal exchange.
	InternalExchange
	// NoUser: the user is not configured.
	NoUser
)

// AccessError: the operation is refused (403 ACCESS_REFUSED).
type AccessError struct {
	Reason   AccessReason
	Kind     string // "queue" or "exchange"
	Name     string
	VHost    string
	User     string
	Exchange string // the topic exchange of NoTopicPermission
}

// PreconditionReason is why a PreconditionError refused an operation.
type PreconditionReason uint8

// Reasons of PreconditionError.
const (
	// Inequivalent: a re-declaration differs from the object. For a queue,
	// Arg names the difference, Got and Have are the re-declaration's and
	// the queue's values (nil: it lacks the argument); for an exchange,
	// Err is the *exchange.InequivalentError.
	Inequivalent PreconditionReason = iota
	// InvalidArg: a declaration's argument or property is refused; Err is
	// the queue package's *ArgError, *ArgTypeError, *TypeArgError or
	// *PropertyError, or the exchange package's *ArgTypeError.
	InvalidArg
	// InUse: deleting with if-unused an object in use.
	InUse
	// NotEmpty: deleting with if-empty a queue with ready messages.
	NotEmpty
	// QueueLimit: the vhost's max-queues limit (Limit) is reached.
	QueueLimit
	// BindingRefused: the exchange refused the binding; Err says why.
	BindingRefused
	// UserIDMismatch: a publish's user-id property (Got) is not the
	// authenticated user (Have).
	UserIDMismatch
	// BadExpiration: a publish's expiration property (Arg) is invalid.
	BadExpiration
	// BadDeliveryMode: a publish's delivery-mode (Got) is neither 1 nor 2.
	BadDeliveryMode
	// TooLarge: a message's body (Got bytes) is over the configured
	// maximum (Limit).
	TooLarge
	// NoReplyConsumer: a publish's reply-to names direct reply-to, but the
	// publisher consumes no replies.
	NoReplyConsumer
)

// PreconditionError: the operation conflicts with the object's state, or
// the request is invalid (406 PRECONDITION_FAILED).
type PreconditionError struct {
	Reason      PreconditionReason
	Kind        string // "queue" or "exchange"
	Name, VHost string
	Arg         string
	Got, Have   any
	Limit       int64
	Err         error
}

// Unwrap returns the package error behind the refusal, if any.
func (e *PreconditionError) Unwrap() error { return e.Err }

// NotImplementedError: the queue's type lacks the operation (540
// NOT_IMPLEMENTED).
type NotImplementedError struct {
	Op    string // "basic.get", "queue.purge"
	Type  string // the queue type's name
	Queue string // the queue, and its vhost
	VHost string
}

// UnknownTypeError: an exchange.declare names no exchange type (503
// COMMAND_INVALID, a connection error as in RabbitMQ).
type UnknownTypeError struct {
	Type string
}

// StoreError: the durable store refused a definition (541 INTERNAL_ERROR).
// HomeDownError: the home node of a classic queue is down (cluster mode);
// RabbitMQ 3.10 answers 404 NOT_FOUND.
type HomeDownError struct {
	Name, VHost, Node string
}

func (e *HomeDownError) Error() string { return replyError(e).Text }

type StoreError struct {
	What string // "exchange", "binding"
	Err  error
}

// Unwrap returns the store's error.
func (e *StoreError) Unwrap() error { return e.Err }

func (e *NotFoundError) Error() string        { return replyError(e).Text }
func (e *LockedError) Error() string          { return replyError(e).Text }
func (e *SingleActiveGetError) Error() string { return replyError(e).Text }
func (e *AccessError) Error() string          { return replyError(e).Text }
func (e *PreconditionError) Error() string    { return replyError(e).Text }
func (e *NotImplementedError) Error() string  { return replyError(e).Text }
func (e *UnknownTypeError) Error() string     { return replyError(e).Text }
func (e *StoreError) Error() string           { return replyError(e).Text }

// replyError is the one mapping from errors to AMQP replies: a domain
// error becomes its reply code with RabbitMQ's text, an *amqp.Error is
// itself, anything else is 541 INTERNAL_ERROR. Class and method ids are
// left 0 for the caller to fill in. It returns nil for nil.
func replyError(err error) *amqp.Error {
	if err == nil {
		return nil
	}
	var (
		ae  *amqp.Error
		nf  *NotFoundError
		le  *LockedError
		sg  *SingleActiveGetError
		acc *AccessError
		pe  *PreconditionError
		ni  *NotImplementedError
		ut  *UnknownTypeError
		se  *StoreError
		ce  *queue.CrashError
	)
	var (
		ap *appliedError
		hd *HomeDownError
	)
	switch {
	case errors.As(err, &ap):
		r := ap.reply
		return &r
	case errors.As(err, &hd):
		return amqp.Errorf(amqp.NotFound, 0, 0, "home node '%s' of durable queue '%s' in vhost '%s' is down or inaccessible", hd.Node, hd.Name, hd.VHost)
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ce):
		// RabbitMQ crashes on the value: a bare INTERNAL_ERROR.
		return &amqp.Error{Code: amqp.InternalError, Cause: err}
	case errors.As(err, &nf):
		if nf.VHost == "" {
			return amqp.Errorf(amqp.NotFound, 0, 0, "no %s '%s'", nf.Kind, nf.Name)
		}
		return amqp.Errorf(amqp.NotFound, 0, 0, "no %s '%s' in vhost '%s'", nf.Kind, nf.Name, nf.VHost)
	case errors.As(err, &le):
		return amqp.Errorf(amqp.ResourceLocked, 0, 0,
			"cannot obtain exclusive access to locked queue '%s' in vhost '%s'. "+
				"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
			le.Name, le.VHost)
	case errors.As(err, &sg):
		return amqp.Errorf(amqp.ResourceLocked, 0, 0,
			"cannot obtain access to locked queue '%s' in vhost '%s'. "+
				"basic.get operations are not supported by quorum queues with single active consumer",
			sg.Name, sg.VHost)
	case errors.As(err, &acc):
		return amqp.Errorf(amqp.AccessRefused, 0, 0, "%s", accessText(acc))
	case errors.As(err, &pe):
		return amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%s", preconditionText(pe))
	case errors.As(err, &ni):
		// RabbitMQ 3.10's words: "basic.get not supported by stream
		// queues queue 's' in vhost '/'".
		return amqp.Errorf(amqp.NotImplemented, 0, 0, "%s not supported by %s queues queue '%s' in vhost '%s'", ni.Op, ni.Type, ni.Queue, ni.VHost)
	case errors.As(err, &ut):
		return amqp.Errorf(amqp.CommandInvalid, 0, 0, "%s", exchange.UnknownKindText(ut.Type))
	case errors.As(err, &se):
		return amqp.Errorf(amqp.InternalError, 0, 0, "cannot store %s: %v", se.What, se.Err)
	}
	return amqp.Errorf(amqp.InternalError, 0, 0, "%v", err)
}

func accessText(e *AccessError) string {
	switch e.Reason {
	case NoPermission:
		return fmt.Sprintf("access to %s '%s' in vhost '%s' refused for user '%s'", e.Kind, e.Name, e.VHost, e.User)
	case NoTopicPermission:
		return fmt.Sprintf("access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'",
			e.Name, e.Exchange, e.VHost, e.User)
	case ReservedName:
		return fmt.Sprintf("%s name '%s' contains reserved prefix 'amq.*'", e.Kind, e.Name)
	case SystemExchange:
		return fmt.Sprintf("deletion of system exchange '%s' in vhost '%s' not allowed", e.Name, e.VHost)
	case DefaultExchange:
		return "operation not permitted on the default exchange"
	case InternalExchange:
		return fmt.Sprintf("cannot publish to internal exchange '%s' in vhost '%s'", e.Name, e.VHost)
	case NoUser:
		return fmt.Sprintf("no user '%s'", e.User)
	}
	return fmt.Sprintf("access refused (reason %d)", e.Reason)
}

func preconditionText(e *PreconditionError) string {
	switch e.Reason {
	case Inequivalent:
		var ie *exchange.InequivalentError
		if errors.As(e.Err, &ie) {
			return ie.ReplyText(e.VHost)
		}
		return fmt.Sprintf("inequivalent arg '%s' for %s '%s' in vhost '%s': received %s but current is %s",
			e.Arg, e.Kind, e.Name, e.VHost, inequivalentValue(e.Got, e.Have), inequivalentValue(e.Have, e.Got))
	case InvalidArg:
		return invalidArgText(e)
	case InUse:
		return fmt.Sprintf("%s '%s' in vhost '%s' in use", e.Kind, e.Name, e.VHost)
	case NotEmpty:
		return fmt.Sprintf("%s '%s' in vhost '%s' not empty", e.Kind, e.Name, e.VHost)
	case QueueLimit:
		return fmt.Sprintf("cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", e.Name, e.VHost, e.Limit)
	case BindingRefused:
		return fmt.Sprint(e.Err)
	case UserIDMismatch:
		return fmt.Sprintf("user_id property set to '%s' but authenticated user was '%s'", e.Got, e.Have)
	case BadExpiration:
		return fmt.Sprintf("invalid expiration '%s': %s", e.Arg, queue.ExpirationError(e.Arg))
	case BadDeliveryMode:
		return fmt.Sprintf("invalid message: {delivery_mode_unknown,%v}", e.Got)
	case TooLarge:
		return fmt.Sprintf("message size %v is larger than configured max size %d", e.Got, e.Limit)
	case NoReplyConsumer:
		return "fast reply consumer does not exist"
	}
	return fmt.Sprintf("precondition failed (reason %d): %v", e.Reason, e.Err)
}

// inequivalentValue words one side v of an inequivalent argument as
// RabbitMQ 3.10 does: "none" where it is absent; where the other side is
// absent, the value with its AMQP type ("the value '5' of type
// 'signedint'"); else the value alone ("'5'").
func inequivalentValue(v, other any) string {
	switch {
	case v == nil:
		return "none"
	case other == nil:
		return fmt.Sprintf("the value '%s' of type '%s'", erlangText(v), amqp.FieldTypeName(v))
	}
	return "'" + erlangText(v) + "'"
}

// erlangText prints a field value as RabbitMQ's texts do (Erlang's ~s for
// strings and binaries, ~p for the rest).
func erlangText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case float32:
		return erlangFloat(float64(x))
	case float64:
		return erlangFloat(x)
	case time.Time:
		return strconv.FormatInt(x.Unix(), 10)
	}
	return fmt.Sprint(v)
}

// invalidArgText words a refused declaration argument as RabbitMQ does.
func invalidArgText(e *PreconditionError) string {
	var (
		ae  *queue.ArgError
		te  *queue.TypeArgError
		pe  *queue.PropertyError
		ate *queue.ArgTypeError
		xat *exchange.ArgTypeError
		re  *queue.RefusedError
	)
	switch {
	case errors.As(e.Err, &re):
		return re.Text
	case errors.As(e.Err, &xat):
		return xat.ReplyText(e.Name, e.VHost)
	case errors.As(e.Err, &ate):
		return fmt.Sprintf("invalid type '%s' for arg '%s' in queue '%s' in vhost '%s'", ate.Type, ate.Arg, e.Name, e.VHost)
	case errors.As(e.Err, &ae):
		return fmt.Sprintf("invalid arg '%s' for queue '%s' in vhost '%s': %s", ae.Arg, e.Name, e.VHost, ae.Reason)
	case errors.As(e.Err, &te):
		return fmt.Sprintf("invalid arg '%s' for queue '%s' in vhost '%s' of queue type %s", te.Arg, e.Name, e.VHost, te.Module)
	case errors.As(e.Err, &pe):
		return fmt.Sprintf("invalid property '%s' for queue '%s' in vhost '%s'", pe.Property, e.Name, e.VHost)
	}
	return fmt.Sprintf("invalid arg for %s '%s' in vhost '%s': %v", e.Kind, e.Name, e.VHost, e.Err)
}
