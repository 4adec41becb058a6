package jepsen

import (
	"fmt"
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
	// NackedDelivered and UnknownDelivered count ids delivered although
	// nacked, or whose confirm never came; both are allowed (a nack or a
	// lost confirm does not say the message was not stored).
	NackedDelivered, UnknownDelivered int
}

// OK reports whether nothing confirmed was lost and nothing unpublished
// was delivered.
func (r Result) OK() bool { return len(r.Lost) == 0 && len(r.Unexpected) == 0 }

// String sums the result up on one line, naming the first lost and
// unexpected ids.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d: confirmed %d, nacked %d, returned %d, unknown %d; delivered %d ids in %d deliveries; lost %d, unexpected %d, duplicates %d (%d without redelivered, %d after an ack), nacked-but-delivered %d, unknown-but-delivered %d",
		r.Sent, r.Confirmed, r.Nacked, r.Returned, r.Unknown, r.Delivered, r.Deliveries, len(r.Lost), len(r.Unexpected),
		r.Duplicates, r.DuplicatesFlagless, r.AfterAck, r.NackedDelivered, r.UnknownDelivered)
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "; lost: %s", firstN(r.Lost, 10))
	}
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(&b, "; unexpected: %s", firstN(r.Unexpected, 10))
	}
	return b.String()
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
	for _, d := range s.Deliveries {
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
	}
	return r
}
