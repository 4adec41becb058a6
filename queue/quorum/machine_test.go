package quorum

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warrenmq/warren/queue"
)

// entry is one encoded log entry of a random command log.
type entry struct {
	idx  uint64
	data []byte
}

// randomLog makes n entries of random commands from a few proposers, with
// a leader clock that moves forward (and sometimes back: apply must not
// follow it back).
func randomLog(seed uint64, n int) []entry {
	r := rand.New(rand.NewPCG(seed, seed^0x9e37))
	var log []entry
	now := int64(1_000_000)
	seqs := map[uint64]uint64{}
	var nextID uint64           // the ids the machine will have given, roughly: settles name some that exist
	last := map[uint64][]byte{} // each proposer's last batch
	for i := range n {
		pid := uint64(1 + r.IntN(3))
		if b := last[pid]; b != nil && r.IntN(10) == 0 {
			// A batch sent again (a leader change): applied once.
			log = append(log, entry{uint64(i + 1), b})
			continue
		}
		now += int64(r.IntN(400)) - 50
		e := &encoder{}
		e.u8(batchVersion)
		e.i64(now)
		e.u64(pid)
		k := 1 + r.IntN(6)
		e.u32(uint32(k))
		for range k {
			op := uint8(1 + r.IntN(14))
			if r.IntN(3) == 0 {
				op = opEnqueue
			} else if r.IntN(12) == 0 {
				op = opCancel
			} else if r.IntN(20) == 0 {
				op = opLeave
			}
			seq := seqs[pid] + 1
			seqs[pid] = seq
			e.u8(op)
			e.u64(seq)
			randIDs := func() []uint64 {
				ids := make([]uint64, r.IntN(4))
				for j := range ids {
					ids[j] = 1 + r.Uint64N(nextID+1)
				}
				return ids
			}
			switch op {
			case opEnqueue:
				nextID++
				e.str("ex")
				e.str("rk")
				props := []byte{0, 0}
				e.bytes(props)
				e.bytes(bytes.Repeat([]byte{'b'}, r.IntN(50)))
			case opAttach:
				e.u64(uint64(1 + r.IntN(4)))
				e.str("n")
				e.u32(uint32(r.IntN(4)))
				e.u32(uint32(r.IntN(3)))
				e.u8(uint8(r.IntN(8) / 7))
			case opDetach, opUnblock, opCancel:
				e.u64(uint64(1 + r.IntN(4)))
			case opSettle, opReturn, opDiscard:
				e.ids(randIDs())
			case opUnassign, opLeave:
				e.u64(uint64(1 + r.IntN(4)))
				e.ids(randIDs())
			case opGet:
				e.u8(uint8(r.IntN(2)))
			case opConfig:
				e.i64([]int64{-1, 0, 300}[r.IntN(3)])
				e.i64([]int64{-1, 3, 10}[r.IntN(3)])
				e.i64([]int64{-1, 200}[r.IntN(2)])
				e.u8([]uint8{0, 1, 0x80, 0x81}[r.IntN(4)]) // fifoRules or not
				e.i64([]int64{-1, 0, 2}[r.IntN(3)])
				e.u8(uint8(r.IntN(2)))
			case opResetNode:
				e.str("n")
			case opResetNode2:
				e.str("n")
				e.u64(uint64(r.IntN(4)))
			}
		}
		last[pid] = e.b
		log = append(log, entry{uint64(i + 1), e.b})
	}
	return log
}

// run applies log to a machine and returns it with a transcript of every
// effect.
func run(s *machine, log []entry) (*machine, string) {
	var tr bytes.Buffer
	for _, e := range log {
		var fx effects
		s.apply(e.idx, e.data, nil, &fx)
		fmt.Fprintf(&tr, "%d:", e.idx)
		for _, d := range fx.deliver {
			fmt.Fprintf(&tr, " d%d>%d/%d", d.m.id, d.consumer, d.e.Returns)
		}
		for _, r := range fx.results {
			fmt.Fprintf(&tr, " r%d.%d=%v,%d", r.pid, r.seq, r.err, r.n)
		}
		for _, x := range fx.dead {
			fmt.Fprintf(&tr, " x%d:%s", x.m.id, x.reason)
		}
		fmt.Fprintf(&tr, " e%d\n", fx.expiry)
	}
	return s, tr.String()
}

