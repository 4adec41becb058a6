package conformance

// Cases found by running client libraries' own test suites (amqp091-go's
// integration tests, amqplib's mocha suite; scripts/client-suites.sh) against
// RabbitMQ and Warren: each is a behaviour a suite depends on that Warren
// did not share with RabbitMQ 3.10.

import (
	"encoding/binary"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var (
	cfConfirmSelect   = rawMethodID{85, 10}
	cfConfirmSelectOk = rawMethodID{85, 11}
	cfBasicAck        = rawMethodID{60, 80}
)

func init() {
	register(
		Case{
			// connection.update-secret (10.70) on an open connection is
			// answered with connection.update-secret-ok (10.71) and the
			// connection stays usable. RabbitMQ's internal auth backend
			// keeps no expiring state, so the secret is not checked.
			// (amqplib: "updateSecret"; amqp091-go: Connection.UpdateSecret.)
			Name: "connection/update-secret-ok",
			Run: func(t T, tg Target) {
				conn := clDial(t, tg)
				if err := conn.UpdateSecret("new secret", "no reason"); err != nil {
					t.Fatalf("update-secret: %v", err)
				}
				ch := clOpenChan(t, conn)
				clDeclareQueue(t, tg, ch, "after-update-secret", nil)
				if err := conn.UpdateSecret("", "empty"); err != nil {
					t.Fatalf("second update-secret: %v", err)
				}
				clSyncChan(t, ch)
			},
		},
		Case{
			// Publisher confirms for a burst of publishes are coalesced:
			// RabbitMQ sends the confirms that piled up while the channel
			// was busy as one basic.ack with multiple set, so a burst of
			// transient messages gets at least one multiple ack. Every tag
			// is confirmed exactly once, in order. (amqplib: "confirms
			// multiple confirms", which gives up after 640 messages.)
			Name: "confirm/burst-gets-multiple-ack",
			Run: func(t T, tg Target) {
				const n = 2000
				c := openRaw(t, tg)
				c.openChannel(1)
				q := c.declareTempQueue(1)
				c.sendMethod(1, cfConfirmSelect, new(wbuf).bits(false).b)
				c.expect(1, cfConfirmSelectOk)
				var burst []byte
				for i := 0; i < n; i++ {
					burst = append(burst, encodeFrame(frameMethod, 1, methodPayload(mBasicPublish, publishArgs("", q, false)), frameEnd)...)
					burst = append(burst, encodeFrame(frameHeader, 1, contentHeader(5), frameEnd)...)
					burst = append(burst, encodeFrame(frameBody, 1, []byte("bleep"), frameEnd)...)
				}
				c.mustWrite(burst)
				var confirmed uint64
				multiples := 0
				deadline := time.Now().Add(clWaitTimeout)
				for confirmed < n {
					f, err := c.readFrame(time.Until(deadline))
					if err != nil {
						t.Fatalf("after %d of %d confirms: %v", confirmed, n, err)
					}
					if f.Type == frameHeartbeat {
						continue
					}
					m, args, ok := f.Method()
					if !ok || m != cfBasicAck || f.Channel != 1 || len(args) < 9 {
						t.Fatalf("expected basic.ack on channel 1, got %s", f)
					}
					tag, multiple := binary.BigEndian.Uint64(args), args[8]&1 != 0
					switch {
					case multiple && tag > confirmed:
						multiples++
					case !multiple && tag == confirmed+1:
					default:
						t.Fatalf("basic.ack tag %d multiple=%v after tag %d was confirmed", tag, multiple, confirmed)
					}
					confirmed = tag
				}
				if multiples == 0 {
					t.Fatalf("%d publishes in one burst got %d single acks and no multiple ack", n, n)
				}
				t.Logf("%d publishes confirmed by %d multiple acks and single ones", n, multiples)
				c.closeConn()
			},
		},
		Case{
			// Sender-selected distribution: the CC and BCC headers (arrays
			// of longstr) are routing keys besides the publish's own; each
			// queue gets the message once; BCC is removed from the
			// delivered message and CC kept. (Bunny: "Sender-selected
			// distribution".)
			Name: "basic/publish-cc-bcc-routes",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				qs := map[string]string{}
				for _, k := range []string{"one", "two", "three", "four", "five"} {
					qs[k] = clDeclareQueue(t, tg, ch, "cc-"+k, nil)
					clBindQueue(t, ch, qs[k], k, x, nil)
				}
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "one", amqp.Publishing{Body: []byte("m"), Headers: amqp.Table{
					"CC":  []any{"two", "three", "one", int32(7)},
					"BCC": []any{"four"},
					"x":   "y",
				}})
				for _, k := range []string{"one", "two", "three", "four"} {
					d := clGetWait(t, ch, qs[k], true)
					if d.RoutingKey != "one" {
						t.Errorf("queue %s: routing key %q, want one", k, d.RoutingKey)
					}
					if _, ok := d.Headers["BCC"]; ok {
						t.Errorf("queue %s: BCC header delivered: %v", k, d.Headers)
					}
					if cc, ok := d.Headers["CC"].([]any); !ok || len(cc) != 4 || d.Headers["x"] != "y" {
						t.Errorf("queue %s: headers %v, want CC and x kept", k, d.Headers)
					}
					clGetEmpty(t, ch, qs[k])
				}
				clGetEmpty(t, ch, qs["five"])
				// The default exchange routes each key to the queue of that name.
				clPublishConfirmed(t, pub, "", qs["five"], amqp.Publishing{Body: []byte("d"), Headers: amqp.Table{
					"BCC": []any{qs["one"]},
				}})
				if d := clGetWait(t, ch, qs["one"], true); len(d.Headers) != 0 {
					t.Errorf("default exchange: headers %v, want an empty table", d.Headers)
				}
				clGetWait(t, ch, qs["five"], true)
			},
		},
		Case{
			// A CC or BCC header that is not an array: channel.close 406
			// "PRECONDITION_FAILED - invalid message:
			// {unacceptable_type_in_header,"CC",longstr}" class 60 method 40.
			Name: "basic/publish-cc-not-array-406",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				q := clDeclareQueue(t, tg, ch, "q", nil)
				closes := clNotifyClose(ch)
				clPublish(t, ch, "", q, amqp.Publishing{Body: []byte("m"), Headers: amqp.Table{"CC": "two"}})
				e := clExpectAsyncClose(t, conn, closes, clCodePreconditionFailed, clChanClose)
				want := `PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}`
				if e.Reason != want {
					t.Errorf("reply text %q, want %q", e.Reason, want)
				}
				c2 := clOpenChan(t, conn)
				clGetEmpty(t, c2, q)
			},
		},
		Case{
			// Dead-lettering without a dead-letter routing key routes by
			// the message's routing keys, its CC header's included, and
			// keeps CC; with one, only that key is used and the CC header
			// is removed (x-death's routing-keys still list the CC keys).
			Name: "deadletter/cc-routes-dlrk-drops-cc",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				x := clDeclareExchange(t, tg, ch, "direct", nil)
				dlx := clDeclareExchange(t, tg, ch, "direct", nil)
				dl := map[string]string{}
				for _, k := range []string{"k1", "k2", "kd"} {
					dl[k] = clDeclareQueue(t, tg, ch, "dl-"+k, nil)
					clBindQueue(t, ch, dl[k], k, dlx, nil)
				}
				pub := clConfirmChan(t, conn)
				for _, dlrk := range []string{"", "kd"} {
					args := amqp.Table{"x-dead-letter-exchange": dlx}
					if dlrk != "" {
						args["x-dead-letter-routing-key"] = dlrk
					}
					q := clDeclareQueue(t, tg, ch, "src", args)
					clBindQueue(t, ch, q, "k1", x, nil)
					clPublishConfirmed(t, pub, x, "k1", amqp.Publishing{Body: []byte("m"), Headers: amqp.Table{"CC": []any{"k2"}}})
					d := clGetWait(t, ch, q, false)
					if err := d.Reject(false); err != nil {
						t.Fatalf("reject: %v", err)
					}
					want := []string{"k1", "k2"}
					if dlrk != "" {
						want = []string{"kd"}
					}
					for _, k := range want {
						got := clGetWait(t, ch, dl[k], true)
						_, hasCC := got.Headers["CC"]
						if hasCC != (dlrk == "") {
							t.Errorf("dlrk %q: queue %s: headers %v, CC kept = %v", dlrk, k, got.Headers, hasCC)
						}
						deaths, _ := got.Headers["x-death"].([]any)
						if len(deaths) != 1 {
							t.Fatalf("dlrk %q: x-death %v", dlrk, got.Headers["x-death"])
						}
						if rks, _ := deaths[0].(amqp.Table)["routing-keys"].([]any); len(rks) != 2 || rks[0] != "k1" || rks[1] != "k2" {
							t.Errorf("dlrk %q: x-death routing-keys %v, want [k1 k2]", dlrk, rks)
						}
					}
					for _, k := range []string{"k1", "k2", "kd"} {
						clGetEmpty(t, ch, dl[k])
					}
				}
			},
		},
		Case{
			// The CC keys route together with the publish's own key: an
			// exchange uses its alternate exchange only when none of the
			// keys matches.
			Name: "basic/publish-cc-alternate-exchange",
			Run: func(t T, tg Target) {
				conn, ch := clDialChan(t, tg)
				ae := clDeclareExchange(t, tg, ch, "fanout", nil)
				x := clDeclareExchange(t, tg, ch, "direct", amqp.Table{"alternate-exchange": ae})
				qa := clDeclareQueue(t, tg, ch, "ae", nil)
				clBindQueue(t, ch, qa, "", ae, nil)
				q2 := clDeclareQueue(t, tg, ch, "two", nil)
				clBindQueue(t, ch, q2, "two", x, nil)
				pub := clConfirmChan(t, conn)
				clPublishConfirmed(t, pub, x, "one", amqp.Publishing{Body: []byte("cc-two"), Headers: amqp.Table{"CC": []any{"two"}}})
				clPublishConfirmed(t, pub, x, "one", amqp.Publishing{Body: []byte("bcc-none"), Headers: amqp.Table{"BCC": []any{"three"}}})
				if got := clGetAll(t, ch, qa); !slices.Equal(got, []string{"bcc-none"}) {
					t.Errorf("alternate exchange's queue got %q, want [bcc-none]", got)
				}
				if got := clGetAll(t, ch, q2); !slices.Equal(got, []string{"cc-two"}) {
					t.Errorf("queue bound to two got %q, want [cc-two]", got)
				}
			},
		},
	)
}
