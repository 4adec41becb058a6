package quorum

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/warrenmq/warren/queue"
)

// sampleFields writes a command's fields for op as its proposer does
// (ops.go, queue.go, cluster.go); false: op has no entry here.
func sampleFields(op uint8, e *encoder) bool {
	switch op {
	case opEnqueue:
		e.str("ex")
		e.str("rk")
		e.bytes([]byte{0, 0})
		e.bytes([]byte("body"))
	case opAttach:
		e.u64(7)
		e.str("n1")
		e.u32(10)
		e.u32(0)
		e.u8(0)
	case opDetach, opUnblock, opCancel:
		e.u64(7)
	case opSettle, opReturn, opDiscard, opReturnLast:
		e.ids([]uint64{1, 2})
	case opUnassign, opLeave:
		e.u64(7)
		e.ids([]uint64{3})
	case opGet:
		e.u8(1)
	case opGet2:
		e.u8(0)
		e.str("n1")
	case opPurge, opTick:
	case opConfig:
		e.i64(-1)
		e.i64(10)
		e.i64(-1)
		e.u8(0x80)
		e.i64(-1)
		e.u8(0)
	case opResetNode, opReturnGets:
		e.str("n1")
	case opResetNode2:
		e.str("n1")
		e.u64(9)
	default:
		return false
	}
	return true
}

// sampleBatch encodes one batch of proposer 5 with a command per op, the
// sequence numbers from 100.
func sampleBatch(ops ...uint8) []byte {
	e := &encoder{}
	e.u8(batchVersion)
	e.i64(1234)
	e.u64(5)
	e.u32(uint32(len(ops)))
	for i, op := range ops {
		e.u8(op)
		e.u64(100 + uint64(i))
		sampleFields(op, e)
	}
	return e.b
}

// Every command op is walked whole (commandSpans: entryread's reads of a
// message's body, and resendable): a batch of each op ends where its
// last command does. opLeave was once skipped as if it had no fields.
func TestCommandSpansEveryOp(t *testing.T) {
	var all []uint8
	for op := uint8(1); op <= opLeave; op++ {
		if !sampleFields(op, &encoder{}) {
			t.Fatalf("op %d has no sample fields here: add it (and to skip)", op)
		}
		all = append(all, op)
	}
	for _, op := range all {
		data := sampleBatch(opEnqueue, op, opEnqueue)
		offs, err := commandSpans(data)
		if err != nil || len(offs) != 4 || offs[3] != len(data) {
			t.Fatalf("op %d: spans %v, %v; the batch is %d bytes", op, offs, err, len(data))
		}
		if m, err := enqueueAt(data[offs[2]:]); err != nil || string(m.Body) != "body" {
			t.Fatalf("op %d: the enqueue after it: %v %v", op, m, err)
		}
	}
	data := sampleBatch(all...)
	if offs, err := commandSpans(data); err != nil || offs[len(offs)-1] != len(data) {
		t.Fatalf("every op in one batch: %v %v", offs, err)
	}
}

// What of a failed batch is sent again: the settlements and the other
// commands that change what is checked out to whom, in place; enqueues,
// gets, attaches, purges and ticks become ticks of the same sequence
// numbers (the batch keeps its name). Nothing but those: nothing to send.
func TestResendable(t *testing.T) {
	data := sampleBatch(opEnqueue, opSettle, opAttach, opCancel, opGet2, opLeave, opReturn, opPurge, opUnassign, opDetach)
	out := resendable(data)
	if out == nil {
		t.Fatal("nothing kept")
	}
	if !bytes.Equal(out[:headerLen], data[:headerLen]) {
		t.Fatal("the header changed")
	}
	offs, err := commandSpans(out)
	if err != nil || offs[len(offs)-1] != len(out) {
		t.Fatalf("spans %v %v", offs, err)
	}
	var ops []uint8
	for i := 0; i+1 < len(offs); i++ {
		c := out[offs[i]:offs[i+1]]
		ops = append(ops, c[0])
		if seq := binary.BigEndian.Uint64(c[1:9]); seq != 100+uint64(i) {
			t.Fatalf("command %d: seq %d", i, seq)
		}
	}
	want := []uint8{opTick, opSettle, opTick, opCancel, opTick, opLeave, opReturn, opTick, opUnassign, opDetach}
	if !slices.Equal(ops, want) {
		t.Fatalf("ops %v, want %v", ops, want)
	}
	// Each kept command is as it was.
	in, _ := commandSpans(data)
	for i, op := range ops {
		if op != opTick && !bytes.Equal(out[offs[i]:offs[i+1]], data[in[i]:in[i+1]]) {
			t.Fatalf("command %d changed", i)
		}
	}
	if resendable(sampleBatch(opEnqueue, opEnqueue, opGet, opTick)) != nil {
		t.Fatal("a batch of publishes and a get is sent again")
	}
	// A machine applies the resent batch as the original's settlements.
	s := newMachine(configFor(queue.Limits{MaxLength: -1, MaxLengthBytes: -1}, true))
	var fx effects
	s.apply(1, sampleBatch(opEnqueue, opEnqueue), nil, &fx)
	s.apply(2, sampleBatchOf(6, opGet2), nil, &fx)
	if len(s.out) != 1 {
		t.Fatalf("%d checked out", len(s.out))
	}
	s.apply(3, resendable(sampleBatchOf(7, opEnqueue, opSettle)), nil, &fx)
	if len(s.out) != 0 || s.readyN != 1 {
		t.Fatalf("after the resent settle: %d out, %d ready", len(s.out), s.readyN)
	}
	// One whose original was applied after all is not applied again: a
	// return of a message checked out again at once (to consumer 7) is
	// not repeated.
	s.apply(4, sampleBatchOf(9, opAttach), nil, &fx) // consumer 7, prefetch 10: takes the ready one
	var id uint64
	for k := range s.out {
		id = k
	}
	e := &encoder{}
	e.u8(batchVersion)
	e.i64(1234)
	e.u64(8)
	e.u32(1)
	e.u8(opReturn)
	e.u64(100)
	e.ids([]uint64{id})
	orig := e.b
	s.apply(5, orig, nil, &fx)
	s.apply(6, resendable(orig), nil, &fx)
	if m := s.out[id]; m == nil || m.count != 1 {
		t.Fatalf("after a return and its resent batch: %+v, want checked out again, returned once", m)
	}
}

// sampleBatchOf is sampleBatch for proposer pid.
func sampleBatchOf(pid uint64, ops ...uint8) []byte {
	b := sampleBatch(ops...)
	binary.BigEndian.PutUint64(b[9:17], pid)
	return b
}
