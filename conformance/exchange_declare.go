package conformance

import (
	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	for _, kind := range []string{"direct", "fanout", "topic", "headers"} {
		register(Case{
			// exchange.declare of each built-in type succeeds and a passive declare then finds it.
			Name: "exchange/declare-" + kind,
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, kind, nil)
				if !clExchangeExists(t, conn, name) {
					t.Fatalf("exchange %s not found after declare", name)
				}
			},
		})
	}

	register(
		Case{
			// Redeclaring with identical type/durable/auto-delete/internal/args is a no-op success.
			Name: "exchange/redeclare-equivalent-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				name := clUniq("x")
				clCleanupExchange(t, tg, name)
				for i := 0; i < 2; i++ {
					if err := ch.ExchangeDeclare(name, "topic", true, false, false, false, nil); err != nil {
						t.Fatalf("declare #%d: %v", i+1, err)
					}
				}
			},
		},
		Case{
			// Redeclaring with another type: channel.close 406 PRECONDITION_FAILED ("inequivalent arg 'type'").
			Name: "exchange/redeclare-different-type-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.ExchangeDeclare(name, "fanout", false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Redeclaring with another durable flag: channel.close 406.
			Name: "exchange/redeclare-different-durable-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.ExchangeDeclare(name, "direct", true, false, false, false, nil)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Redeclaring with another auto-delete flag: channel.close 406.
			Name: "exchange/redeclare-different-auto-delete-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.ExchangeDeclare(name, "direct", false, true, false, false, nil)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Redeclaring with another internal flag: channel.close 406.
			Name: "exchange/redeclare-different-internal-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", nil)
				err := ch.ExchangeDeclare(name, "direct", false, false, true, false, nil)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Redeclaring with a different alternate-exchange argument: channel.close 406.
			Name: "exchange/redeclare-different-alternate-exchange-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", amqp.Table{"alternate-exchange": "ae1"})
				err := ch.ExchangeDeclare(name, "direct", false, false, false, false, amqp.Table{"alternate-exchange": "ae2"})
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Arguments other than alternate-exchange are not compared on redeclare: success.
			Name: "exchange/redeclare-other-args-ignored",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", amqp.Table{"x-foo": "a"})
				if err := ch.ExchangeDeclare(name, "direct", false, false, false, false, amqp.Table{"x-foo": "b"}); err != nil {
					t.Fatalf("redeclare with another x-foo: %v", err)
				}
			},
		},
		Case{
			// Passive declare of a missing exchange: channel.close 404 NOT_FOUND.
			Name: "exchange/declare-passive-missing-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDeclarePassive(clUniq("missing"), "direct", false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// Passive declare of an existing exchange succeeds and ignores type/flags it carries.
			Name: "exchange/declare-passive-existing-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "fanout", nil)
				if err := ch.ExchangeDeclarePassive(name, "topic", true, true, false, false, nil); err != nil {
					t.Fatalf("passive declare: %v", err)
				}
			},
		},
		Case{
			// Declaring a new exchange named "amq.*": channel.close 403 ACCESS_REFUSED.
			Name: "exchange/declare-amq-prefix-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := "amq." + clUniq("x")
				clCleanupExchange(t, tg, name)
				err := ch.ExchangeDeclare(name, "direct", false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// Redeclaring an existing amq.* exchange with equivalent properties succeeds.
			Name: "exchange/redeclare-amq-direct-equivalent-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				if err := ch.ExchangeDeclare("amq.direct", "direct", true, false, false, false, nil); err != nil {
					t.Fatalf("redeclare amq.direct: %v", err)
				}
			},
		},
		Case{
			// Unknown exchange type: connection.close 503 COMMAND_INVALID ("invalid exchange type").
			Name: "exchange/declare-unknown-type-503",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clUniq("x")
				clCleanupExchange(t, tg, name)
				err := ch.ExchangeDeclare(name, "no-such-type", false, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeCommandInvalid, clConnClose)
			},
		},
		Case{
			// All amq.* exchanges exist (passive declare succeeds).
			Name: "exchange/builtin-exchanges-exist",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				for _, n := range []string{"amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"} {
					if err := ch.ExchangeDeclarePassive(n, "direct", true, false, false, false, nil); err != nil {
						t.Fatalf("passive declare %q: %v", n, err)
					}
				}
			},
		},
		Case{
			// Even a passive declare of the default exchange "" is refused: channel.close 403 ACCESS_REFUSED.
			Name: "exchange/declare-passive-default-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDeclarePassive("", "direct", true, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// Non-passive declare of the default exchange "": channel.close 403 ACCESS_REFUSED.
			Name: "exchange/declare-default-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDeclare("", "direct", true, false, false, false, nil)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// Deleting the default exchange: channel.close 403 ACCESS_REFUSED.
			Name: "exchange/delete-default-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDelete("", false, false)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
			},
		},
		Case{
			// exchange.delete removes the exchange; a passive declare then gets 404.
			Name: "exchange/delete",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				name := clDeclareExchange(t, tg, ch, "direct", nil)
				if err := ch.ExchangeDelete(name, false, false); err != nil {
					t.Fatalf("exchange.delete: %v", err)
				}
				if clExchangeExists(t, conn, name) {
					t.Fatalf("exchange %s still exists after delete", name)
				}
			},
		},
		Case{
			// Deleting a missing exchange succeeds (delete-ok) in RabbitMQ 3.10.
			Name: "exchange/delete-missing-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				if err := ch.ExchangeDelete(clUniq("missing"), false, false); err != nil {
					t.Fatalf("exchange.delete of a missing exchange: %v", err)
				}
			},
		},
		Case{
			// if-unused delete of an exchange that is the source of a binding: channel.close 406.
			Name: "exchange/delete-if-unused-bound-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "k", x, nil)
				err := ch.ExchangeDelete(x, true, false)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
				if !clExchangeExists(t, conn, x) {
					t.Fatalf("exchange deleted despite the 406")
				}
			},
		},
		Case{
			// if-unused delete of an exchange without bindings succeeds.
			Name: "exchange/delete-if-unused-unbound-ok",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				if err := ch.ExchangeDelete(x, true, false); err != nil {
					t.Fatalf("exchange.delete if-unused: %v", err)
				}
				if clExchangeExists(t, conn, x) {
					t.Fatalf("exchange still exists")
				}
			},
		},
		Case{
			// Deleting an exchange removes its bindings: re-creating it does not route to the old queue.
			Name: "exchange/delete-removes-bindings",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "fanout", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "", x, nil)
				if err := ch.ExchangeDelete(x, false, false); err != nil {
					t.Fatalf("exchange.delete: %v", err)
				}
				if err := ch.ExchangeDeclare(x, "fanout", false, false, false, false, nil); err != nil {
					t.Fatalf("redeclare: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "", clBody("m"))
				clGetEmpty(t, ch, q)
			},
		},
		Case{
			// Deleting a queue removes its bindings, so an if-unused exchange delete then succeeds.
			Name: "exchange/delete-if-unused-after-queue-deleted-ok",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "k", x, nil)
				if _, err := ch.QueueDelete(q, false, false, false); err != nil {
					t.Fatalf("queue.delete: %v", err)
				}
				if err := ch.ExchangeDelete(x, true, false); err != nil {
					t.Fatalf("exchange.delete if-unused: %v", err)
				}
			},
		},
		Case{
			// An auto-delete exchange is deleted when its last binding (as source) is removed.
			Name: "exchange/auto-delete-after-last-unbind",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clUniq("x-ad")
				clCleanupExchange(t, tg, x)
				if err := ch.ExchangeDeclare(x, "direct", false, true, false, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				q := clDeclareQueue(t, tg, ch, "q", nil)
				clBindQueue(t, ch, q, "a", x, nil)
				clBindQueue(t, ch, q, "b", x, nil)
				if err := ch.QueueUnbind(q, "a", x, nil); err != nil {
					t.Fatalf("unbind a: %v", err)
				}
				if !clExchangeExists(t, conn, x) {
					t.Fatalf("auto-delete exchange deleted while a binding remains")
				}
				if err := ch.QueueUnbind(q, "b", x, nil); err != nil {
					t.Fatalf("unbind b: %v", err)
				}
				clEventually(t, "auto-delete exchange to go", func() bool { return !clExchangeExists(t, conn, x) })
			},
		},
		Case{
			// A fresh auto-delete exchange that never had a binding is not deleted.
			Name: "exchange/auto-delete-not-before-first-binding",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clUniq("x-ad")
				clCleanupExchange(t, tg, x)
				if err := ch.ExchangeDeclare(x, "direct", false, true, false, false, nil); err != nil {
					t.Fatalf("declare: %v", err)
				}
				clPublish(t, ch, x, "k", clBody("m"))
				clSyncChan(t, ch)
				if !clExchangeExists(t, conn, x) {
					t.Fatalf("auto-delete exchange deleted before any binding")
				}
			},
		},
		Case{
			// Redeclaring amq.direct with another type: channel.close 406 PRECONDITION_FAILED (equivalence check, not 403).
			Name: "exchange/redeclare-amq-direct-different-type-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDeclare("amq.direct", "fanout", true, false, false, false, nil)
				clExpectErr(t, conn, err, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Deleting a built-in amq.* exchange: channel.close 403 ACCESS_REFUSED.
			Name: "exchange/delete-amq-direct-403",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				err := ch.ExchangeDelete("amq.direct", false, false)
				clExpectErr(t, conn, err, clCodeAccessRefused, clChanClose)
				if !clExchangeExists(t, conn, "amq.direct") {
					t.Fatalf("amq.direct is gone")
				}
			},
		},
	)
}