// The same log applied twice gives the same effects and the same
// snapshot; a machine restored from a snapshot taken half-way and fed the
// rest ends where the one that applied everything ends.
func TestMachineDeterministic(t *testing.T) {
	for seed := range uint64(40) {
		log := randomLog(seed, 300)
		a, ta := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log)
		b, tb := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log)
		sa, _, _ := a.encode()
		sb, _, _ := b.encode()
		if ta != tb || !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: two runs of one log differ", seed)
		}
		half, _ := run(newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)), log[:150])
		snap, _, _ := half.encode()
		restored, err := decodeMachine(snap)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if again, _, _ := restored.encode(); !bytes.Equal(again, snap) {
			t.Fatalf("seed %d: a restored snapshot encodes differently", seed)
		}
		_, tHalf := run(half, log[150:])
		_, tRest := run(restored, log[150:])
		if tHalf != tRest {
			t.Fatalf("seed %d: effects after a restore differ:\n%s\nvs\n%s", seed, tHalf, tRest)
		}
		sr, _, _ := restored.encode()
		sh, _, _ := half.encode()
		if !bytes.Equal(sr, sh) || !bytes.Equal(sh, sa) {
			t.Fatalf("seed %d: state after a restore differs", seed)
		}
		checkInvariants(t, a)
	}
}

// checkInvariants compares the machine with what its parts say: counts,
// bytes, each message in one place, consumers' credit never exceeded.
func checkInvariants(t *testing.T, s *machine) {
	t.Helper()
	seen := map[uint64]bool{}
	n, b := 0, int64(0)
	for _, q := range []*deque{&s.returns, &s.ready} {
		q.each(func(m *msg) {
			if seen[m.id] || m.owner != 0 {
				t.Fatalf("message %d twice or owned while ready", m.id)
			}
			seen[m.id] = true
			n++
			b += int64(m.size)
		})
	}
	if n != s.readyN || b != s.readyB {
		t.Fatalf("ready %d/%d bytes, counted %d/%d", s.readyN, s.readyB, n, b)
	}
	outs := map[uint64]int{}
	for id, m := range s.out {
		if seen[id] || m.owner == 0 {
			t.Fatalf("checked-out message %d also ready or unowned", id)
		}
		outs[m.owner]++
	}
	for _, c := range s.consumers {
		if outs[c.key] != c.out {
			t.Fatalf("consumer %d: out %d, holds %d", c.key, c.out, outs[c.key])
		}
		if c.cancelled && c.out == 0 {
			t.Fatalf("consumer %d: cancelled and holding nothing, still there", c.key)
		}
	}
}

func attachCmd(seq, key uint64, prefetch uint32) func(e *encoder) {
	return func(e *encoder) {
		e.u8(opAttach)
		e.u64(seq)
		e.u64(key)
		e.str("n")
		e.u32(prefetch)
		e.u32(0)
		e.u8(0)
	}
}

func keyCmd(op uint8, seq, key uint64) func(e *encoder) {
	return func(e *encoder) {
		e.u8(op)
		e.u64(seq)
		e.u64(key)
	}
}

func idsCmd(op uint8, seq uint64, ids ...uint64) func(e *encoder) {
	return func(e *encoder) {
		e.u8(op)
		e.u64(seq)
		e.ids(ids)
	}
}

