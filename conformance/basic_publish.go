package conformance

import (
	"bytes"
	"crypto/rand"
	"reflect"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	register(
		Case{
			// mandatory + unroutable: basic.return 312 NO_ROUTE carrying exchange, key, properties and body; the channel stays open.
			Name: "basic/mandatory-unroutable-returned-312",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				returns := ch.NotifyReturn(make(chan amqp.Return, 1))
				msg := amqp.Publishing{ContentType: "text/plain", MessageId: "mid-1", Headers: amqp.Table{"h": "v"}, Body: []byte("lost")}
				clPublishOpts(t, ch, x, "nowhere", true, msg)
				select {
				case r := <-returns:
					if r.ReplyCode != clCodeNoRoute || r.ReplyText != "NO_ROUTE" {
						t.Errorf("return %d %q, want 312 NO_ROUTE", r.ReplyCode, r.ReplyText)
					}
					if r.Exchange != x || r.RoutingKey != "nowhere" || string(r.Body) != "lost" {
						t.Errorf("return exchange %q key %q body %q", r.Exchange, r.RoutingKey, r.Body)
					}
					if r.ContentType != "text/plain" || r.MessageId != "mid-1" || r.Headers["h"] != "v" {
						t.Errorf("return lost properties: %+v", r)
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("no basic.return")
				}
				clSyncChan(t, ch)
			},
		},
		Case{
			// mandatory publish to the default exchange with no such queue: basic.return 312 NO_ROUTE.
			Name: "basic/mandatory-default-exchange-no-queue-312",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				returns := ch.NotifyReturn(make(chan amqp.Return, 1))
				key := clUniq("no-such-queue")
				clPublishOpts(t, ch, "", key, true, clBody("m"))
				select {
				case r := <-returns:
					if r.ReplyCode != clCodeNoRoute || r.Exchange != "" || r.RoutingKey != key {
						t.Errorf("return %d exchange %q key %q", r.ReplyCode, r.Exchange, r.RoutingKey)
					}
				case <-time.After(clWaitTimeout):
					t.Fatalf("no basic.return")
				}
			},
		},
		Case{
			// Non-mandatory unroutable messages are dropped silently: no return, no close.
			Name: "basic/unroutable-dropped-silently",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				returns := ch.NotifyReturn(make(chan amqp.Return, 1))
				clPublish(t, ch, x, "nowhere", clBody("m"))
				clSyncChan(t, ch)
				select {
				case r := <-returns:
					t.Fatalf("unexpected return %d", r.ReplyCode)
				case <-time.After(clQuietPeriod):
				}
			},
		},
		Case{
			// basic.publish to a missing exchange: channel.close 404 NOT_FOUND (asynchronous).
			Name: "basic/publish-missing-exchange-404",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				closes := clNotifyClose(ch)
				clPublish(t, ch, clUniq("missing"), "k", clBody("m"))
				clExpectAsyncClose(t, conn, closes, clCodeNotFound, clChanClose)
			},
		},
		Case{
			// immediate=true is not supported: connection.close 540 NOT_IMPLEMENTED.
			Name: "basic/publish-immediate-540",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				closes := clNotifyClose(ch)
				ctxErr := ch.Publish("", q, false, true, clBody("m"))
				if ctxErr != nil {
					t.Fatalf("publish: %v", ctxErr)
				}
				clExpectAsyncClose(t, conn, closes, clCodeNotImplemented, clConnClose)
			},
		},
		Case{
			// A user-id property different from the authenticated user: channel.close 406 PRECONDITION_FAILED.
			Name: "basic/user-id-mismatch-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				closes := clNotifyClose(ch)
				clPublish(t, ch, "", q, amqp.Publishing{UserId: clUrlUser(tg) + "-not", Body: []byte("m")})
				clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
			},
		},
		Case{
			// Every basic property (and a headers table of every field type) is delivered unchanged.
			Name: "basic/properties-roundtrip",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				headers := amqp.Table{
					"bool":    true,
					"int8":    int8(-8),
					"int16":   int16(-1600),
					"int32":   int32(-320000),
					"int64":   int64(-6400000000),
					"float32": float32(1.5),
					"float64": float64(-2.25),
					"decimal": amqp.Decimal{Scale: 2, Value: 12345},
					"string":  "hello, wörld",
					"bytes":   []byte{0, 1, 2, 255},
					"time":    time.Unix(1700000000, 0),
					"table":   amqp.Table{"inner": "x", "n": int32(1)},
					"array":   []any{int32(1), "two", true, amqp.Table{"k": "v"}},
					"void":    nil,
					"empty":   "",
					"uint8":   uint8(200),
					"uint16":  uint16(60000),
					"uint32":  uint32(4000000000),
				}
				ts := time.Unix(1712345678, 0)
				msg := amqp.Publishing{
					Headers:         headers,
					ContentType:     "application/json",
					ContentEncoding: "gzip",
					DeliveryMode:    amqp.Persistent,
					Priority:        7,
					CorrelationId:   "corr-1",
					ReplyTo:         "reply-q",
					Expiration:      "600000",
					MessageId:       "msg-1",
					Timestamp:       ts,
					Type:            "kind",
					UserId:          clUrlUser(tg),
					AppId:           "app-1",
					Body:            []byte("payload"),
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, msg)
				d := clGetWait(t, ch, q, true)
				check := func(name string, got, want any) {
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: got %#v, want %#v", name, got, want)
					}
				}
				check("ContentType", d.ContentType, msg.ContentType)
				check("ContentEncoding", d.ContentEncoding, msg.ContentEncoding)
				check("DeliveryMode", d.DeliveryMode, msg.DeliveryMode)
				check("Priority", d.Priority, msg.Priority)
				check("CorrelationId", d.CorrelationId, msg.CorrelationId)
				check("ReplyTo", d.ReplyTo, msg.ReplyTo)
				check("Expiration", d.Expiration, msg.Expiration)
				check("MessageId", d.MessageId, msg.MessageId)
				check("Type", d.Type, msg.Type)
				check("UserId", d.UserId, msg.UserId)
				check("AppId", d.AppId, msg.AppId)
				check("Body", d.Body, msg.Body)
				if !d.Timestamp.Equal(ts) {
					t.Errorf("Timestamp: got %v, want %v", d.Timestamp, ts)
				}
				if len(d.Headers) != len(headers) {
					t.Errorf("headers: got %d entries, want %d: %#v", len(d.Headers), len(headers), d.Headers)
				}
				for k, want := range headers {
					got, ok := d.Headers[k]
					if !ok {
						t.Errorf("header %q missing", k)
						continue
					}
					if wt, ok := want.(time.Time); ok {
						if gt, ok := got.(time.Time); !ok || !gt.Equal(wt) {
							t.Errorf("header %q: got %#v, want %v", k, got, wt)
						}
						continue
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("header %q: got %#v (%T), want %#v (%T)", k, got, got, want, want)
					}
				}
			},
		},
		Case{
			// Absent properties stay absent (zero) on delivery; RabbitMQ adds nothing.
			Name: "basic/no-properties-roundtrip",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, clBody("bare"))
				d := clGetWait(t, ch, q, true)
				if d.Headers != nil || d.ContentType != "" || d.DeliveryMode != 0 || d.Priority != 0 ||
					d.MessageId != "" || !d.Timestamp.IsZero() || d.UserId != "" || d.Expiration != "" {
					t.Fatalf("unexpected properties on a bare message: %+v", d)
				}
			},
		},
		Case{
			// A 1 MiB body (many body frames at frame-max 128 KiB) round-trips byte for byte.
			Name: "basic/large-message-1mb",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				payload := make([]byte, 1<<20+17)
				if _, err := rand.Read(payload); err != nil {
					t.Fatalf("rand: %v", err)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{Body: payload})
				ds := clConsume(t, ch, q, "", true)
				d := clRecvDelivery(t, ds)
				if !bytes.Equal(d.Body, payload) {
					t.Fatalf("body differs: got %d bytes, want %d", len(d.Body), len(payload))
				}
			},
		},
		Case{
			// An empty body (header frame with body-size 0, no body frame) round-trips.
			Name: "basic/empty-body",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "", q, amqp.Publishing{ContentType: "x/empty"})
				ds := clConsume(t, ch, q, "", true)
				d := clRecvDelivery(t, ds)
				if len(d.Body) != 0 || d.ContentType != "x/empty" {
					t.Fatalf("got body %q content-type %q", d.Body, d.ContentType)
				}
			},
		},
		Case{
			// 1000 messages from one channel are consumed in publish order.
			Name: "basic/fifo-1000",
			Run: func(t T, tg Target) {
				_, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				for i := 0; i < 1000; i++ {
					clPublish(t, ch, "", q, clBody(strconv.Itoa(i)))
				}
				ds := clConsume(t, ch, q, "", true)
				for i := 0; i < 1000; i++ {
					d := clRecvDelivery(t, ds)
					if string(d.Body) != strconv.Itoa(i) {
						t.Fatalf("delivery %d has body %q", i, d.Body)
					}
				}
			},
		},
		Case{
			// Deliveries carry exchange, routing key, Redelivered=false and channel-scoped delivery tags 1, 2, 3...
			Name: "basic/delivery-fields-and-tags",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q1 := clDeclareQueue(t, tg, ch, "q1", nil)
				q2 := clDeclareQueue(t, tg, ch, "q2", nil)
				clBindQueue(t, ch, q1, "k1", "amq.direct", nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, "amq.direct", "k1", clBody("a"))
				clPublishConfirmed(t, pub, "", q2, clBody("b"))
				d1 := clGetWait(t, ch, q1, false)
				if d1.Exchange != "amq.direct" || d1.RoutingKey != "k1" || d1.Redelivered || d1.DeliveryTag != 1 {
					t.Errorf("first: exchange %q key %q redelivered %v tag %d", d1.Exchange, d1.RoutingKey, d1.Redelivered, d1.DeliveryTag)
				}
				ds := clConsume(t, ch, q2, "my-tag", false)
				d2 := clRecvDelivery(t, ds)
				if d2.Exchange != "" || d2.RoutingKey != q2 || d2.DeliveryTag != 2 || d2.ConsumerTag != "my-tag" {
					t.Errorf("second: exchange %q key %q tag %d ctag %q", d2.Exchange, d2.RoutingKey, d2.DeliveryTag, d2.ConsumerTag)
				}
			},
		},
	)
}
