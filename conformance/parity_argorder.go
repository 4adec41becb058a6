package conformance

import (
	"fmt"
	"maps"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Of several invalid arguments of a new queue, RabbitMQ 3.10 names one
// deterministically: the type of x-dead-letter-exchange first (its channel
// checks it before anything else), then x-queue-type, then the values of
// the arguments the queue's type takes in rabbit_amqqueue's declare_args
// order (x-expires, x-message-ttl, x-dead-letter-exchange,
// x-dead-letter-routing-key, x-dead-letter-strategy, x-max-length,
// x-max-length-bytes, x-max-in-memory-length, x-max-in-memory-bytes,
// x-max-priority, x-overflow, x-queue-mode, x-queue-version,
// x-single-active-consumer, x-quorum-initial-group-size, x-max-age,
// x-stream-max-segment-size-bytes, x-initial-cluster-size,
// x-queue-leader-locator), then the arguments the type refuses, then the
// flags of a quorum or stream queue, then the stream's largest segment
// size. Arguments a type refuses are not value-checked, and x-delivery-limit
// never is. (Of several refused arguments RabbitMQ names the first in the
// client's table order; no case here depends on it.)
//
// Each declaration is repeated: a client sends a table in its own order
// (amqp091-go in Go map order), and the answer must not depend on it.

const argOrderRepeats = 6

func init() {
	const (
		arg   = "PRECONDITION_FAILED - invalid arg '%[3]s' for queue '%[1]s' in vhost '%[2]s': %[4]s"
		typ   = "PRECONDITION_FAILED - invalid arg '%[3]s' for queue '%[1]s' in vhost '%[2]s' of queue type %[4]s"
		prop  = "PRECONDITION_FAILED - invalid property '%[3]s' for queue '%[1]s' in vhost '%[2]s'"
		dlxTy = "PRECONDITION_FAILED - invalid type '%[4]s' for arg '%[3]s' in queue '%[1]s' in vhost '%[2]s'"
		own   = "PRECONDITION_FAILED - %[3]s"
	)
	with := func(qtype string, kv ...any) amqp.Table {
		t := amqp.Table{}
		if qtype != "" {
			t["x-queue-type"] = qtype
		}
		for i := 0; i < len(kv); i += 2 {
			t[kv[i].(string)] = kv[i+1]
		}
		return t
	}
	const tooLarge = int64(4_000_000_000) // above the stream's 3,000,000,000
	type orderCase struct {
		name         string
		durable      bool
		args         amqp.Table
		format       string
		what, detail string
	}
	for _, c := range []orderCase{
		// Classic queues: declare_args order.
		{"classic-expires-before-message-ttl", false, with("", "x-message-ttl", int32(-1), "x-expires", int32(0)), arg, "x-expires", "{value_zero,0}"},
		{"classic-message-ttl-before-max-length", false, with("", "x-max-length", int32(-1), "x-message-ttl", int32(-1)), arg, "x-message-ttl", "{value_negative,-1}"},
		{"classic-max-length-before-max-length-bytes", false, with("", "x-max-length-bytes", int32(-1), "x-max-length", int32(-1)), arg, "x-max-length", "{value_negative,-1}"},
		{"classic-max-length-bytes-before-max-priority", false, with("", "x-max-priority", int32(300), "x-max-length-bytes", int32(-1)), arg, "x-max-length-bytes", "{value_negative,-1}"},
		{"classic-max-priority-before-overflow", false, with("", "x-overflow", "bogus", "x-max-priority", int32(300)), arg, "x-max-priority", "{max_value_exceeded,300}"},
		{"classic-overflow-before-queue-mode", false, with("", "x-queue-mode", "bogus", "x-overflow", "bogus"), arg, "x-overflow", "invalid_overflow"},
		{"classic-queue-mode-before-single-active-consumer", false, with("", "x-single-active-consumer", "x", "x-queue-mode", "bogus"), arg, "x-queue-mode", `"unsupported queue mode 'bogus'"`},
		{"classic-queue-version-before-single-active-consumer", false, with("", "x-single-active-consumer", "x", "x-queue-version", int32(3)), arg, "x-queue-version", `"unsupported queue version '3'"`},
		{"classic-dead-letter-routing-key-before-max-length", false, with("", "x-max-length", int32(-1), "x-dead-letter-routing-key", "k"), arg, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined"},
		{"classic-message-ttl-before-dead-letter-routing-key", false, with("", "x-dead-letter-routing-key", "k", "x-message-ttl", int32(-1)), arg, "x-message-ttl", "{value_negative,-1}"},
		{"classic-queue-type-before-expires", false, with("bogus", "x-expires", int32(0)), arg, "x-queue-type", `"unsupported queue type 'bogus'"`},
		{"classic-dead-letter-exchange-type-before-queue-type", false, with("bogus", "x-dead-letter-exchange", int32(1)), dlxTy, "x-dead-letter-exchange", "signedint"},
		{"classic-dead-letter-exchange-type-before-expires", false, with("", "x-expires", int32(0), "x-dead-letter-exchange", int32(1)), dlxTy, "x-dead-letter-exchange", "signedint"},
		{"classic-refused-arg-value-unchecked", false, with("", "x-max-age", "1X", "x-max-length", int32(-1)), arg, "x-max-length", "{value_negative,-1}"},
		{"classic-values-before-refused-arg", false, with("", "x-delivery-limit", int32(1), "x-single-active-consumer", "x"), arg, "x-single-active-consumer", "{unacceptable_type,longstr}"},

		// Quorum queues: the same order over the arguments they take,
		// before the refused ones and the flags.
		{"quorum-message-ttl-before-max-length", true, with("quorum", "x-max-length", int32(-1), "x-message-ttl", int32(-1)), arg, "x-message-ttl", "{value_negative,-1}"},
		{"quorum-expires-before-message-ttl", true, with("quorum", "x-message-ttl", int32(-1), "x-expires", int32(0)), arg, "x-expires", "{value_zero,0}"},
		{"quorum-dead-letter-strategy-before-max-length", true, with("quorum", "x-max-length", int32(-1), "x-dead-letter-strategy", "bogus"), arg, "x-dead-letter-strategy", "invalid_dlx_strategy"},
		{"quorum-max-length-bytes-before-in-memory-length", true, with("quorum", "x-max-in-memory-length", int32(-1), "x-max-length-bytes", int32(-1)), arg, "x-max-length-bytes", "{value_negative,-1}"},
		{"quorum-overflow-before-single-active-consumer", true, with("quorum", "x-single-active-consumer", "x", "x-overflow", "bogus"), arg, "x-overflow", "invalid_overflow"},
		{"quorum-initial-group-size-before-leader-locator", true, with("quorum", "x-queue-leader-locator", "bogus", "x-quorum-initial-group-size", int32(0)), arg, "x-quorum-initial-group-size", "{value_zero,0}"},
		{"quorum-refused-arg-value-unchecked", true, with("quorum", "x-max-priority", int32(300), "x-single-active-consumer", "x"), arg, "x-single-active-consumer", "{unacceptable_type,longstr}"},
		{"quorum-delivery-limit-unchecked", true, with("quorum", "x-delivery-limit", "abc", "x-max-length", int32(-1)), arg, "x-max-length", "{value_negative,-1}"},
		{"quorum-values-before-non-durable", false, with("quorum", "x-max-priority", int32(1), "x-expires", int32(0)), arg, "x-expires", "{value_zero,0}"},

		// Streams: x-max-age comes before the segment size, and the
		// largest segment size is checked last, after the refused
		// arguments and the flags.
		{"stream-max-age-before-segment-size", true, with("stream", "x-stream-max-segment-size-bytes", int32(-1), "x-max-age", "1X"), arg, "x-max-age", "invalid_max_age"},
		{"stream-max-length-bytes-before-max-age", true, with("stream", "x-max-age", "0D", "x-max-length-bytes", int32(-1)), arg, "x-max-length-bytes", "{value_negative,-1}"},
		{"stream-max-age-before-initial-cluster-size", true, with("stream", "x-initial-cluster-size", int32(0), "x-max-age", "1X"), arg, "x-max-age", "invalid_max_age"},
		{"stream-initial-cluster-size-before-leader-locator", true, with("stream", "x-queue-leader-locator", "bogus", "x-initial-cluster-size", int32(0)), arg, "x-initial-cluster-size", "{value_zero,0}"},
		{"stream-segment-size-before-refused-arg", true, with("stream", "x-max-length", int32(1), "x-stream-max-segment-size-bytes", int32(-1)), arg, "x-stream-max-segment-size-bytes", "{value_negative,-1}"},
		{"stream-initial-cluster-size-before-largest-segment", true, with("stream", "x-stream-max-segment-size-bytes", tooLarge, "x-initial-cluster-size", int32(0)), arg, "x-initial-cluster-size", "{value_zero,0}"},
		{"stream-refused-arg-before-largest-segment", true, with("stream", "x-stream-max-segment-size-bytes", tooLarge, "x-max-length", int32(1)), typ, "x-max-length", "rabbit_stream_queue"},
		{"stream-non-durable-before-largest-segment", false, with("stream", "x-stream-max-segment-size-bytes", tooLarge), prop, "non-durable", ""},
		{"stream-largest-segment", true, with("stream", "x-stream-max-segment-size-bytes", tooLarge), own, "Exceeded max value for x-stream-max-segment-size-bytes", ""},
		{"stream-dead-letter-exchange-type-first", true, with("stream", "x-max-length", int32(1), "x-dead-letter-exchange", int32(1)), dlxTy, "x-dead-letter-exchange", "signedint"},
	} {
		register(Case{Name: "queue-args/order-" + c.name, Run: func(t T, tg Target) {
			conn := clDial(t, tg)
			for i := range argOrderRepeats {
				ch := clOpenChan(t, conn)
				name := clUniq("ao")
				clCleanupQueue(t, tg, name)
				_, err := ch.QueueDeclare(name, c.durable, false, false, false, maps.Clone(c.args))
				ae := clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
				if want := fmt.Sprintf(c.format, name, acVHost(tg), c.what, c.detail); ae.Reason != want {
					t.Fatalf("declaration %d of %v (durable %v):\n got %q\nwant %q", i+1, c.args, c.durable, ae.Reason, want)
				}
			}
		}})
	}
}