// A consumer whose replica left the group (opLeave) keeps the ids its
// replica handed to its channel, as a cancelled consumer, and goes once
// they are settled; the rest goes back as a detach gives it back
// (redelivered, ahead of the messages never delivered). One left holding
// nothing goes at once; a key the group does not have is nothing.
func TestMachineLeaveKeepsWhatWasHandedOver(t *testing.T) {
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	fx := &effects{}
	s.apply(1, batchOf(7, attachCmd(1, 11, 3), enqueueCmd(2, "m1"), enqueueCmd(3, "m2"), enqueueCmd(4, "m3"), enqueueCmd(5, "m4")), nil, fx)
	if len(fx.deliver) != 3 || s.readyN != 1 {
		t.Fatalf("%d deliveries, %d ready; want 3 and m4", len(fx.deliver), s.readyN)
	}
	m1, m2, m3 := fx.deliver[0].m.id, fx.deliver[1].m.id, fx.deliver[2].m.id
	leave := func(seq, key uint64, ids ...uint64) func(e *encoder) {
		return func(e *encoder) {
			e.u8(opLeave)
			e.u64(seq)
			e.u64(key)
			e.ids(ids)
		}
	}
	fx = &effects{}
	s.apply(2, batchOf(7, leave(6, 11, m1), leave(7, 99, m2)), nil, fx)
	if c := s.consumer(11); c == nil || !c.cancelled || c.out != 1 || s.out[m1] == nil {
		t.Fatalf("after the leave: consumer %+v, m1 out %v; want it cancelled holding m1", c, s.out[m1] != nil)
	}
	if got := readyBodies(s); !slices.Equal(got, []string{"m2", "m3", "m4"}) {
		t.Fatalf("ready after the leave: %v, want m2 m3 m4", got)
	}
	if s.out[m2] != nil || s.out[m3] != nil {
		t.Fatal("m2 and m3 still checked out after the leave")
	}
	checkInvariants(t, s)
	fx = &effects{}
	s.apply(3, batchOf(8, attachCmd(1, 12, 10)), nil, fx)
	if len(fx.deliver) != 3 || fx.deliver[0].m.id != m2 || fx.deliver[1].m.id != m3 {
		t.Fatalf("the next consumer got %+v, want m2, m3 and m4", fx.deliver)
	}
	for i, d := range fx.deliver {
		if want := i < 2; d.e.Redelivered != want {
			t.Fatalf("%d delivered with redelivered %v, want %v (given back by the leave: %v)", d.m.id, d.e.Redelivered, want, want)
		}
	}
	s.apply(4, batchOf(9, idsCmd(opSettle, 1, m1)), nil, &effects{})
	if s.consumer(11) != nil || s.out[m1] != nil {
		t.Fatal("the left consumer stays after its last message was settled")
	}
	checkInvariants(t, s)
	// Left holding nothing: gone at once.
	s.apply(5, batchOf(9, attachCmd(2, 13, 0), leave(3, 13)), nil, &effects{})
	if s.consumer(13) != nil {
		t.Fatal("a consumer left holding nothing stays")
	}
	checkInvariants(t, s)
}

// basic.cancel (opCancel), as RabbitMQ 3.10's quorum queues: the
// consumer takes nothing more, keeps what it holds until it is settled
// (an ack after the cancel counts), and goes then; with single active
// consumer the next one takes over for what comes, not for what the
// cancelled one holds. A consumer that holds nothing goes at once.
func TestMachineCancelKeepsWhatItHolds(t *testing.T) {
	for _, sac := range []bool{false, true} {
		s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1, SingleActive: sac}, true))
		fx := &effects{}
		s.apply(1, batchOf(7, attachCmd(1, 11, 10), attachCmd(2, 12, 10), enqueueCmd(3, "m1")), nil, fx)
		if len(fx.deliver) != 1 {
			t.Fatalf("sac %v: %d deliveries, want 1", sac, len(fx.deliver))
		}
		holder := fx.deliver[0].consumer
		other := uint64(11 + 12 - holder)
		held := fx.deliver[0].m.id
		fx = &effects{}
		s.apply(2, batchOf(7, keyCmd(opCancel, 4, holder), enqueueCmd(5, "m2")), nil, fx)
		if len(fx.deliver) != 1 || fx.deliver[0].consumer != other {
			t.Fatalf("sac %v: after the cancel, deliveries %+v, want m2 to %d", sac, fx.deliver, other)
		}
		if s.readyN != 0 || s.out[held] == nil || s.consumer(holder) == nil || !s.consumer(holder).cancelled {
			t.Fatalf("sac %v: the cancelled consumer does not hold m1 (ready %d)", sac, s.readyN)
		}
		checkInvariants(t, s)
		// Its ack after the cancel settles m1, and it goes.
		fx = &effects{}
		s.apply(3, batchOf(7, idsCmd(opSettle, 6, held)), nil, fx)
		if s.out[held] != nil || s.consumer(holder) != nil || s.readyN != 0 {
			t.Fatalf("sac %v: after the ack: out %v, consumer %v, ready %d", sac, s.out[held] != nil, s.consumer(holder) != nil, s.readyN)
		}
		checkInvariants(t, s)
		// A consumer that holds nothing goes at once; the snapshot keeps
		// a cancelled one's mark.
		s.apply(4, batchOf(7, attachCmd(7, 13, 10), keyCmd(opCancel, 8, 13)), nil, &effects{})
		if s.consumer(13) != nil {
			t.Fatalf("sac %v: a cancelled consumer holding nothing stays", sac)
		}
	}
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	s.apply(1, batchOf(7, attachCmd(1, 11, 10), enqueueCmd(2, "m1"), keyCmd(opCancel, 3, 11)), nil, &effects{})
	b, _, _ := s.encode()
	r, err := decodeMachine(b)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.consumer(11); c == nil || !c.cancelled || c.out != 1 {
		t.Fatalf("restored from a snapshot: %+v", c)
	}
}

