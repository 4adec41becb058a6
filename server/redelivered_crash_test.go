package server_test

import (
	"fmt"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/persist"
)

// A durable classic queue recovered after kill -9 marks every message it
// recovered redelivered, as RabbitMQ 3.10's (its queue index marks them
// all delivered after an unclean shutdown); after a clean stop only the
// one delivered before it. Checked on RabbitMQ 3.10.8, one node: after
// kill -9 d1..d4 all redelivered=true (d1 delivered before, and with no
// consumer ever); after rabbitmqctl stop only d1.
//
// A store written by a build that did not mark its stops (here: a clean
// stop, then the marks record removed) starts as after an unclean stop:
// how it stopped is not known, and redelivered is the safe side.
func TestRecoveredRedeliveredAfterKill9(t *testing.T) {
	for _, how := range []string{"kill9", "clean", "old-store"} {
		kill := how == "kill9"
		t.Run(how, func(t *testing.T) {
			b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
			b.start()
			url := "amqp://guest:guest@" + b.addr + "/"
			declareAfterStart(t, url, "rq", nil)
			conn, err := amqp091.Dial(url)
			if err != nil {
				t.Fatal(err)
			}
			ch, _ := conn.Channel()
			if err := ch.Confirm(false); err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{"d1", "d2", "d3", "d4"} {
				dc, err := ch.PublishWithDeferredConfirm("", "rq", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
				if err != nil {
					t.Fatal(err)
				}
				if ok, err := dc.WaitContext(t.Context()); err != nil || !ok {
					t.Fatalf("publish %s: ack=%v %v", body, ok, err)
				}
			}
			if d, ok, err := ch.Get("rq", false); err != nil || !ok || string(d.Body) != "d1" {
				t.Fatalf("get d1: %v %v %q", ok, err, d.Body)
			}
			// The get's delivered mark is written behind: a confirmed
			// publish on another queue comes after it in the store.
			declareAfterStart(t, url, "fence", nil)
			if dc, err := ch.PublishWithDeferredConfirm("", "fence", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("f")}); err != nil {
				t.Fatal(err)
			} else if ok, err := dc.WaitContext(t.Context()); err != nil || !ok {
				t.Fatalf("fence publish: %v %v", ok, err)
			}
			if kill {
				b.kill()
			} else {
				conn.Close()
				b.stop()
			}
			if how == "old-store" {
				forgetStopMarks(t, b.dir)
			}
			b.start()
			defer b.kill()
			want := "[d1=true d2=true d3=true d4=true]"
			if how == "clean" {
				want = "[d1=true d2=false d3=false d4=false]"
			}
			if got := getAll(t, url, "rq"); got != want {
				t.Fatalf("after the restart: %s, want %s", got, want)
			}
		})
	}
}

// getAll takes every message of q with basic.get and lists them as
// body=redelivered.
func getAll(t *testing.T, url, q string) string {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	var out []string
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, fmt.Sprintf("%s=%v", d.Body, d.Redelivered))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// forgetStopMarks makes dir's store look as one written before stops
// were marked: its marks record goes.
func forgetStopMarks(t *testing.T, dir string) {
	t.Helper()
	st, err := persist.Open(dir, persist.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.LoadBlob("node\x00marks"); err != nil {
		t.Fatalf("no marks record in a store of this build: %v", err)
	}
	if err := st.DeleteBlob("node\x00marks"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
