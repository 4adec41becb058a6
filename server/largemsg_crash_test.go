package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestLargeMessageKill9: a confirmed 127 MiB persistent message (Badger
// takes no value over 64 MiB) survives a SIGKILL, both while it is only in
// the message log (killed right after the confirm) and once it has been
// applied to Badger (killed after the apply interval), and comes back
// byte for byte; the broker starts every time.
func TestLargeMessageKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a few hundred MiB through a child broker")
	}
	b := &childBroker{t: t, dir: t.TempDir(), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	// 127 MiB through a race-built child on a busy machine can take a
	// while between frames: a generous heartbeat.
	dial := func() (*amqp091.Connection, error) {
		return amqp091.DialConfig(url, amqp091.Config{Heartbeat: 2 * time.Minute})
	}
	body := make([]byte, 127<<20)
	for i := range body {
		body[i] = byte(i*7 + i>>20)
	}
	want := sha256.Sum256(body)
	for round, wait := range []time.Duration{0, 400 * time.Millisecond} {
		b.start()
		conn, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := conn.Channel()
		if _, err := ch.QueueDeclare("large", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "large", false, false, amqp091.Publishing{DeliveryMode: 2, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("round %d: confirm of 127 MiB: ok=%v err=%v", round, ok, err)
		}
		cancel()
		time.Sleep(wait) // round 1: past the apply interval (100 ms), so Badger holds it
		b.kill()
		conn.Close()

		b.start()
		conn, err = dial()
		if err != nil {
			t.Fatalf("round %d: broker after the kill: %v", round, err)
		}
		ch, _ = conn.Channel()
		var got amqp091.Delivery
		var ok bool
		for deadline := time.Now().Add(30 * time.Second); !ok; {
			if got, ok, err = ch.Get("large", true); err != nil {
				t.Fatal(err)
			}
			if !ok && time.Now().After(deadline) {
				t.Fatalf("round %d: the confirmed 127 MiB message is gone", round)
			}
		}
		if len(got.Body) != len(body) || sha256.Sum256(got.Body) != want || !bytes.Equal(got.Body[:64], body[:64]) {
			t.Fatalf("round %d: got %d bytes, not the message published", round, len(got.Body))
		}
		conn.Close()
		b.kill()
	}
}