// A model of a FIFO with returns served first: random enqueues, checkouts
// (by get), returns, acks and purges; the machine delivers what the model
// says, in its order, with its delivery counts.
func TestMachineAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	type mm struct {
		body  string
		count uint32
	}
	var ready, returns []uint64
	model := map[uint64]*mm{}
	out := map[uint64]bool{}
	var next, seq, idx uint64
	apply := func(op uint8, fill func(*encoder)) effects {
		e := &encoder{}
		e.u8(batchVersion)
		e.i64(1)
		e.u64(1)
		e.u32(1)
		seq++
		e.u8(op)
		e.u64(seq)
		if fill != nil {
			fill(e)
		}
		idx++
		var fx effects
		s.apply(idx, e.b, nil, &fx)
		return fx
	}
	for step := range 5000 {
		switch x := r.IntN(10); {
		case x < 4:
			next++
			body := fmt.Sprint("m", next)
			apply(opEnqueue, func(e *encoder) { e.str(""); e.str(""); e.bytes(nil); e.bytes([]byte(body)) })
			model[next] = &mm{body: body}
			ready = append(ready, next)
		case x < 6:
			fx := apply(opGet, func(e *encoder) { e.u8(0) })
			var want uint64
			if len(returns) > 0 {
				want, returns = returns[0], returns[1:]
			} else if len(ready) > 0 {
				want, ready = ready[0], ready[1:]
			}
			res := fx.results[0]
			if want == 0 {
				if res.entry != nil {
					t.Fatalf("step %d: get on an empty queue gave %d", step, res.entry.Seq)
				}
				continue
			}
			if res.entry == nil || res.entry.Seq != want || string(res.entry.Msg.Body) != model[want].body || res.entry.Returns != model[want].count {
				t.Fatalf("step %d: get = %+v, want %d (%+v)", step, res.entry, want, model[want])
			}
			out[want] = true
		case x < 8:
			ids := slices.Sorted(func(yield func(uint64) bool) {
				for id := range out {
					if !yield(id) {
						return
					}
				}
			})
			if len(ids) == 0 {
				continue
			}
			id := ids[r.IntN(len(ids))]
			delete(out, id)
			if r.IntN(2) == 0 {
				apply(opSettle, func(e *encoder) { e.ids([]uint64{id}) })
				delete(model, id)
			} else {
				apply(opReturn, func(e *encoder) { e.ids([]uint64{id}) })
				model[id].count++
				returns = append(returns, id)
			}
		case x < 9 && r.IntN(20) == 0:
			fx := apply(opPurge, nil)
			if fx.results[0].n != len(ready)+len(returns) {
				t.Fatalf("step %d: purge = %d, want %d", step, fx.results[0].n, len(ready)+len(returns))
			}
			for _, id := range append(ready, returns...) {
				delete(model, id)
			}
			ready, returns = nil, nil
		}
		if s.readyN != len(ready)+len(returns) || len(s.out) != len(out) {
			t.Fatalf("step %d: machine ready %d out %d, model %d %d", step, s.readyN, len(s.out), len(ready)+len(returns), len(out))
		}
	}
	checkInvariants(t, s)
}

// batchOf encodes one batch of proposer pid: commands (op, seq, fill).
func batchOf(pid uint64, cmds ...func(e *encoder)) []byte {
	e := &encoder{}
	e.u8(batchVersion)
	e.i64(1)
	e.u64(pid)
	e.u32(uint32(len(cmds)))
	for _, c := range cmds {
		c(e)
	}
	return e.b
}

func enqueueCmd(seq uint64, body string) func(e *encoder) {
	return func(e *encoder) {
		e.u8(opEnqueue)
		e.u64(seq)
		e.str("")
		e.str("rk")
		e.bytes([]byte{0, 0})
		e.bytes([]byte(body))
	}
}

