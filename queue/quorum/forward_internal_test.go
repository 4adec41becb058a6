package quorum

import (
	"testing"

	"github.com/warrenmq/warren/queue"
)

// A forwarded entry's answer carries its refused enqueues and its gets'
// results, so that a member answers a basic.get from the leader's apply
// (its own may never come: it left the group meanwhile); an answer of an
// earlier build (refused ids only) reads as no gets.
func TestForwardResultAnswersGets(t *testing.T) {
	m := queue.NewStored("x", "rk", []byte{0x10, 0x00, 2}, []byte("body"), 0)
	fr := forwardResult{refused: []uint64{3}, gets: []result{
		{seq: 5, n: 7, get: true, entry: &queue.Entry{Seq: 9, Redelivered: true, Returns: 2, Expires: 1234, Msg: m}},
		{seq: 6, get: true},
	}}
	var e encoder
	fr.encode(&e)
	got, err := decodeForwardResult(e.b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.refused) != 1 || got.refused[0] != 3 || len(got.gets) != 2 {
		t.Fatalf("decoded %+v", got)
	}
	g := got.gets[0]
	if g.seq != 5 || g.n != 7 || g.entry == nil || g.entry.Seq != 9 || !g.entry.Redelivered || g.entry.Returns != 2 || g.entry.Expires != 1234 ||
		string(g.entry.Msg.Body) != "body" || g.entry.Msg.Exchange != "x" || g.entry.Msg.RoutingKey != "rk" || !g.entry.Msg.Persistent {
		t.Fatalf("get decoded as %+v %+v", g, g.entry)
	}
	if g := got.gets[1]; g.seq != 6 || g.entry != nil {
		t.Fatalf("empty get decoded as %+v", g)
	}

	// A get whose body the leader could not read is left out: its
	// proposer's own apply answers it.
	var partial encoder
	forwardResult{gets: []result{{seq: 8, get: true, entry: &queue.Entry{Seq: 1}}}}.encode(&partial)
	if got, err := decodeForwardResult(partial.b); err != nil || len(got.gets) != 0 {
		t.Fatalf("a get without its body: %+v %v", got, err)
	}

	var old encoder
	old.ids([]uint64{4})
	if got, err := decodeForwardResult(old.b); err != nil || len(got.refused) != 1 || len(got.gets) != 0 {
		t.Fatalf("an earlier build's answer: %+v %v", got, err)
	}

	// The proposer answers its get's waiter from it, and its publish's.
	q := &Queue{waiters: map[uint64]*waiter{}}
	getW := &waiter{ch: make(chan result, 1)}
	var pubErr error
	published := false
	q.waiters[5] = getW
	q.waiters[4] = &waiter{msg: m, done: func(err error) { pubErr, published = err, true }}
	q.forwarded(batch{first: 4, last: 6}, e.b)
	select {
	case r := <-getW.ch:
		if r.entry == nil || string(r.entry.Msg.Body) != "body" || r.n != 7 {
			t.Fatalf("get answered %+v", r)
		}
	default:
		t.Fatal("the get was not answered from the forwarded answer")
	}
	if !published || pubErr != nil {
		t.Fatalf("publish answered %v %v", published, pubErr)
	}
	if len(q.waiters) != 0 {
		t.Fatalf("waiters left: %v", q.waiters)
	}
}
