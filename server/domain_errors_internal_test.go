package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/queue"
)

// TestReplyError pins every domain error's reply code and text: the texts
// are RabbitMQ 3.10's, byte for byte, as the handlers sent them before the
// domain API (the conformance suite checks most of them against RabbitMQ).
func TestReplyError(t *testing.T) {
	tests := []struct {
		err  error
		code uint16
		text string
	}{
		{&NotFoundError{Kind: "queue", Name: "q", VHost: "/"}, amqp.NotFound, "no queue 'q' in vhost '/'"},
		{&NotFoundError{Kind: "exchange", Name: "x", VHost: "v"}, amqp.NotFound, "no exchange 'x' in vhost 'v'"},
		{&NotFoundError{Kind: "vhost", Name: "v"}, amqp.NotFound, "no vhost 'v'"},
		{&LockedError{Name: "q", VHost: "/"}, amqp.ResourceLocked, "cannot obtain exclusive access to locked queue 'q' in vhost '/'. " +
			"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."},
		{&SingleActiveGetError{Name: "q", VHost: "/"}, amqp.ResourceLocked, "cannot obtain access to locked queue 'q' in vhost '/'. " +
			"basic.get operations are not supported by quorum queues with single active consumer"},
		{&AccessError{Reason: NoPermission, Kind: "queue", Name: "q", VHost: "/", User: "u"}, amqp.AccessRefused,
			"access to queue 'q' in vhost '/' refused for user 'u'"},
		{&AccessError{Reason: NoTopicPermission, Name: "a.b", Exchange: "amq.topic", VHost: "/", User: "u"}, amqp.AccessRefused,
			"access to topic 'a.b' in exchange 'amq.topic' in vhost '/' refused for user 'u'"},
		{&AccessError{Reason: ReservedName, Kind: "queue", Name: "amq.q"}, amqp.AccessRefused, "queue name 'amq.q' contains reserved prefix 'amq.*'"},
		{&AccessError{Reason: ReservedName, Kind: "exchange", Name: "amq.x"}, amqp.AccessRefused, "exchange name 'amq.x' contains reserved prefix 'amq.*'"},
		{&AccessError{Reason: SystemExchange, Name: "amq.direct", VHost: "/"}, amqp.AccessRefused, "deletion of system exchange 'amq.direct' in vhost '/' not allowed"},
		{&AccessError{Reason: DefaultExchange}, amqp.AccessRefused, "operation not permitted on the default exchange"},
		{&AccessError{Reason: InternalExchange, Name: "x", VHost: "/"}, amqp.AccessRefused, "cannot publish to internal exchange 'x' in vhost '/'"},
		{&AccessError{Reason: NoUser, User: "bob"}, amqp.AccessRefused, "no user 'bob'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "durable", Got: true, Have: false}, amqp.PreconditionFailed,
			"inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"},
		// An argument one side lacks is "none", the other side's value
		// has its type; present on both sides, the values alone.
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-max-length", Got: int32(5)}, amqp.PreconditionFailed,
			"inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '5' of type 'signedint' but current is none"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-max-length", Have: int64(100000)}, amqp.PreconditionFailed,
			"inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received none but current is the value '100000' of type 'long'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-single-active-consumer", Have: true}, amqp.PreconditionFailed,
			"inequivalent arg 'x-single-active-consumer' for queue 'q' in vhost '/': received none but current is the value 'true' of type 'bool'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-dead-letter-exchange", Have: "dlx"}, amqp.PreconditionFailed,
			"inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received none but current is the value 'dlx' of type 'longstr'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-max-length", Got: "5", Have: int32(5)}, amqp.PreconditionFailed,
			"inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received '5' but current is '5'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-max-length", Got: 5.0, Have: int64(5)}, amqp.PreconditionFailed,
			"inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received '5.0' but current is '5'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "queue", Name: "q", VHost: "/", Arg: "x-single-active-consumer", Got: int32(1), Have: true}, amqp.PreconditionFailed,
			"inequivalent arg 'x-single-active-consumer' for queue 'q' in vhost '/': received '1' but current is 'true'"},
		{&PreconditionError{Reason: Inequivalent, Kind: "exchange", Name: "x", VHost: "/",
			Err: &exchange.InequivalentError{Exchange: "x", Arg: "type", Received: "'fanout'", Current: "'direct'"}}, amqp.PreconditionFailed,
			"inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
		{&PreconditionError{Reason: InvalidArg, Kind: "queue", Name: "q", VHost: "/", Err: &queue.ArgTypeError{Arg: "x-expires", Type: "longstr"}},
			amqp.PreconditionFailed, "invalid type 'longstr' for arg 'x-expires' in queue 'q' in vhost '/'"},
		{&PreconditionError{Reason: InvalidArg, Kind: "queue", Name: "q", VHost: "/", Err: &queue.ArgError{Arg: "x-expires", Reason: "{value_zero,0}"}},
			amqp.PreconditionFailed, "invalid arg 'x-expires' for queue 'q' in vhost '/': {value_zero,0}"},
		{&PreconditionError{Reason: InvalidArg, Kind: "queue", Name: "q", VHost: "/", Err: &queue.TypeArgError{Arg: "x-max-priority", Module: "rabbit_quorum_queue"}},
			amqp.PreconditionFailed, "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue"},
		{&PreconditionError{Reason: InvalidArg, Kind: "queue", Name: "q", VHost: "/", Err: &queue.PropertyError{Property: "exclusive"}},
			amqp.PreconditionFailed, "invalid property 'exclusive' for queue 'q' in vhost '/'"},
		{&PreconditionError{Reason: InvalidArg, Kind: "exchange", Name: "x", VHost: "/", Err: &exchange.ArgTypeError{Arg: "alternate-exchange", Type: "signedint"}},
			amqp.PreconditionFailed, "invalid type 'signedint' for arg 'alternate-exchange' in exchange 'x' in vhost '/'"},
		{&PreconditionError{Reason: InUse, Kind: "queue", Name: "q", VHost: "/"}, amqp.PreconditionFailed, "queue 'q' in vhost '/' in use"},
		{&PreconditionError{Reason: InUse, Kind: "exchange", Name: "x", VHost: "/"}, amqp.PreconditionFailed, "exchange 'x' in vhost '/' in use"},
		{&PreconditionError{Reason: NotEmpty, Kind: "queue", Name: "q", VHost: "/"}, amqp.PreconditionFailed, "queue 'q' in vhost '/' not empty"},
		{&PreconditionError{Reason: QueueLimit, Name: "q", VHost: "/", Limit: 5}, amqp.PreconditionFailed,
			"cannot declare queue 'q': queue limit in vhost '/' (5) is reached"},
		{&PreconditionError{Reason: BindingRefused, Err: errors.New("binding: bad x-match")}, amqp.PreconditionFailed, "binding: bad x-match"},
		{&PreconditionError{Reason: UserIDMismatch, Got: "alice", Have: "guest"}, amqp.PreconditionFailed,
			"user_id property set to 'alice' but authenticated user was 'guest'"},
		{&PreconditionError{Reason: BadExpiration, Arg: "-1"}, amqp.PreconditionFailed, "invalid expiration '-1': " + queue.ExpirationError("-1")},
		{&PreconditionError{Reason: BadDeliveryMode, Got: uint8(3)}, amqp.PreconditionFailed, "invalid message: {delivery_mode_unknown,3}"},
		{&PreconditionError{Reason: TooLarge, Got: 200, Limit: 100}, amqp.PreconditionFailed, "message size 200 is larger than configured max size 100"},
		{&PreconditionError{Reason: NoReplyConsumer}, amqp.PreconditionFailed, "fast reply consumer does not exist"},
		{&NotImplementedError{Op: "queue.purge", Type: "stream", Queue: "s", VHost: "/"}, amqp.NotImplemented, "queue.purge not supported by stream queues queue 's' in vhost '/'"},
		{&UnknownTypeError{Type: "x-nope"}, amqp.CommandInvalid, exchange.UnknownKindText("x-nope")},
		{&StoreError{What: "exchange", Err: errors.New("disk full")}, amqp.InternalError, "cannot store exchange: disk full"},
		// Wrapped domain errors map as themselves; *amqp.Error passes;
		// anything else is 541.
		{fmt.Errorf("context: %w", &LockedError{Name: "q", VHost: "/"}), amqp.ResourceLocked, (&LockedError{Name: "q", VHost: "/"}).Error()},
		{amqp.Errorf(amqp.NotFound, 0, 0, "no previously declared queue"), amqp.NotFound, "no previously declared queue"},
		{errors.New("boom"), amqp.InternalError, "boom"},
	}
	for _, tt := range tests {
		got := replyError(tt.err)
		if got.Code != tt.code || got.Text != tt.text {
			t.Errorf("%T %+v:\n got %d %q\nwant %d %q", tt.err, tt.err, got.Code, got.Text, tt.code, tt.text)
		}
		if got.ClassID != 0 || got.MethodID != 0 {
			t.Errorf("%T: class/method %d/%d, want them left to the caller", tt.err, got.ClassID, got.MethodID)
		}
		if isDomainError(tt.err) && tt.err.Error() != tt.text {
			t.Errorf("%T.Error() = %q, want the reply text %q", tt.err, tt.err.Error(), tt.text)
		}
	}
	if replyError(nil) != nil {
		t.Error("replyError(nil) != nil")
	}
}

