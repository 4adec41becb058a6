package conformance

import (
	"context"
	"slices"
	"sort"

	amqp "github.com/rabbitmq/amqp091-go"
)

// clCollect drains each queue and returns its sorted bodies.
func clCollect(t T, ch *amqp.Channel, queues []string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, q := range queues {
		b := clGetAll(t, ch, q)
		sort.Strings(b)
		got[q] = b
	}
	return got
}

func init() {
	register(
		Case{
			// The default exchange routes a message to the queue whose name equals the routing key.
			Name: "exchange/default-routes-by-queue-name",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("hello"))
				d := clGetWait(t, ch, q, true)
				if string(d.Body) != "hello" || d.Exchange != "" || d.RoutingKey != q {
					t.Fatalf("got body %q exchange %q key %q", d.Body, d.Exchange, d.RoutingKey)
				}
			},
		},
		Case{
			// Publishing to an internal exchange: channel.close 403 ACCESS_REFUSED.
			Name: "exchange/internal-publish-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clUniq("x-int")
				clCleanupExchange(t, tg, x)
				if err := ch.ExchangeDeclare(x, "fanout", false, false, true, false, nil); err != nil {
					t.Fatalf("declare internal: %v", err)
				}
				closes := clNotifyClose(ch)
				clPublish(t, ch, x, "", clBody("m"))
				clExpectAsyncClose(t, conn, closes, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// An internal exchange still routes what reaches it through an exchange-to-exchange binding.
			Name: "exchange/internal-routes-via-e2e",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				src := clDeclareExchange(t, tg, ch, "fanout", nil)
				in := clUniq("x-int")
				clCleanupExchange(t, tg, in)
				if err := ch.ExchangeDeclare(in, "fanout", false, false, true, false, nil); err != nil {
					t.Fatalf("declare internal: %v", err)
				}
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "", in, nil)
				if err := ch.ExchangeBind(in, "", src, false, nil); err != nil {
					t.Fatalf("exchange.bind: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, src, "k", clBody("m"))
				if d := clGetWait(t, ch, q, true); string(d.Body) != "m" || d.Exchange != src {
					t.Fatalf("got %q via exchange %q, want m via %q", d.Body, d.Exchange, src)
				}
			},
		},
		Case{
			// exchange.bind: messages published to the source reach queues bound to the destination; the delivery names the source exchange.
			Name: "exchange/e2e-binding-routes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				src := clDeclareExchange(t, tg, ch, "topic", nil)
				dst := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "a.b", dst, nil)
				if err := ch.ExchangeBind(dst, "a.*", src, false, nil); err != nil {
					t.Fatalf("exchange.bind: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, src, "a.b", clBody("1"))
				clPublishConfirmed(t, pub, src, "a.c", clBody("2")) // matches src binding, not dst's
				clPublishConfirmed(t, pub, src, "x.b", clBody("3")) // matches nothing
				d := clGetWait(t, ch, q, true)
				if string(d.Body) != "1" || d.Exchange != src || d.RoutingKey != "a.b" {
					t.Fatalf("got %q exchange %q key %q", d.Body, d.Exchange, d.RoutingKey)
				}
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// exchange.unbind removes an exchange-to-exchange binding.
			Name: "exchange/e2e-unbind",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				src := clDeclareExchange(t, tg, ch, "fanout", nil)
				dst := clDeclareExchange(t, tg, ch, "fanout", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "", dst, nil)
				if err := ch.ExchangeBind(dst, "", src, false, nil); err != nil {
					t.Fatalf("exchange.bind: %v", err)
				}
				if err := ch.ExchangeUnbind(dst, "", src, false, nil); err != nil {
					t.Fatalf("exchange.unbind: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, src, "", clBody("m"))
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// A message reaching a queue through several paths (e2e cycle/diamond) is delivered once.
			Name: "exchange/e2e-diamond-delivers-once",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				src := clDeclareExchange(t, tg, ch, "fanout", nil)
				a := clDeclareExchange(t, tg, ch, "fanout", nil)
				b := clDeclareExchange(t, tg, ch, "fanout", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				for _, dst := range []string{a, b} {
					if err := ch.ExchangeBind(dst, "", src, false, nil); err != nil {
						t.Fatalf("exchange.bind: %v", err)
					}
					clBindQueue(t, ch, q, "", dst, nil)
				}
				// a cycle back to the source must not loop
				if err := ch.ExchangeBind(src, "", a, false, nil); err != nil {
					t.Fatalf("exchange.bind cycle: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, src, "", clBody("m"))
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"m"}) {
					t.Fatalf("got %q, want exactly one copy", got)
				}
			},
		},
		Case{
			// alternate-exchange: an unroutable message goes to the AE (keeping its routing key) and is not returned even if mandatory.
			Name: "exchange/alternate-exchange",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				ae := clDeclareExchange(t, tg, ch, "fanout", nil)
				aq := clDeclareQueue(t, tg, ch, "ae-q", nil)
				clBindQueue(t, ch, aq, "", ae, nil)
				x := clDeclareExchange(t, tg, ch, "direct", amqp.Table{"alternate-exchange": ae})
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "known", x, nil)
				pub := clConfirmChan(t, conn)
				returns := pub.NotifyReturn(make(chan amqp.Return, 1))
				clPublishConfirmed(t, pub, x, "known", clBody("routed"))
				clCtxPublishMandatory(t, pub, x, "unknown", clBody("unroutable"))
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"routed"}) {
					t.Fatalf("main queue got %q", got)
				}
				d := clGetWait(t, ch, aq, true)
				if string(d.Body) != "unroutable" || d.RoutingKey != "unknown" || d.Exchange != x {
					t.Fatalf("AE queue got %q key %q exchange %q", d.Body, d.RoutingKey, d.Exchange)
				}
				clGetEmpty(t, ch, aq)
				select {
				case r := <-returns:
					t.Fatalf("unexpected basic.return %d %s", r.ReplyCode, r.ReplyText)
				default:
				}
			},
		},
		Case{
			// An alternate-exchange that does not exist is ignored: the message is dropped (or returned if mandatory).
			Name: "exchange/alternate-exchange-missing",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", amqp.Table{"alternate-exchange": clUniq("missing")})
				pub := clConfirmChan(t, conn)
				returns := pub.NotifyReturn(make(chan amqp.Return, 1))
				clCtxPublishMandatory(t, pub, x, "k", clBody("m"))
				select {
				case r := <-returns:
					if r.ReplyCode != clCodeNoRoute {
						t.Fatalf("return code %d, want 312", r.ReplyCode)
					}
				default:
					t.Fatalf("no basic.return before the confirm")
				}
			},
		},
		Case{
			// direct: exact, case-sensitive routing-key match; one queue may have several keys.
			Name: "exchange/direct-exact-match",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q1 := clDeclareQueue(t, tg, ch, "q1", nil)
				q2 := clDeclareQueue(t, tg, ch, "q2", nil)
				clBindQueue(t, ch, q1, "a", x, nil)
				clBindQueue(t, ch, q1, "b", x, nil)
				clBindQueue(t, ch, q2, "b", x, nil)
				clBindQueue(t, ch, q2, "", x, nil)
				pub := clConfirmChan(t, conn)
				for _, k := range []string{"a", "b", "A", "a.b", "", "ab"} {
					clPublishConfirmed(t, pub, x, k, clBody("k="+k))
				}
				got := clCollect(t, ch, []string{q1, q2})
				want := map[string][]string{q1: {"k=a", "k=b"}, q2: {"k=", "k=b"}}
				for q, w := range want {
					if !slices.Equal(got[q], w) {
						t.Errorf("queue %s got %q, want %q", q, got[q], w)
					}
				}
			},
		},
		Case{
			// fanout: routes to every bound queue regardless of binding and routing keys.
			Name: "exchange/fanout-ignores-keys",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "fanout", nil)
				q1 := clDeclareQueue(t, tg, ch, "q1", nil)
				q2 := clDeclareQueue(t, tg, ch, "q2", nil)
				clBindQueue(t, ch, q1, "foo", x, nil)
				clBindQueue(t, ch, q2, "", x, nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "bar", clBody("1"))
				clPublishConfirmed(t, pub, x, "", clBody("2"))
				got := clCollect(t, ch, []string{q1, q2})
				for _, q := range []string{q1, q2} {
					if !slices.Equal(got[q], []string{"1", "2"}) {
						t.Errorf("queue %s got %q", q, got[q])
					}
				}
			},
		},
		Case{
			// Several bindings of one queue matching one message deliver a single copy.
			Name: "exchange/multiple-matching-bindings-one-copy",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "topic", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				for _, k := range []string{"a.b", "a.*", "#", "*.b"} {
					clBindQueue(t, ch, q, k, x, nil)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "a.b", clBody("m"))
				if got := clGetAll(t, ch, q); !slices.Equal(got, []string{"m"}) {
					t.Fatalf("got %q, want one copy", got)
				}
			},
		},
		Case{
			// topic: words split on '.', '*' = exactly one word, '#' = zero or more; "" is zero words; empty words count.
			Name: "exchange/topic-routing-table",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "topic", nil)
				keys := []string{"", "a", "b", "a.b", "a.b.c", "a.x.y.c", "a..b", ".", "a.", ".a", "a.b.b"}
				want := map[string][]string{
					"":      {""},
					"*":     {"a", "b"},
					"#":     keys,
					"#.#":   keys,
					"a.*":   {"a.", "a.b"},
					"a.#":   {"a", "a.", "a..b", "a.b", "a.b.b", "a.b.c", "a.x.y.c"},
					"#.b":   {"a..b", "a.b", "a.b.b", "b"},
					"*.b":   {"a.b"},
					"a.*.c": {"a.b.c"},
					"a.#.c": {"a.b.c", "a.x.y.c"},
					"*.*":   {".", ".a", "a.", "a.b"},
					"a.b":   {"a.b"},
					"a..b":  {"a..b"},
					"*.#":   {".", ".a", "a", "a.", "a..b", "a.b", "a.b.b", "a.b.c", "a.x.y.c", "b"},
					"#.*.#": {".", ".a", "a", "a.", "a..b", "a.b", "a.b.b", "a.b.c", "a.x.y.c", "b"},
					"a.#.b": {"a..b", "a.b", "a.b.b"},
				}
				queues := map[string]string{}
				var qs []string
				for pat := range want {
					q := clDeclareQueue(t, tg, ch, "topic", nil)
					clBindQueue(t, ch, q, pat, x, nil)
					queues[pat] = q
					qs = append(qs, q)
				}
				pub := clConfirmChan(t, conn)
				for _, k := range keys {
					clPublishConfirmed(t, pub, x, k, clBody(k))
				}
				got := clCollect(t, ch, qs)
				for pat, w := range want {
					w = slices.Clone(w)
					sort.Strings(w)
					if g := got[queues[pat]]; !slices.Equal(g, w) {
						t.Errorf("pattern %q matched %q, want %q", pat, g, w)
					}
				}
			},
		},
		Case{
			// headers: x-match all (default) / any; x-* binding args are ignored; an empty binding matches everything; value types are not compared strictly.
			Name: "exchange/headers-routing",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "headers", nil)
				bindings := map[string]amqp.Table{
					"all":       {"x-match": "all", "a": int32(1), "b": int32(2)},
					"any":       {"x-match": "any", "a": int32(1), "b": int32(2)},
					"default":   {"a": int32(1)},
					"empty":     {},
					"x-ignored": {"x-match": "all", "a": int32(1), "x-foo": "bar"},
					"string":    {"s": "v"},
				}
				msgs := map[string]amqp.Table{
					"ab":       {"a": int32(1), "b": int32(2)},
					"a":        {"a": int32(1)},
					"bc":       {"b": int32(2), "c": int32(3)},
					"none":     nil,
					"a-str":    {"a": "1"},
					"ab-wide":  {"a": int64(1), "b": int16(2)},
					"a-wrong":  {"a": int32(2), "b": int32(2)},
					"s":        {"s": "v"},
					"s-bytes":  {"s": []byte("v")},
					"a-with-x": {"a": int32(1), "x-foo": "other"},
				}
				want := map[string][]string{
					"all":       {"ab", "ab-wide"},
					"any":       {"a", "a-with-x", "a-wrong", "ab", "ab-wide", "bc"},
					"default":   {"a", "a-with-x", "ab", "ab-wide"},
					"empty":     {"a", "a-str", "a-with-x", "a-wrong", "ab", "ab-wide", "bc", "none", "s", "s-bytes"},
					"x-ignored": {"a", "a-with-x", "ab", "ab-wide"},
					"string":    {"s", "s-bytes"},
				}
				queues := map[string]string{}
				var qs []string
				for b, args := range bindings {
					q := clDeclareQueue(t, tg, ch, "hdr", nil)
					clBindQueue(t, ch, q, "ignored-key", x, args)
					queues[b] = q
					qs = append(qs, q)
				}
				pub := clConfirmChan(t, conn)
				for m, h := range msgs {
					clPublishConfirmed(t, pub, x, "any-key", amqp.Publishing{Headers: h, Body: []byte(m)})
				}
				got := clCollect(t, ch, qs)
				for b, w := range want {
					if g := got[queues[b]]; !slices.Equal(g, w) {
						t.Errorf("binding %s (%v) matched %q, want %q", b, bindings[b], g, w)
					}
				}
			},
		},
		Case{
			// queue.bind to a missing queue: channel.close 404 NOT_FOUND.
			Name: "exchange/bind-missing-queue-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.QueueBind(clUniq("missing"), "k", x, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// queue.bind to a missing exchange: channel.close 404 NOT_FOUND.
			Name: "exchange/bind-missing-exchange-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				err := ch.QueueBind(q, "k", clUniq("missing"), false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// exchange.bind with a missing source or destination: channel.close 404 NOT_FOUND.
			Name: "exchange/e2e-bind-missing-404",
			Run: func(t T, tg Target) {
				conn := clDial(t, tg)
				ch := clOpenChan(t, conn)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.ExchangeBind(x, "k", clUniq("missing"), false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
				ch2 := clOpenChan(t, conn)
				err = ch2.ExchangeBind(clUniq("missing"), "k", x, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// queue.bind to the default exchange: channel.close 403 ACCESS_REFUSED.
			Name: "exchange/bind-default-exchange-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				err := ch.QueueBind(q, "other", "", false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// queue.unbind of a binding that does not exist succeeds (unbind-ok).
			Name: "exchange/unbind-missing-binding-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				if err := ch.QueueUnbind(q, "nope", x, nil); err != nil {
					t.Fatalf("queue.unbind: %v", err)
				}
			},
		},
		Case{
			// Binding twice with the same key and args is idempotent (one copy delivered).
			Name: "exchange/bind-twice-idempotent",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "k", x, nil)
				clBindQueue(t, ch, q, "k", x, nil)
				if err := ch.QueueUnbind(q, "k", x, nil); err != nil {
					t.Fatalf("queue.unbind: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "k", clBody("m"))
				if got := clGetAll(t, ch, q); len(got) != 0 {
					t.Fatalf("one unbind should remove the (single) binding, got %q", got)
				}
			},
		},
		Case{
			// A headers binding with an invalid x-match value: channel.close 406 PRECONDITION_FAILED.
			Name: "exchange/headers-invalid-x-match-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "headers", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				err := ch.QueueBind(q, "", x, false, amqp.Table{"x-match": "some", "a": "b"})
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// x-match any-with-x / all-with-x (RabbitMQ 3.10) also match on x- headers.
			Name: "exchange/headers-with-x-match",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "headers", nil)
				qAny := clDeclareQueue(t, tg, ch, "any", nil)
				qAll := clDeclareQueue(t, tg, ch, "all", nil)
				clBindQueue(t, ch, qAny, "", x, amqp.Table{"x-match": "any-with-x", "x-k": "v"})
				clBindQueue(t, ch, qAll, "", x, amqp.Table{"x-match": "all-with-x", "x-k": "v", "a": "1"})
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "", amqp.Publishing{Headers: amqp.Table{"x-k": "v"}, Body: []byte("xk")})
				clPublishConfirmed(t, pub, x, "", amqp.Publishing{Headers: amqp.Table{"x-k": "v", "a": "1"}, Body: []byte("xk-a")})
				clPublishConfirmed(t, pub, x, "", amqp.Publishing{Headers: amqp.Table{"a": "1"}, Body: []byte("a")})
				got := clCollect(t, ch, []string{qAny, qAll})
				if !slices.Equal(got[qAny], []string{"xk", "xk-a"}) || !slices.Equal(got[qAll], []string{"xk-a"}) {
					t.Fatalf("any-with-x got %q, all-with-x got %q", got[qAny], got[qAll])
				}
			},
		},
		Case{
			// A mandatory message that is routed produces no basic.return.
			Name: "exchange/mandatory-routed-no-return",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				returns := pub.NotifyReturn(make(chan amqp.Return, 1))
				clCtxPublishMandatory(t, pub, "", q, clBody("m"))
				select {
				case r := <-returns:
					t.Fatalf("unexpected return %d", r.ReplyCode)
				default:
				}
				clGetWait(t, ch, q, true)
			},
		},
	)
}

// clCtxPublishMandatory publishes a mandatory message on a confirm channel and
// waits for its confirm. RabbitMQ sends a basic.return before the ack, so a
// NotifyReturn channel registered earlier already holds the return when this
// returns.
func clCtxPublishMandatory(t T, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clWaitTimeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, msg)
	if err != nil {
		t.Fatalf("basic.publish to %q/%q: %v", exchange, key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("waiting for the confirm of %q/%q: %v", exchange, key, err)
	}
	if !ok {
		t.Fatalf("mandatory publish to %q/%q nacked", exchange, key)
	}
}
