package jepsen

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// history builds a history from a compact script: each step is
// "send id", "ok id", "nack id", "lost id" (unknown), or a delivery
// "dlv id [re] [ack] [n=K]" (K its x-delivery-count, -1 when absent).
func history(t *testing.T, steps ...[]string) Snapshot {
	t.Helper()
	var h History
	for _, s := range steps {
		switch s[0] {
		case "send":
			h.Send(s[1])
		case "ok":
			h.Settle(s[1], Confirmed)
		case "nack":
			h.Settle(s[1], Nacked)
		case "unknown":
			h.Settle(s[1], Unknown)
		case "dlv":
			d := Delivery{ID: s[1], Count: -1, Redelivered: slices.Contains(s[2:], "re"), Node: "n1", Consumer: "c1"}
			for _, a := range s[2:] {
				if k, ok := strings.CutPrefix(a, "n="); ok {
					d.Count, _ = strconv.Atoi(k)
				}
			}
			i := h.Deliver(d)
			if slices.Contains(s[2:], "ack") {
				h.Ack(i)
			}
		default:
			t.Fatalf("bad step %q", s)
		}
	}
	return h.Snapshot()
}

func st(s ...string) []string { return s }

func TestCheckCatchesLost(t *testing.T) {
	r := Check(history(t,
		st("send", "a"), st("ok", "a"),
		st("send", "b"), st("ok", "b"),
		st("send", "c"), st("ok", "c"),
		st("dlv", "a", "ack"), st("dlv", "c", "ack"),
	))
	if r.OK() || !slices.Equal(r.Lost, []string{"b"}) {
		t.Fatalf("lost %v, OK %v: %s", r.Lost, r.OK(), r)
	}
	if r.Confirmed != 3 || r.Delivered != 2 {
		t.Fatalf("%s", r)
	}
}

func TestCheckLostInSendOrder(t *testing.T) {
	r := Check(history(t,
		st("send", "z"), st("send", "y"), st("send", "x"),
		st("ok", "x"), st("ok", "z"), st("ok", "y"),
	))
	if !slices.Equal(r.Lost, []string{"z", "y", "x"}) {
		t.Fatalf("lost %v", r.Lost)
	}
}

func TestCheckUnconfirmedMayBeLost(t *testing.T) {
	// A nacked message and one whose confirm never came may vanish.
	r := Check(history(t,
		st("send", "a"), st("nack", "a"),
		st("send", "b"), st("unknown", "b"),
		st("send", "c"), // still no outcome when the run ended
	))
	if !r.OK() || r.Nacked != 1 || r.Unknown != 2 {
		t.Fatalf("%s", r)
	}
}

func TestCheckUnexpected(t *testing.T) {
	r := Check(history(t,
		st("send", "a"), st("ok", "a"), st("dlv", "a", "ack"),
		st("dlv", "ghost"), st("dlv", "ghost", "re"),
	))
	if r.OK() || !slices.Equal(r.Unexpected, []string{"ghost"}) {
		t.Fatalf("unexpected %v: %s", r.Unexpected, r)
	}
	if r.Duplicates != 1 {
		t.Fatalf("duplicates %d", r.Duplicates)
	}
}

func TestCheckDuplicatesAndNackedDelivered(t *testing.T) {
	r := Check(history(t,
		st("send", "a"), st("ok", "a"),
		st("dlv", "a"), st("dlv", "a", "re", "ack"), // requeued unacked, then acked
		st("dlv", "a"), // an ack lost, redelivered without the flag
		st("send", "b"), st("nack", "b"), st("dlv", "b", "ack"),
		st("send", "c"), st("unknown", "c"), st("dlv", "c", "ack"),
	))
	if !r.OK() {
		t.Fatalf("%s", r)
	}
	if r.Duplicates != 2 || r.DuplicatesFlagless != 1 || r.AfterAck != 1 {
		t.Fatalf("duplicates: %s", r)
	}
	if r.NackedDelivered != 1 || r.UnknownDelivered != 1 {
		t.Fatalf("nacked/unknown delivered: %s", r)
	}
	if r.Delivered != 3 || r.Deliveries != 5 {
		t.Fatalf("%s", r)
	}
}

func TestCheckFlaglessTwiceAndSameCount(t *testing.T) {
	r := Check(history(t,
		// a: its redelivery reached a client before the original (held
		// up in a paused node): flagless once, counts 1 and 0.
		st("send", "a"), st("ok", "a"), st("dlv", "a", "re", "n=1", "ack"), st("dlv", "a", "n=0"),
		// b: handed out as new twice, with one delivery count.
		st("send", "b"), st("ok", "b"), st("dlv", "b", "n=0"), st("dlv", "b", "n=0", "ack"),
		// c: redelivered twice with one count (one checkout sent twice).
		st("send", "c"), st("ok", "c"), st("dlv", "c", "n=0"), st("dlv", "c", "re", "n=1"), st("dlv", "c", "re", "n=1", "ack"),
		// d: once.
		st("send", "d"), st("ok", "d"), st("dlv", "d", "n=0", "ack"),
	))
	if !r.OK() {
		t.Fatalf("%s", r)
	}
	if r.Duplicates != 4 || r.DuplicatesFlagless != 2 || r.FlaglessAgain != 1 || r.SameCount != 2 || r.AfterAck != 1 {
		t.Fatalf("duplicates: %s", r)
	}
	var ids []string
	for _, d := range r.Dups {
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) || len(r.Dups[2].Deliveries) != 3 {
		t.Fatalf("dups %v", r.Dups)
	}
	rep := r.DupReport(2)
	// The suspicious ids (b, c) first, a cut off.
	if !strings.HasPrefix(rep, "b (confirmed) delivered 2 times:\n") || !strings.Contains(rep, "\nc (confirmed) delivered 3 times:\n") ||
		strings.Contains(rep, "\na (") || !strings.Contains(rep, "1 more ids") {
		t.Fatalf("report:\n%s", rep)
	}
	if !strings.Contains(rep, "node n1 consumer c1 redelivered=true x-delivery-count=1 acked=true") {
		t.Fatalf("report:\n%s", rep)
	}
}

func TestSettleIsFinal(t *testing.T) {
	// A confirm that came stays one when the connection closes after it.
	r := Check(history(t, st("send", "a"), st("ok", "a"), st("unknown", "a")))
	if r.Confirmed != 1 || len(r.Lost) != 1 {
		t.Fatalf("%s", r)
	}
}

func TestHistoryUndelivered(t *testing.T) {
	var h History
	for _, id := range []string{"a", "b", "c"} {
		h.Send(id)
		h.Settle(id, Confirmed)
	}
	h.Deliver(Delivery{ID: "b"})
	ids, n := h.Undelivered(1)
	if n != 2 || !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("%v %d", ids, n)
	}
}