// A batch sent again after an unknown outcome is applied once, whatever
// came between; a later batch of the same proposer is not taken for it.
func TestMachineBatchSentAgain(t *testing.T) {
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	a := batchOf(7, enqueueCmd(1, "a1"), enqueueCmd(2, "a2"))
	b := batchOf(7, enqueueCmd(3, "b"))
	c := batchOf(9, enqueueCmd(1, "c"))
	for i, data := range [][]byte{a, b, a, c, b} {
		s.apply(uint64(i+1), data, nil, &effects{})
	}
	if s.readyN != 4 {
		t.Fatalf("ready = %d, want 4 (a1, a2, b, c once each)", s.readyN)
	}
	// Sent again after later batches went first (a retry that lost the
	// race): still applied, since the first copy never was.
	s2 := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	s2.apply(1, b, nil, &effects{})
	s2.apply(2, a, nil, &effects{})
	if s2.readyN != 3 {
		t.Fatalf("ready = %d, want 3: a batch older than one applied is not a duplicate", s2.readyN)
	}
}

// A node's reset spares the consumers its current queue attached: a
// reset that arrives late never detaches them.
func TestMachineResetKeepsCurrentProposer(t *testing.T) {
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	attach := func(seq, key uint64) func(e *encoder) {
		return func(e *encoder) {
			e.u8(opAttach)
			e.u64(seq)
			e.u64(key)
			e.str("n1")
			e.u32(0)
			e.u32(0)
			e.u8(0)
		}
	}
	s.apply(1, batchOf(100, attach(1, 101)), nil, &effects{}) // before the restart
	s.apply(2, batchOf(200, attach(1, 201)), nil, &effects{}) // after it
	s.apply(3, batchOf(200, func(e *encoder) {
		e.u8(opResetNode2)
		e.u64(2)
		e.str("n1")
		e.u64(200)
	}), nil, &effects{})
	if len(s.consumers) != 1 || s.consumers[0].key != 201 {
		t.Fatalf("consumers after the reset: %+v, want only 201", s.consumers)
	}
}

func configCmd(seq uint64, c config) func(e *encoder) {
	return func(e *encoder) {
		e.u8(opConfig)
		e.u64(seq)
		e.i64(c.TTL)
		e.i64(c.MaxLen)
		e.i64(c.MaxBytes)
		e.u8(uint8(c.Overflow))
		e.i64(c.DeliveryLimit)
		e.u8(b2u(c.SAC))
	}
}

// readyBodies lists the ready messages' bodies, returns first.
func readyBodies(s *machine) []string {
	var out []string
	for _, q := range []*deque{&s.returns, &s.ready} {
		q.each(func(m *msg) { out = append(out, string(m.body.Body)) })
	}
	return out
}

// reject-publish under fifoRules, as RabbitMQ 3.10's rabbit_fifo: the
// message that takes the queue over x-max-length is taken, the next ones
// refused until the queue is down to 80% of the limit; the refusing
// survives a snapshot. A config of before (no fifoRules: an old log's
// opConfig) refuses at the limit, as it did.
func TestMachineRejectPublishSoftLimit(t *testing.T) {
	limits := queue.Limits{MaxLength: 5, MaxLengthBytes: -1, Overflow: queue.RejectPublish}
	s := newMachine(configFor(limits, true))
	var idx, seq uint64
	publish := func(s *machine, body string) error {
		idx++
		seq++
		fx := &effects{}
		s.apply(idx, batchOf(7, enqueueCmd(seq, body)), nil, fx)
		return fx.results[0].err
	}
	get := func(s *machine) {
		idx++
		seq++
		s.apply(idx, batchOf(7, func(e *encoder) { e.u8(opGet); e.u64(seq); e.u8(1) }), nil, &effects{})
	}
	var got []bool
	for i := range 8 {
		got = append(got, publish(s, fmt.Sprint(i)) == nil)
	}
	if want := []bool{true, true, true, true, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("accepted %v, want %v", got, want)
	}
	get(s) // 5 ready: over 4 (80% of 5), still refusing
	b, _, _ := s.encode()
	r, err := decodeMachine(b)
	if err != nil {
		t.Fatal(err)
	}
	if !r.rejecting || publish(s, "x") == nil || publish(r, "x") == nil {
		t.Fatal("with 5 ready a publish is taken (or a snapshot lost the refusing)")
	}
	get(s) // 4
	if publish(s, "y") != nil {
		t.Fatal("at 80% of the limit a publish is refused")
	}
	checkInvariants(t, s)

	// A config of before refuses at the limit.
	old := configFor(limits, true)
	old.Overflow = queue.RejectPublish
	s = newMachine(old)
	got = got[:0]
	for i := range 7 {
		got = append(got, publish(s, fmt.Sprint(i)) == nil)
	}
	if want := []bool{true, true, true, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("old rules: accepted %v, want %v", got, want)
	}
}

