package conformance

import (
	"fmt"
	"maps"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Re-declaring an existing queue, as RabbitMQ 3.10.8 answers it: the
// flags and then the arguments its type compares, in the type's order;
// the declaration's argument values are not checked (only a new queue's
// are). An argument present on one side only is worded with its AMQP
// type ("received none but current is the value '5' of type
// 'signedint'"); present on both, by value alone ("received '6' but
// current is '5'"). A new quorum or stream queue's argument values are
// checked before its flags.

// prRedeclare declares queue q with first (durable), then re-declares it
// with second and durable2, and returns the 406 text with the queue's name
// replaced by Q ("" when the re-declaration succeeded).
func prRedeclare(t T, tg Target, first, second amqp.Table, durable2 bool) string {
	t.Helper()
	conn, ch := clDialChan(t, tg)
	q := clUniq("pr")
	clCleanupQueue(t, tg, q)
	if _, err := ch.QueueDeclare(q, true, false, false, false, first); err != nil {
		t.Fatalf("declare %v: %v", first, err)
	}
	_, err := ch.QueueDeclare(q, durable2, false, false, false, second)
	if err == nil {
		return ""
	}
	ae := clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
	want := fmt.Sprintf(" for queue '%s' in vhost '%s': ", q, acVHost(tg))
	return strings.Replace(ae.Reason, want, " for queue 'Q' in vhost '/': ", 1)
}

func prWith(typ string, kv ...any) amqp.Table {
	a := amqp.Table{}
	if typ != "" {
		a["x-queue-type"] = typ
	}
	for i := 0; i < len(kv); i += 2 {
		a[kv[i].(string)] = kv[i+1]
	}
	return a
}

func init() {
	const pf = "PRECONDITION_FAILED - inequivalent arg '%s' for queue 'Q' in vhost '/': received %s but current is %s"
	type rc struct {
		typ           string
		first, second []any
		durable2      bool
		arg, got, hav string // "" arg: accepted
	}
	texts := []rc{
		// One side absent: "none" against the value with its type.
		{"", []any{"x-max-length", int64(100000)}, nil, true, "x-max-length", "none", "the value '100000' of type 'long'"},
		{"", nil, []any{"x-max-length", int32(100000)}, true, "x-max-length", "the value '100000' of type 'signedint'", "none"},
		{"", []any{"x-single-active-consumer", true}, nil, true, "x-single-active-consumer", "none", "the value 'true' of type 'bool'"},
		{"", []any{"x-dead-letter-exchange", "dlx"}, nil, true, "x-dead-letter-exchange", "none", "the value 'dlx' of type 'longstr'"},
		{"", nil, []any{"x-queue-type", "quorum"}, true, "x-queue-type", "the value 'quorum' of type 'longstr'", "none"},
		{"quorum", []any{"x-delivery-limit", int32(4)}, nil, true, "x-delivery-limit", "none", "the value '4' of type 'signedint'"},
		{"stream", nil, []any{"x-max-age", "1D"}, true, "x-max-age", "the value '1D' of type 'longstr'", "none"},
		{"stream", []any{"x-max-length-bytes", int64(100000)}, nil, true, "x-max-length-bytes", "none", "the value '100000' of type 'long'"},
		// Both present: the values alone, whatever their types.
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", int32(6)}, true, "x-max-length", "'6'", "'5'"},
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", "5"}, true, "x-max-length", "'5'", "'5'"},
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", true}, true, "x-max-length", "'true'", "'5'"},
		{"", []any{"x-single-active-consumer", true}, []any{"x-single-active-consumer", false}, true, "x-single-active-consumer", "'false'", "'true'"},
		{"", []any{"x-single-active-consumer", true}, []any{"x-single-active-consumer", int32(1)}, true, "x-single-active-consumer", "'1'", "'true'"},
		{"", []any{"x-dead-letter-exchange", "a"}, []any{"x-dead-letter-exchange", int32(5)}, true, "x-dead-letter-exchange", "'5'", "'a'"},
		{"quorum", nil, []any{"x-queue-type", "classic"}, true, "x-queue-type", "'classic'", "'quorum'"},
		// Integers of any width compare by value.
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", int64(5)}, true, "", "", ""},
		// Invalid values are not checked on re-declaration.
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", "abc"}, true, "x-max-length", "'abc'", "'5'"},
		{"", []any{"x-max-length", int32(5)}, []any{"x-max-length", int32(-1)}, true, "x-max-length", "'-1'", "'5'"},
		{"", nil, []any{"x-queue-type", "stream", "x-max-age", "1X"}, true, "x-queue-type", "the value 'stream' of type 'longstr'", "none"},
		// The flags come first: a replicated queue re-declared
		// non-durable is inequivalent, not an invalid property.
		{"quorum", []any{"x-max-length", int32(5)}, nil, false, "durable", "'false'", "'true'"},
		{"stream", nil, nil, false, "durable", "'false'", "'true'"},
	}
	register(Case{
		Name: "queue/redeclare-inequivalent-texts",
		Run: func(t T, tg Target) {
			for _, c := range texts {
				first, second := prWith(c.typ, c.first...), prWith(c.typ, c.second...)
				want := ""
				if c.arg != "" {
					want = fmt.Sprintf(pf, c.arg, c.got, c.hav)
				}
				if got := prRedeclare(t, tg, first, second, c.durable2); got != want {
					t.Errorf("%s %v then %v durable=%v:\n got %q\nwant %q", c.typ, first, second, c.durable2, got, want)
				}
			}
		},
	})

	// What each type compares, in RabbitMQ's order: declared with all of
	// them and re-declared with none, the queue names them one at a time
	// as the re-declaration adds each one named; an argument a type does
	// not compare is taken (and ignored) on re-declaration.
	type cmp struct {
		typ     string
		all     amqp.Table
		order   []string
		ignored amqp.Table
	}
	for _, c := range []cmp{
		{"classic", amqp.Table{"x-expires": int32(100000), "x-message-ttl": int32(100000), "x-max-length": int32(100000),
			"x-max-length-bytes": int32(100000), "x-max-priority": int32(3), "x-overflow": "reject-publish",
			"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k", "x-queue-mode": "lazy", "x-queue-version": int32(2),
			"x-single-active-consumer": true, "x-queue-master-locator": "client-local"},
			[]string{"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-length",
				"x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
				"x-single-active-consumer", "x-queue-master-locator"},
			amqp.Table{"x-delivery-limit": int32(4), "x-dead-letter-strategy": "at-least-once", "x-max-in-memory-length": int32(1),
				"x-max-in-memory-bytes": int32(1), "x-quorum-initial-group-size": int32(1), "x-max-age": "1D",
				"x-stream-max-segment-size-bytes": int32(1000), "x-initial-cluster-size": int32(1),
				"x-queue-leader-locator": "balanced", "x-queue-type": "classic"}},
		{"quorum", amqp.Table{"x-expires": int32(100000), "x-message-ttl": int32(100000), "x-max-length": int32(100000),
			"x-max-length-bytes": int32(100000), "x-overflow": "reject-publish", "x-dead-letter-exchange": "dlx",
			"x-dead-letter-routing-key": "k", "x-dead-letter-strategy": "at-least-once", "x-single-active-consumer": true,
			"x-delivery-limit": int32(4), "x-max-in-memory-length": int32(10), "x-max-in-memory-bytes": int32(1000),
			"x-quorum-initial-group-size": int32(1), "x-queue-leader-locator": "balanced", "x-queue-type": "quorum"},
			[]string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-expires",
				"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes", "x-overflow",
				"x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size", "x-delivery-limit",
				"x-message-ttl", "x-queue-leader-locator"},
			amqp.Table{"x-max-priority": int32(3), "x-queue-mode": "lazy", "x-queue-version": int32(2),
				"x-queue-master-locator": "client-local", "x-max-age": "1D", "x-stream-max-segment-size-bytes": int32(1000),
				"x-initial-cluster-size": int32(1)}},
		{"stream", amqp.Table{"x-max-length-bytes": int32(100000), "x-max-age": "1D", "x-stream-max-segment-size-bytes": int32(100000),
			"x-initial-cluster-size": int32(1), "x-queue-leader-locator": "balanced", "x-queue-type": "stream"},
			[]string{"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
				"x-initial-cluster-size", "x-queue-leader-locator"},
			amqp.Table{"x-expires": int32(100000), "x-message-ttl": int32(100000), "x-max-length": int32(5),
				"x-max-priority": int32(3), "x-overflow": "reject-publish", "x-dead-letter-exchange": "dlx",
				"x-dead-letter-routing-key": "k", "x-dead-letter-strategy": "at-least-once", "x-queue-mode": "lazy",
				"x-queue-version": int32(2), "x-single-active-consumer": true, "x-queue-master-locator": "client-local",
				"x-delivery-limit": int32(4), "x-max-in-memory-length": int32(10), "x-max-in-memory-bytes": int32(1000),
				"x-quorum-initial-group-size": int32(1)}},
	} {
		register(Case{
			Name: "queue/redeclare-compared-args-" + c.typ,
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clUniq("pr-" + c.typ)
				clCleanupQueue(t, tg, q)
				if _, err := ch.QueueDeclare(q, true, false, false, false, c.all); err != nil {
					t.Fatalf("declare: %v", err)
				}
				second := amqp.Table{}
				var order []string
				for range len(c.all) + 1 {
					ch := clOpenChan(t, clDial(t, tg))
					_, err := ch.QueueDeclare(q, true, false, false, false, second)
					if err == nil {
						break
					}
					ae, ok := err.(*amqp.Error)
					if !ok {
						t.Fatalf("re-declare: %v", err)
					}
					arg := between(ae.Reason)
					order = append(order, arg)
					v, ok := c.all[arg]
					if !ok {
						t.Fatalf("re-declare refused for %q, not declared: %q", arg, ae.Reason)
					}
					second[arg] = v
				}
				if fmt.Sprint(order) != fmt.Sprint(c.order) {
					t.Errorf("compared in order\n %v\nwant\n %v", order, c.order)
				}
				with := maps.Clone(c.all)
				maps.Copy(with, c.ignored)
				if _, err := clOpenChan(t, clDial(t, tg)).QueueDeclare(q, true, false, false, false, with); err != nil {
					t.Errorf("re-declare with arguments %s does not compare: %v", c.typ, err)
				}
			},
		})
	}

	// A new quorum or stream queue's argument values are checked before
	// its flags (non-durable, exclusive, auto-delete).
	const invalid = "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '%s': %s"
	const prop = "PRECONDITION_FAILED - invalid property '%s' for queue '%s' in vhost '%s'"
	type vc struct {
		durable, exclusive, autoDelete bool
		args                           amqp.Table
		arg, reason                    string // arg "": the reason is a property
	}
	register(Case{
		Name: "queue-type/replicated-arg-values-before-properties",
		Run: func(t T, tg Target) {
			for _, c := range []vc{
				{false, false, false, prWith("stream", "x-max-age", "1X"), "x-max-age", "invalid_max_age"},
				{false, false, false, prWith("stream", "x-max-age", "10"), "x-max-age", "invalid_max_age"},
				{true, true, false, prWith("stream", "x-max-age", "1.5D"), "x-max-age", "invalid_max_age"},
				{true, false, true, prWith("stream", "x-max-age", true), "x-max-age", "{unacceptable_type,bool}"},
				{false, false, false, prWith("stream", "x-stream-max-segment-size-bytes", int32(-1)), "x-stream-max-segment-size-bytes", "{value_negative,-1}"},
				{false, false, false, prWith("stream", "x-max-length-bytes", "abc"), "x-max-length-bytes", `"expected integer, got longstr"`},
				{false, false, false, prWith("stream", "x-initial-cluster-size", "abc"), "x-initial-cluster-size", `"expected integer, got longstr"`},
				{false, false, false, prWith("stream", "x-initial-cluster-size", int32(-1)), "x-initial-cluster-size", "{value_negative,-1}"},
				{false, false, false, prWith("stream", "x-queue-leader-locator", "bogus"), "x-queue-leader-locator", "invalid_queue_locator_arg"},
				{false, false, false, prWith("stream", "x-max-length", int32(5), "x-max-age", "1X"), "x-max-age", "invalid_max_age"},
				{false, false, false, prWith("quorum", "x-max-length", "abc"), "x-max-length", `"expected integer, got longstr"`},
				{false, false, false, prWith("quorum", "x-quorum-initial-group-size", "abc"), "x-quorum-initial-group-size", `"expected integer, got longstr"`},
				{false, false, false, prWith("quorum", "x-quorum-initial-group-size", int32(0)), "x-quorum-initial-group-size", "{value_zero,0}"},
				{false, false, false, prWith("quorum", "x-dead-letter-strategy", "bogus"), "x-dead-letter-strategy", "invalid_dlx_strategy"},
				{false, false, false, prWith("quorum", "x-max-in-memory-length", int32(-1)), "x-max-in-memory-length", "{value_negative,-1}"},
				{false, false, false, prWith("quorum", "x-max-in-memory-bytes", "abc"), "x-max-in-memory-bytes", `"expected integer, got longstr"`},
				{false, false, false, prWith("quorum", "x-queue-leader-locator", "bogus"), "x-queue-leader-locator", "invalid_queue_locator_arg"},
				{false, false, false, prWith("quorum", "x-max-priority", int32(5), "x-dead-letter-strategy", "bogus"), "x-dead-letter-strategy", "invalid_dlx_strategy"},
				// x-delivery-limit's value is not checked: the flag is.
				{false, false, false, prWith("quorum", "x-delivery-limit", "abc"), "", "non-durable"},
				{false, false, false, prWith("quorum", "x-delivery-limit", int32(-1)), "", "non-durable"},
			} {
				conn, ch := clDialChan(t, tg)
				q := clUniq("prv")
				clCleanupQueue(t, tg, q)
				_, err := ch.QueueDeclare(q, c.durable, c.autoDelete, c.exclusive, false, c.args)
				ae := clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
				want := fmt.Sprintf(invalid, c.arg, q, acVHost(tg), c.reason)
				if c.arg == "" {
					want = fmt.Sprintf(prop, c.reason, q, acVHost(tg))
				}
				if ae.Reason != want {
					t.Errorf("%v durable=%v exclusive=%v auto-delete=%v:\n got %q\nwant %q", c.args, c.durable, c.exclusive, c.autoDelete, ae.Reason, want)
				}
				conn.Close()
			}
		},
	})
}

// between returns the text between the first two single quotes of s.
func between(s string) string {
	i := -1
	for j := 0; j < len(s); j++ {
		if s[j] == '\'' {
			if i < 0 {
				i = j
			} else {
				return s[i+1 : j]
			}
		}
	}
	return ""
}
