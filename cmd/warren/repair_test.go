package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// broker is a warren started by cli in a test.
type broker struct {
	cancel context.CancelFunc
	done   chan int
	logs   *logLines
	url    string
}

func startBroker(t *testing.T, dir string, extra ...string) *broker {
	t.Helper()
	b := &broker{logs: newLogLines(), done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	args := append([]string{"--log-format", "json", "--data-dir", dir, "--listen", "127.0.0.1:0", "--mgmt-listen", "off"}, extra...)
	go func() { b.done <- cli(ctx, args, &bytes.Buffer{}, b.logs) }()
	return b
}

// started waits for the broker to be up and returns its AMQP URL.
func (b *broker) started(t *testing.T) string {
	url, _ := b.startedLog(t)
	return url
}

// startedLog is started, and it also returns the messages logged before.
func (b *broker) startedLog(t *testing.T) (string, []string) {
	t.Helper()
	var before []string
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line := <-b.logs.lines:
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			if m["message"] == "Warren started" {
				return fmt.Sprintf("amqp://guest:guest@%s/", m["amqp"]), before
			}
			s, _ := m["message"].(string)
			before = append(before, s)
		case <-deadline:
			t.Fatal("the broker did not start")
		}
	}
}

func (b *broker) stop(t *testing.T) {
	t.Helper()
	b.cancel()
	select {
	case code := <-b.done:
		if code != 0 {
			t.Fatalf("broker exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop")
	}
}

// publishConfirmed declares durable queue q and publishes n persistent
// messages to it, with confirms.
func publishConfirmed(t *testing.T, url, q string, n int) {
	t.Helper()
	c, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(fmt.Sprintf("%s-%d", q, i))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatalf("message %d not confirmed: %v", i, err)
		}
	}
}

// TestRepairStore: a broker whose store has a damaged table does not
// start, and says which file and what to do; with --repair-store it
// starts, the table is in a damaged-* folder of the data directory, the
// log says so, and a queue whose messages were elsewhere has all of them.
func TestRepairStore(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	publishConfirmed(t, b.started(t), "intact", 50)
	b.stop(t) // Close flushes the store's memtables into tables
	before, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	b = startBroker(t, dir)
	publishConfirmed(t, b.started(t), "lost", 50)
	b.stop(t)
	after, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	slices.Sort(after)
	victim := after[len(after)-1]
	if slices.Contains(before, victim) {
		t.Fatalf("no new table after the second run: %v, then %v", before, after)
	}
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[40] ^= 0x55
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(victim)

	b = startBroker(t, dir)
	m := b.logs.waitFor(t, "warren not started")
	if code := <-b.done; code == 0 {
		t.Fatal("a broker with a damaged table started")
	}
	if e, _ := m["error"].(string); !strings.Contains(e, "badger table "+name) || !strings.Contains(e, "--repair-store") {
		t.Fatalf("the start-up error does not name %s and --repair-store: %q", name, e)
	}

	b = startBroker(t, dir, "--repair-store")
	url, logged := b.startedLog(t)
	defer b.stop(t)
	said := strings.Join(logged, "\n")
	if !strings.Contains(said, "persist: repair: badger table "+name) || !strings.Contains(said, "are gone") {
		t.Fatalf("the repair does not say what it set aside and what that means:\n%s", said)
	}
	asides, _ := filepath.Glob(filepath.Join(dir, "damaged-*", name))
	if len(asides) != 1 {
		t.Fatalf("%s is not in a damaged-* folder of %s", name, dir)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Fatalf("%s is still in the store", name)
	}
	c, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		d, ok, err := ch.Get("intact", true)
		if err != nil || !ok || string(d.Body) != fmt.Sprintf("intact-%d", i) {
			t.Fatalf("message %d of the intact queue: %v %v %q", i, ok, err, d.Body)
		}
	}
}
