package quorum

import (
	"math/rand/v2"
	"testing"

	"github.com/warrenmq/warren/queue"
)

// TestDequeModel drives a deque and a plain slice with the same random
// pushes and pops, across many chunk boundaries, and compares them after
// each step: order, every field, and the pointers that wait beside the
// slots (bodies, refs), which leave with their message.
func TestDequeModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q deque
	var model []*msg
	var next uint64
	newMsg := func() *msg {
		next++
		m := &msg{id: next, idx: next * 3, pos: uint32(next % 7), size: uint32(next % 1000), expires: int64(next * 5), count: uint32(next % 3), owner: next % 4}
		switch next % 5 {
		case 0:
			m.body = &queue.Message{Body: []byte{byte(next)}}
		case 1:
			m.ref = &bodyRef{off: int64(next)}
		}
		return m
	}
	check := func(step int) {
		t.Helper()
		if q.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, q.len(), len(model))
		}
		i := 0
		q.each(func(m *msg) {
			if *m != *model[i] {
				t.Fatalf("step %d: item %d is %+v, model %+v", step, i, *m, *model[i])
			}
			i++
		})
		if e, ok := q.frontExpires(); ok != (len(model) > 0) || ok && e != model[0].expires {
			t.Fatalf("step %d: frontExpires %d %v", step, e, ok)
		}
		if f := q.front(); len(model) > 0 && *f != *model[0] || len(model) == 0 && f != nil {
			t.Fatalf("step %d: front %+v", step, f)
		}
	}
	for step := 0; step < 20000; step++ {
		// Phases that grow, then drain, so that the deque empties and
		// refills more than once.
		grow := step/2500%2 == 0
		switch r := rng.IntN(10); {
		case r < 4 && grow || r < 2:
			m := newMsg()
			q.pushBack(m)
			model = append(model, m)
		case r < 6 && grow || r < 3:
			m := newMsg()
			q.pushFront(m)
			model = append([]*msg{m}, model...)
		default:
			got := q.popFront()
			if len(model) == 0 {
				if got != nil {
					t.Fatalf("step %d: pop of empty gave %+v", step, got)
				}
				continue
			}
			if *got != *model[0] {
				t.Fatalf("step %d: pop %+v, model %+v", step, *got, *model[0])
			}
			model = model[1:]
		}
		if step%97 == 0 {
			check(step)
		}
	}
	for len(model) > 0 {
		q.popFront()
		model = model[1:]
	}
	check(-1)
	if len(q.bodies) != 0 || len(q.refs) != 0 || len(q.chunks) > 1 {
		t.Fatalf("empty deque keeps %d bodies, %d refs, %d chunks", len(q.bodies), len(q.refs), len(q.chunks))
	}
}

// TestDequePopCopies: a popped message is the caller's; changing it
// changes nothing in the deque.
func TestDequePopCopies(t *testing.T) {
	var q deque
	q.pushBack(&msg{id: 1, count: 1})
	q.pushBack(&msg{id: 2, count: 1})
	q.front().count = 9
	m := q.popFront()
	m.count = 7
	if f := q.front(); f.id != 2 || f.count != 1 {
		t.Fatalf("front after pop: %+v", f)
	}
}
