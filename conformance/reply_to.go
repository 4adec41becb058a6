package conformance

import (
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Direct reply-to: the amq.rabbitmq.reply-to pseudo-queue for RPC.

func init() {
	register(
		Case{
			// A request's reply-to is rewritten to a unique
			// amq.rabbitmq.reply-to.* name; a reply published to the default
			// exchange under it reaches the requester's no-ack consumer.
			Name: "reply-to/rpc-round-trip",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				requests := clDeclareQueue(t, tg, ch, "rpc", nil)
				replies, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
				if err != nil {
					t.Fatalf("consume amq.rabbitmq.reply-to: %v", err)
				}
				clPublish(t, ch, "", requests, amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c1", Body: []byte("ping")})
				srv := clOpenChan(t, conn)
				req := clGetWait(t, srv, requests, true)
				if !strings.HasPrefix(req.ReplyTo, "amq.rabbitmq.reply-to.") {
					t.Fatalf("request reply-to %q was not rewritten", req.ReplyTo)
				}
				clPublish(t, srv, "", req.ReplyTo, amqp.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")})
				d := clRecvDelivery(t, replies)
				if string(d.Body) != "pong" || d.CorrelationId != "c1" || d.RoutingKey != req.ReplyTo {
					t.Fatalf("reply %q corr %q key %q", d.Body, d.CorrelationId, d.RoutingKey)
				}
			},
		},
		Case{
			// A reply published inside a transaction bypasses it: RabbitMQ
			// hands it to the requester at once, before tx.commit.
			Name: "reply-to/reply-in-transaction-not-deferred",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				requests := clDeclareQueue(t, tg, ch, "rpc", nil)
				replies, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
				if err != nil {
					t.Fatalf("consume amq.rabbitmq.reply-to: %v", err)
				}
				clPublish(t, ch, "", requests, amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("ping")})
				srv := clOpenChan(t, conn)
				req := clGetWait(t, srv, requests, true)
				if err := srv.Tx(); err != nil {
					t.Fatalf("tx.select: %v", err)
				}
				clPublish(t, srv, "", req.ReplyTo, amqp.Publishing{Body: []byte("pong")})
				if d := clRecvDelivery(t, replies); string(d.Body) != "pong" {
					t.Fatalf("reply %q", d.Body)
				}
				if err := srv.TxRollback(); err != nil {
					t.Fatalf("tx.rollback: %v", err)
				}
				clNoDelivery(t, replies)
			},
		},
		Case{
			// Consuming replies needs no-ack: 406 otherwise.
			Name: "reply-to/consume-with-ack-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				_, err := ch.Consume("amq.rabbitmq.reply-to", "", false, false, false, false, nil)
				clExpectErr(t, conn, err, 406, clChanClose)
			},
		},
		Case{
			// A request with reply-to amq.rabbitmq.reply-to on a channel that
			// does not consume replies closes the channel with 406.
			Name: "reply-to/publish-without-consumer-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "rpc", nil)
				closes := clNotifyClose(ch)
				if err := ch.Publish("", q, false, false, amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("x")}); err != nil {
					t.Fatalf("publish: %v", err)
				}
				clExpectAsyncClose(t, conn, closes, 406, clChanClose)
			},
		},
	)
}
