// Package jepsen records what the clients of a broker saw during a fault
// test and checks it (issue 14, section 3), in the spirit of Jepsen: a
// History of publishes (sent, then confirmed, nacked or unknown when the
// connection closed first) and of deliveries (with the redelivered flag
// and x-delivery-count), the client workers that fill it (Publisher,
// Consumer, Declarer, against any AMQP 0-9-1 broker), and Check, the
// verdict: a confirmed message never delivered is lost.
//
// It also holds Netns, a network of Linux network namespaces with a
// partition between chosen pairs, for broker processes on one machine.
package jepsen

import (
	"slices"
	"sync"
	"time"
)

// PubState is where a sent message stands for its publisher.
type PubState uint8

const (
	// Sent: published, no confirm yet.
	Sent PubState = iota
	// Confirmed: basic.ack received: the broker has taken responsibility.
	Confirmed
	// Nacked: basic.nack received: the broker says it did not take it.
	Nacked
	// Unknown: the channel or connection closed before a confirm came;
	// the message may or may not be stored.
	Unknown
	// Returned: basic.return (mandatory, no queue bound), then its ack.
	Returned
)

func (s PubState) String() string {
	switch s {
	case Sent:
		return "sent"
	case Confirmed:
		return "confirmed"
	case Nacked:
		return "nacked"
	case Unknown:
		return "unknown"
	case Returned:
		return "returned"
	}
	return "?"
}

// Delivery is one basic.deliver a consumer received.
type Delivery struct {
	ID          string    // the message id (its body)
	Consumer    string    // the consumer's name
	Node        string    // the node its connection was to
	Redelivered bool      // the redelivered flag
	Count       int       // x-delivery-count, -1 when absent
	Acked       bool      // basic.ack was written for it without an error
	At          time.Time // when it arrived
}

// History is what the clients of one test saw, safe for concurrent use.
// The zero value is ready.
type History struct {
	mu         sync.Mutex
	pubs       map[string]PubState
	order      []string // ids in the order sent
	deliveries []Delivery
	seen       map[string]int // deliveries per id
	events     []Event
}

// Event is a fault or phase the test marks in the history, to read a
// failing run's deliveries against.
type Event struct {
	At   time.Time
	What string
}

func (h *History) init() {
	if h.pubs == nil {
		h.pubs = map[string]PubState{}
		h.seen = map[string]int{}
	}
}

// Send records that id was published (before its confirm).
func (h *History) Send(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	if _, ok := h.pubs[id]; !ok {
		h.order = append(h.order, id)
	}
	h.pubs[id] = Sent
}

// Settle records id's outcome (Confirmed, Nacked or Unknown). An id
// already confirmed or nacked keeps that outcome: a confirm is final.
func (h *History) Settle(id string, s PubState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	if old, ok := h.pubs[id]; ok && (old == Confirmed || old == Nacked) {
		return
	}
	if _, ok := h.pubs[id]; !ok {
		h.order = append(h.order, id)
	}
	h.pubs[id] = s
}

// Deliver records a delivery and returns its index, for Ack.
func (h *History) Deliver(d Delivery) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	if d.At.IsZero() {
		d.At = time.Now()
	}
	h.deliveries = append(h.deliveries, d)
	h.seen[d.ID]++
	return len(h.deliveries) - 1
}

// Ack marks delivery i as acknowledged.
func (h *History) Ack(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deliveries[i].Acked = true
}

// Mark records an event (a fault injected, healed, a phase begun).
func (h *History) Mark(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, Event{time.Now(), what})
}

// Events returns the marked events in order.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// Counts returns how many messages are in each state, and how many
// distinct ids were delivered.
func (h *History) Counts() (byState map[PubState]int, delivered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byState = map[PubState]int{}
	for _, s := range h.pubs {
		byState[s]++
	}
	return byState, len(h.seen)
}

// Undelivered returns the confirmed ids not delivered yet, at most max
// of them (all when max <= 0), and how many there are.
func (h *History) Undelivered(max int) ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	n := 0
	for _, id := range h.order {
		if h.pubs[id] == Confirmed && h.seen[id] == 0 {
			n++
			if max <= 0 || len(out) < max {
				out = append(out, id)
			}
		}
	}
	return out, n
}

// Snapshot is a copy of a history, what Check reads.
type Snapshot struct {
	Pubs       map[string]PubState // every id sent, with its outcome
	Order      []string            // ids in the order sent
	Deliveries []Delivery
	Events     []Event
}

// Snapshot copies the history.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{Pubs: make(map[string]PubState, len(h.pubs)), Order: slices.Clone(h.order),
		Deliveries: slices.Clone(h.deliveries), Events: slices.Clone(h.events)}
	for k, v := range h.pubs {
		s.Pubs[k] = v
	}
	return s
}
