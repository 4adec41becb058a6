package server_test

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// publishConfirmed publishes n messages to queue q and waits for their
// confirms.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, q string, n int, headers amqp091.Table) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for range n {
		dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{Body: []byte("hello"), Headers: headers})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("nacked")
		}
	}
}

func TestAdminStream(t *testing.T) {
	srv, url := startAdminBroker(t)
	_, ch := adminDial(t, url)
	if _, err := ch.QueueDeclare("adm.s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("adm.c", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "adm.s", 5, nil)

	si, err := srv.Stream("/", "adm.s")
	if err != nil {
		t.Fatal(err)
	}
	if si.VHost != "/" || si.Name != "adm.s" || len(si.Partitions) == 0 {
		t.Fatalf("Stream = %+v", si)
	}
	p := si.Partitions[0]
	if p.First != 0 || p.Next != 5 || p.Messages != 5 || p.Segments < 1 || p.Bytes <= 0 {
		t.Fatalf("partition 0 = %+v, want offsets 0..5 in at least one non-empty segment", p)
	}
	if qi, err := srv.Queue("/", "adm.s"); err != nil || qi.Type != "stream" {
		t.Fatalf("Queue(adm.s).Type = %q, %v; want stream", qi.Type, err)
	}
	if qi, err := srv.Queue("/", "adm.c"); err != nil || qi.Type != "classic" {
		t.Fatalf("Queue(adm.c).Type = %q, %v; want classic", qi.Type, err)
	}
	if all := srv.Streams(); len(all) != 1 || all[0].Name != "adm.s" {
		t.Fatalf("Streams = %+v, want adm.s only", all)
	}

	var ns *server.NotAStreamError
	if _, err := srv.Stream("/", "adm.c"); !errors.As(err, &ns) {
		t.Fatalf("Stream(classic queue) = %v, want a NotAStreamError", err)
	}
	for _, c := range []struct{ vhost, name string }{{"/", "nope"}, {"nope", "adm.s"}} {
		if _, err := srv.Stream(c.vhost, c.name); adminCode(err) != amqp.NotFound {
			t.Errorf("Stream(%q, %q) = %v, want 404", c.vhost, c.name, err)
		}
	}
	if _, err := srv.StreamGroup("/", "adm.s", "g"); adminCode(err) != amqp.NotFound {
		t.Errorf("StreamGroup(unknown group) = %v, want 404", err)
	}
	if err := srv.DeleteStreamGroup("/", "adm.s", "g"); adminCode(err) != amqp.NotFound {
		t.Errorf("DeleteStreamGroup(unknown group) = %v, want 404", err)
	}
	if err := srv.ResetStreamGroup("/", "adm.s", "g", server.StreamOffset{Kind: "first"}); adminCode(err) != amqp.NotFound {
		t.Errorf("ResetStreamGroup(unknown group) = %v, want 404", err)
	}
	var bad *server.BadStreamOffsetError
	for _, o := range []server.StreamOffset{{Kind: "latest"}, {Kind: "offset", Offset: -1}} {
		if err := srv.ResetStreamGroup("/", "adm.s", "g", o); !errors.As(err, &bad) {
			t.Errorf("ResetStreamGroup(%+v) = %v, want a BadStreamOffsetError", o, err)
		}
	}
}