func isDomainError(err error) bool {
	switch err.(type) {
	case *NotFoundError, *LockedError, *AccessError, *PreconditionError, *NotImplementedError, *UnknownTypeError, *StoreError:
		return true
	}
	return false
}

// TestQueueDifference pins RabbitMQ's equivalence of re-declared queue
// arguments: integers and floats by value within their class, x-queue-type
// "classic" as no type, and only the arguments the type compares.
func TestQueueDifference(t *testing.T) {
	decl := func(args map[string]any) queue.Decl { return queue.Decl{Durable: true, Args: args} }
	for _, c := range []struct {
		have, got map[string]any
		compared  []string
		arg       string
	}{
		{map[string]any{"x-max-length": int32(5)}, map[string]any{"x-max-length": int64(5)}, queue.ClassicCompared, ""},
		{map[string]any{"x-max-length": int32(5)}, map[string]any{"x-max-length": 5.0}, queue.ClassicCompared, "x-max-length"},
		{map[string]any{"x-message-ttl": float32(1.5)}, map[string]any{"x-message-ttl": 1.5}, queue.ClassicCompared, ""},
		{map[string]any{"x-queue-type": "classic"}, nil, queue.ClassicCompared, ""},
		{nil, map[string]any{"x-queue-type": "classic"}, queue.ClassicCompared, ""},
		{nil, map[string]any{"x-queue-type": "quorum"}, queue.ClassicCompared, "x-queue-type"},
		{map[string]any{"x-queue-type": "quorum"}, nil, queue.QuorumCompared, "x-queue-type"},
		{nil, map[string]any{"x-delivery-limit": int32(4)}, queue.ClassicCompared, ""},
		{nil, map[string]any{"x-delivery-limit": int32(4)}, queue.QuorumCompared, "x-delivery-limit"},
		{nil, map[string]any{"x-max-length": int32(4)}, queue.StreamCompared, ""},
		{map[string]any{"x-expires": int32(1), "x-dead-letter-exchange": "d"}, nil, queue.ClassicCompared, "x-expires"},
		{map[string]any{"x-expires": int32(1), "x-dead-letter-exchange": "d"}, nil, queue.QuorumCompared, "x-dead-letter-exchange"},
	} {
		if arg, _, _ := queueDifference(decl(c.have), decl(c.got), c.compared); arg != c.arg {
			t.Errorf("%v then %v: difference %q, want %q", c.have, c.got, arg, c.arg)
		}
	}
	if arg, g, h := queueDifference(queue.Decl{Durable: true}, queue.Decl{}, nil); arg != "durable" || g != false || h != true {
		t.Errorf("durable difference: %q %v %v", arg, g, h)
	}
}
