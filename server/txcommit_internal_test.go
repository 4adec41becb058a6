package server

import (
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/persist"
)

// heldAtomic is a store whose transactions become durable only when the
// test lets them: Atomic reports each call on entered and calls its done
// once release is closed.
type heldAtomic struct {
	persist.Store
	entered chan struct{}
	release chan struct{}
}

func (h *heldAtomic) Atomic(pubs []persist.PublishOp, settles []persist.QueueSeq, done func(error)) {
	h.Store.Atomic(pubs, settles, func(err error) {
		go func() {
			<-h.release
			done(err)
		}()
	})
	h.entered <- struct{}{}
}

// TestTxCommitDoesNotBlockReader: while a tx.commit waits for its store
// write, the other channels of its connection keep working (declare,
// publish, get); commit-ok comes once the write is durable, and the
// transaction's message is there.
func TestTxCommitDoesNotBlockReader(t *testing.T) {
	st := &heldAtomic{Store: persist.NewMemory(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := Config{}
	cfg.hooks.Store = st
	s := newTestServer(t, cfg)
	cl, err := dialFrom(s, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txch, err := cl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	other, err := cl.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txch.QueueDeclare("txq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := txch.Tx(); err != nil {
		t.Fatal(err)
	}
	if err := txch.Publish("", "txq", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("in tx")}); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() { committed <- txch.TxCommit() }()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("tx.commit never reached the store")
	}

	// The store write is held: the sibling channel still works.
	if _, err := other.QueueDeclare("side", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := other.Publish("", "side", false, false, amqp091.Publishing{Body: []byte("side")}); err != nil {
		t.Fatal(err)
	}
	var got amqp091.Delivery
	for deadline := time.Now().Add(10 * time.Second); ; {
		d, ok, err := other.Get("side", true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sibling channel's message never arrived")
		}
	}
	if string(got.Body) != "side" {
		t.Fatalf("sibling got %q", got.Body)
	}
	select {
	case err := <-committed:
		t.Fatalf("tx.commit answered (%v) before its write was durable", err)
	default:
	}

	close(st.release)
	defer func() {
		// A second commit is not held.
		if err := txch.TxCommit(); err != nil {
			t.Errorf("empty tx.commit: %v", err)
		}
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("tx.commit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no commit-ok after the write became durable")
	}
	if q, err := txch.QueueDeclarePassive("txq", true, false, false, false, nil); err != nil || q.Messages != 1 {
		t.Fatalf("txq after commit: %+v %v", q, err)
	}
}