// drop-head under fifoRules: a requeue that takes the queue over its
// limit drops the head, and so does a lower limit at once, the dropped
// dead-lettered newest first; a config of before drops only when a
// message is enqueued. reject-publish-dlx is drop-head.
func TestMachineDropHeadAfterEveryCommand(t *testing.T) {
	for _, rules := range []bool{true, false} {
		c := configFor(queue.Limits{MaxLength: 1, MaxLengthBytes: -1, Overflow: queue.RejectPublishDLX}, true)
		if c.overflow() != queue.DropHead || !c.rules() {
			t.Fatalf("reject-publish-dlx: overflow %d", c.Overflow)
		}
		if !rules {
			c.Overflow = queue.DropHead
		}
		s := newMachine(c)
		fx := &effects{}
		s.apply(1, batchOf(7, enqueueCmd(1, "1"), func(e *encoder) { e.u8(opGet); e.u64(2); e.u8(0) }, enqueueCmd(3, "2")), nil, fx)
		held := fx.results[1].m.id
		fx = &effects{}
		s.apply(2, batchOf(7, idsCmd(opReturnLast, 4, held)), nil, fx)
		want := "[1]"
		if !rules {
			want = "[2 1]"
		}
		if got := fmt.Sprint(readyBodies(s)); got != want {
			t.Fatalf("rules %v: after the requeue %s, want %s", rules, got, want)
		}
		if rules && (len(fx.dead) != 1 || fx.dead[0].reason != queue.MaxLen || string(fx.dead[0].m.body.Body) != "2") {
			t.Fatalf("dead letters %+v, want 2 (maxlen)", fx.dead)
		}
		checkInvariants(t, s)
	}
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	s.apply(1, batchOf(7, enqueueCmd(1, "1"), enqueueCmd(2, "2"), enqueueCmd(3, "3")), nil, &effects{})
	fx := &effects{}
	s.apply(2, batchOf(7, configCmd(4, configFor(queue.Limits{MaxLength: 1, MaxLengthBytes: -1}, true))), nil, fx)
	var dead []string
	for _, x := range fx.dead {
		dead = append(dead, string(x.m.body.Body))
	}
	if got := fmt.Sprint(readyBodies(s)); got != "[3]" || fmt.Sprint(dead) != "[2 1]" {
		t.Fatalf("after a lower limit %s (dead %v), want [3] (dead [2 1], newest first)", got, dead)
	}
}

// basic.consume's exclusive flag under fifoRules is ignored, as
// rabbit_fifo does; a config of before refuses.
func TestMachineExclusiveIgnored(t *testing.T) {
	excl := func(seq, key uint64) func(e *encoder) {
		return func(e *encoder) {
			e.u8(opAttach)
			e.u64(seq)
			e.u64(key)
			e.str("n")
			e.u32(0)
			e.u32(0)
			e.u8(1)
		}
	}
	for _, rules := range []bool{true, false} {
		c := configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true)
		if !rules {
			c.Overflow = queue.DropHead
		}
		s := newMachine(c)
		fx := &effects{}
		s.apply(1, batchOf(7, excl(1, 11), attachCmd(2, 12, 0), excl(3, 13)), nil, fx)
		var errs []error
		for _, r := range fx.results {
			errs = append(errs, r.err)
		}
		want := "[<nil> <nil> <nil>]"
		if !rules {
			want = fmt.Sprint([]error{nil, queue.ErrExclusiveConsumer, queue.ErrExclusiveConsumer})
		}
		if fmt.Sprint(errs) != want {
			t.Fatalf("rules %v: attaches %v, want %s", rules, errs, want)
		}
	}
}
