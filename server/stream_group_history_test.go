package server_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// histEvent is one delivery a group member received.
type histEvent struct {
	member      string
	body        string
	partition   int64
	offset      int64
	redelivered bool
}

// histMember is one consumer of a group on a connection of its own.
type histMember struct {
	name string
	sock net.Conn
	conn *amqp091.Connection
	ch   *amqp091.Channel
	done chan struct{}
}

// TestStreamGroupHistory runs a keyed producer against a 6-partition
// stream while the members of a group join, cancel and die (socket closed
// without an AMQP close), with a second group reading alongside, and
// checks the history: no confirmed message missing from either group, no
// offset of a partition delivered fresh twice (one owner at a time), each
// member's fresh deliveries of a partition in offset order, and
// duplicates only of deliveries to the member that died, redelivered.
func TestStreamGroupHistory(t *testing.T) {
	total := 3000
	if testing.Short() {
		total = 1200
	}
	b := servertest.StartBroker(t, server.Config{})
	url := b.URL()
	setup, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	sch, _ := setup.Channel()
	if _, err := sch.QueueDeclare("hist", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-stream-partitions": int32(6)}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var events []histEvent
	join := func(name, grp string) *histMember {
		m := &histMember{name: name, done: make(chan struct{})}
		m.conn, err = amqp091.DialConfig(url, amqp091.Config{Dial: func(network, addr string) (net.Conn, error) {
			c, err := net.Dial(network, addr)
			m.sock = c
			return c, err
		}})
		if err != nil {
			t.Fatal(err)
		}
		m.ch, _ = m.conn.Channel()
		m.ch.Qos(20, 0, false)
		ds, err := m.ch.Consume("hist", name, false, false, false, false, amqp091.Table{"x-stream-group": grp, "x-stream-offset": "first"})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer close(m.done)
			for d := range ds {
				p, _ := d.Headers["x-stream-partition"].(int64)
				o, _ := d.Headers["x-stream-offset"].(int64)
				mu.Lock()
				events = append(events, histEvent{member: name, body: string(d.Body), partition: p, offset: o, redelivered: d.Redelivered})
				mu.Unlock()
				d.Ack(false)
			}
		}()
		return m
	}

	confirmed := make(map[string]bool, total)
	progress := make(chan int, total)
	go func() {
		defer close(progress)
		conn, err := amqp091.Dial(url)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, _ := conn.Channel()
		ch.Confirm(false)
		for i := range total {
			body := fmt.Sprint("m", i)
			dc, err := ch.PublishWithDeferredConfirm("", "hist", false, false, amqp091.Publishing{Body: []byte(body),
				Headers: amqp091.Table{"x-stream-partition-key": fmt.Sprint("k", i%50)}})
			if err != nil {
				return
			}
			if dc.Wait() {
				mu.Lock()
				confirmed[body] = true
				mu.Unlock()
			}
			progress <- i
		}
	}()

	other := join("h1", "H")
	m1, m2 := join("m1", "G"), join("m2", "G")
	var m3, m4 *histMember
	for i := range progress {
		switch i {
		case total / 6:
			m3 = join("m3", "G")
		case 2 * total / 6:
			m1.ch.Cancel("m1", false) // acks what it has, then goes
		case 3 * total / 6:
			m2.sock.Close() // dies: no AMQP close
		case 4 * total / 6:
			m4 = join("m4", "G")
		}
	}
	if len(confirmed) != total {
		t.Fatalf("%d of %d confirmed", len(confirmed), total)
	}
	got := func(grp map[string]bool) map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, e := range events {
			if grp[e.member] {
				seen[e.body] = true
			}
		}
		return seen
	}
	groupG := map[string]bool{"m1": true, "m2": true, "m3": true, "m4": true}
	deadline := time.Now().Add(30 * time.Second)
	for len(got(groupG)) < total || len(got(map[string]bool{"h1": true})) < total {
		if time.Now().After(deadline) {
			t.Fatalf("group G got %d, group H %d of %d confirmed", len(got(groupG)), len(got(map[string]bool{"h1": true})), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range []*histMember{m3, m4, other} {
		m.conn.Close()
		<-m.done
	}
	<-m1.done
	<-m2.done

	mu.Lock()
	defer mu.Unlock()
	first := map[string]histEvent{}
	fresh := map[[2]int64]string{}
	last := map[string]int64{}
	dups := 0
	for _, e := range events {
		if !groupG[e.member] {
			continue
		}
		key := [2]int64{e.partition, e.offset}
		if !e.redelivered {
			if by, ok := fresh[key]; ok {
				t.Fatalf("partition %d offset %d delivered fresh to %s and %s", e.partition, e.offset, by, e.member)
			}
			fresh[key] = e.member
			lk := fmt.Sprint(e.member, "/", e.partition)
			if o, ok := last[lk]; ok && e.offset <= o {
				t.Fatalf("%s got partition %d offset %d after %d", e.member, e.partition, e.offset, o)
			}
			last[lk] = e.offset
		}
		if f, ok := first[e.body]; ok {
			dups++
			if f.member != "m2" || !e.redelivered {
				t.Fatalf("%s delivered again to %s (redelivered %v); first to %s, which did not die", e.body, e.member, e.redelivered, f.member)
			}
			continue
		}
		first[e.body] = e
	}
	per := map[string]int{}
	for _, e := range events {
		per[e.member]++
	}
	for m := range groupG {
		if per[m] == 0 {
			t.Fatalf("member %s got nothing: %v", m, per)
		}
	}
	t.Logf("%d events in group G %v, %d duplicates (all of the dead member's)", len(first)+dups, per, dups)
}
