package classic_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/classic"
)

// model is the slow reference of a classic queue without limits: ready
// messages in publish order, a requeued one back at its place, marked
// redelivered.
type model struct {
	next    int
	ready   []modelMsg // ascending n
	unacked map[int]modelMsg
}

type modelMsg struct {
	n           int
	redelivered bool
}

func (m *model) publish() int {
	m.next++
	m.ready = append(m.ready, modelMsg{n: m.next})
	return m.next
}

func (m *model) get(noAck bool) (modelMsg, bool) {
	if len(m.ready) == 0 {
		return modelMsg{}, false
	}
	x := m.ready[0]
	m.ready = m.ready[1:]
	if !noAck {
		m.unacked[x.n] = x
	}
	return x, true
}

func (m *model) settle(ns []int, op queue.SettleOp) {
	for _, n := range ns {
		x := m.unacked[n]
		delete(m.unacked, n)
		if op == queue.Requeue {
			x.redelivered = true
			i, _ := slices.BinarySearchFunc(m.ready, n, func(a modelMsg, n int) int { return a.n - n })
			m.ready = slices.Insert(m.ready, i, x)
		}
	}
}

// TestAgainstModel runs random operation sequences on classic queues, in
// memory, durable on a store and paging past a small window, and
// transient and spilling, and checks every answer against the model.
func TestAgainstModel(t *testing.T) {
	variants := []struct {
		name    string
		durable bool
		window  int
		persist float64 // share of persistent publishes
	}{
		{"memory", false, 0, 0},
		{"spill", false, 3, 0},
		{"paged", true, 3, 1},
		{"mixed", true, 3, 0.5},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for seed := range uint64(40) {
				runModel(t, seed, v.durable, v.window, v.persist)
			}
		})
	}
}

func runModel(t *testing.T, seed uint64, durable bool, window int, persistent float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := classic.Config{Window: window}
	if window > 0 {
		st := persist.NewMemory()
		defer st.Close()
		var ids atomic.Uint64
		cfg.Store, cfg.SpillDir = st, t.TempDir()
		cfg.NextMessageID = func() uint64 { return ids.Add(1) }
		cfg.Log = func(err error, msg string) { t.Errorf("%s: %v", msg, err) }
	}
	typ := classic.NewType(cfg)
	q, err := typ.New(queue.Decl{VHost: "/", Name: fmt.Sprint("m", seed), Durable: durable}, queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Delete(false, false)
	g := q.(queue.Getter)
	m := &model{unacked: map[int]modelMsg{}}
	held := map[int]queue.Entry{} // unacked entries by message number
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %v: %s", seed, trace, fmt.Sprintf(format, args...))
	}
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op < 4:
			n := m.publish()
			msg := &queue.Message{Body: []byte(fmt.Sprint(n)), Persistent: rng.Float64() < persistent}
			typ.Publish(msg, []queue.Queue{q}, nil, nil)
			trace = append(trace, fmt.Sprint("pub", n))
		case op < 7:
			noAck := rng.IntN(3) == 0
			e, left, ok := g.Get(noAck)
			want, wok := m.get(noAck)
			trace = append(trace, fmt.Sprint("get", noAck))
			if ok != wok {
				fail("Get found %v, model %v", ok, wok)
			}
			if !ok {
				continue
			}
			if string(e.Msg.Body) != fmt.Sprint(want.n) || e.Redelivered != want.redelivered || left != len(m.ready) {
				fail("Get = %s redelivered %v (%d left), model %d %v (%d left)", e.Msg.Body, e.Redelivered, left, want.n, want.redelivered, len(m.ready))
			}
			if !noAck {
				held[want.n] = e
			}
		default:
			if len(held) == 0 {
				continue
			}
			keys := slices.Sorted(func(yield func(int) bool) {
				for k := range held {
					if !yield(k) {
						return
					}
				}
			})
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			pick := keys[:1+rng.IntN(len(keys))]
			op := []queue.SettleOp{queue.Ack, queue.Reject, queue.Requeue}[rng.IntN(3)]
			es := make([]queue.Entry, len(pick))
			for i, k := range pick {
				es[i] = held[k]
				delete(held, k)
			}
			q.Settle(es, op)
			m.settle(pick, op)
			trace = append(trace, fmt.Sprint("settle", op, pick))
		}
		if st := q.Stats(); st.Ready != len(m.ready) || st.Unacked != len(m.unacked) {
			fail("stats ready %d unacked %d, model %d %d", st.Ready, st.Unacked, len(m.ready), len(m.unacked))
		}
		if len(trace) > 40 {
			trace = trace[len(trace)-40:]
		}
	}
}
