package jepsen

import (
	"fmt"
	"slices"
	"strings"
)

// Result is Check's verdict on a history.
type Result struct {
	Sent, Confirmed, Nacked, Unknown int // ids by outcome; Unknown counts ids still Sent too
	Returned                         int // unroutable (basic.return)
	Delivered                        int // distinct ids delivered
	Deliveries                       int // deliveries in all

	// Lost are the confirmed ids never delivered: the broker took
	// responsibility for them and lost them. Must be empty.
	Lost []string
	// Unexpected are the delivered ids never published. Must be empty.
	Unexpected []string

	// Duplicates counts the deliveries after an id's first; of them,
	// DuplicatesFlagless had redelivered=false, and AfterAck came after a
	// delivery of the same id had been acked (an ack lost with its node).
	Duplicates, DuplicatesFlagless, AfterAck int
	// FlaglessAgain counts the deliveries with redelivered=false of an id
	// already delivered so once: the broker handed the message out as new
	// twice, whatever order the deliveries reached the clients in (an
	// original held up in a paused node's socket may arrive after its
	// redelivery elsewhere; that one is flagless once). SameCount counts
	// the deliveries whose x-delivery-count an earlier delivery of the id
	// had already: one checkout delivered twice, or one message enqueued
	// twice.
	FlaglessAgain, SameCount int
	// Dups lists every id delivered more than once, with its deliveries in
	// the order they came: what DupReport prints.
	Dups []Dup
	// NackedDelivered and UnknownDelivered count ids delivered although
	// nacked, or whose confirm never came; both are allowed (a nack or a
	// lost confirm does not say the message was not stored).
	NackedDelivered, UnknownDelivered int
}

// Dup is an id delivered more than once.
type Dup struct {
	ID         string
	State      PubState // its publisher's outcome
	Deliveries []Delivery
}

// OK reports whether nothing confirmed was lost and nothing unpublished
// was delivered.
func (r Result) OK() bool { return len(r.Lost) == 0 && len(r.Unexpected) == 0 }

// String sums the result up on one line, naming the first lost and
// unexpected ids.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d: confirmed %d, nacked %d, returned %d, unknown %d; delivered %d ids in %d deliveries; lost %d, unexpected %d, duplicates %d (%d without redelivered, %d flagless twice, %d with a delivery count seen before, %d after an ack), nacked-but-delivered %d, unknown-but-delivered %d",
		r.Sent, r.Confirmed, r.Nacked, r.Returned, r.Unknown, r.Delivered, r.Deliveries, len(r.Lost), len(r.Unexpected),
		r.Duplicates, r.DuplicatesFlagless, r.FlaglessAgain, r.SameCount, r.AfterAck, r.NackedDelivered, r.UnknownDelivered)
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "; lost: %s", firstN(r.Lost, 10))
	}
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(&b, "; unexpected: %s", firstN(r.Unexpected, 10))
	}
	return b.String()
}

// DupReport describes the ids delivered more than once, at most max of
// them (all when max <= 0), those delivered flagless twice or with a
// delivery count twice first: a line per id, then one per delivery (its
// time, node, consumer, redelivered flag, x-delivery-count, acked).
func (r Result) DupReport(max int) string {
	dups := slices.Clone(r.Dups)
	// Stable: the suspicious ones first, each group in delivery order.
	slices.SortStableFunc(dups, func(a, b Dup) int {
		return cmpBool(b.suspicious(), a.suspicious())
	})
	var b strings.Builder
	for i, d := range dups {
		if max > 0 && i == max {
			fmt.Fprintf(&b, "... (%d more ids delivered more than once)\n", len(dups)-max)
			break
		}
		fmt.Fprintf(&b, "%s (%s) delivered %d times:\n", d.ID, d.State, len(d.Deliveries))
		for _, v := range d.Deliveries {
			fmt.Fprintf(&b, "  %s node %s consumer %s redelivered=%t x-delivery-count=%d acked=%t\n",
				v.At.Format("15:04:05.000000"), v.Node, v.Consumer, v.Redelivered, v.Count, v.Acked)
		}
	}
	return b.String()
}

// suspicious: delivered flagless twice, or twice with one delivery count.
func (d Dup) suspicious() bool {
	flagless := 0
	counts := map[int]bool{}
	for _, v := range d.Deliveries {
		if !v.Redelivered {
			flagless++
		}
		if v.Count >= 0 && counts[v.Count] {
			return true
		}
		counts[v.Count] = true
	}
	return flagless > 1
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func firstN(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:n], " ") + fmt.Sprintf(" ... (%d more)", len(ids)-n)
}

// Check reads a history once every client has stopped.
func Check(s Snapshot) Result {
	r := Result{Sent: len(s.Pubs), Deliveries: len(s.Deliveries)}
	for _, st := range s.Pubs {
		switch st {
		case Confirmed:
			r.Confirmed++
		case Nacked:
			r.Nacked++
		case Returned:
			r.Returned++
		default:
			r.Unknown++
		}
	}
	seen := map[string]int{}
	acked := map[string]bool{}
	flagless := map[string]bool{}
	counts := map[string][]int{}
	byID := map[string][]Delivery{}
	for _, d := range s.Deliveries {
		byID[d.ID] = append(byID[d.ID], d)
		st, published := s.Pubs[d.ID]
		if !published {
			if seen[d.ID] == 0 {
				r.Unexpected = append(r.Unexpected, d.ID)
			}
		} else if seen[d.ID] == 0 {
			switch st {
			case Nacked, Returned:
				r.NackedDelivered++
			case Sent, Unknown:
				r.UnknownDelivered++
			}
		}
		if seen[d.ID] > 0 {
			r.Duplicates++
			if !d.Redelivered {
				r.DuplicatesFlagless++
			}
			if acked[d.ID] {
				r.AfterAck++
			}
			if !d.Redelivered && flagless[d.ID] {
				r.FlaglessAgain++
			}
			if d.Count >= 0 && slices.Contains(counts[d.ID], d.Count) {
				r.SameCount++
			}
		}
		if !d.Redelivered {
			flagless[d.ID] = true
		}
		if d.Count >= 0 {
			counts[d.ID] = append(counts[d.ID], d.Count)
		}
		seen[d.ID]++
		if d.Acked {
			acked[d.ID] = true
		}
	}
	r.Delivered = len(seen)
	for _, id := range s.Order {
		if s.Pubs[id] == Confirmed && seen[id] == 0 {
			r.Lost = append(r.Lost, id)
		}
		if seen[id] > 1 {
			r.Dups = append(r.Dups, Dup{ID: id, State: s.Pubs[id], Deliveries: byID[id]})
		}
	}
	return r
}
