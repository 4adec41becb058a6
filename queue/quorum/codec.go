package quorum

import (
	"encoding/binary"
	"errors"
)

// A Raft log entry of a quorum queue is one batch of commands from one
// proposer (a queue on some node): a header with the leader's clock and
// the proposer's id, then the commands, each with the proposer's sequence
// number. Everything apply needs is in the entry: apply reads no clock.
//
//	batch   = version(1) now-ms(8) proposer(8) count(4) command*
//	command = op(1) seq(8) fields
const batchVersion = 1

// headerLen is the batch header's size.
const headerLen = 1 + 8 + 8 + 4

// Command ops.
const (
	opEnqueue   = 1 // exchange, routing key, props, body
	opAttach    = 2 // consumer key, node, prefetch, priority, exclusive
	opDetach    = 3 // consumer key
	opSettle    = 4 // ids: acknowledged
	opReturn    = 5 // ids: requeued (x-delivery-count raised)
	opDiscard   = 6 // ids: rejected without requeue (dead-lettered)
	opUnassign  = 7 // consumer key, ids: checked out but never handed over; the consumer is blocked
	opUnblock   = 8 // consumer key
	opGet       = 9 // no-ack flag
	opPurge     = 10
	opTick      = 11 // expiry by the header's clock
	opConfig    = 12 // the queue's limits
	opResetNode = 13 // node: its consumers are gone (a restart)
	// opResetNode2: node, proposer id: the node's consumers but those
	// that proposer attached are gone (a restart, or a node found down:
	// sent again or late, it never detaches the consumers of the
	// proposer that is the node's queue now).
	opResetNode2 = 14
	// opGet2: no-ack flag, node: a basic.get whose checkout belongs to
	// the getting node (getOwnerOf), returned when that node resets or is
	// found down.
	opGet2 = 15
	// opReturnGets: node: what basic.get checked out on that node goes
	// back (the leader found it down).
	opReturnGets = 16
	// opReturnLast: ids: requeued by the client (basic.nack, basic.reject):
	// to the back of the queue, x-delivery-count raised, as RabbitMQ
	// 3.10's quorum queues do (opReturn, a closed channel's, keeps their
	// place ahead).
	opReturnLast = 17
	// opCancel: consumer key: basic.cancel. The consumer takes nothing
	// more but keeps what it has checked out until that is settled (an
	// ack after the cancel counts), as RabbitMQ 3.10's quorum queues do;
	// it goes once it holds nothing. (opDetach, a consumer that is gone,
	// gives back what it held.)
	opCancel = 18
	// opLeave: consumer key, ids: the consumer's node left the group
	// (delete_member) and serves the queue through another member now.
	// The consumer takes nothing more; it keeps the ids listed, those
	// its replica handed to its channel (settled through another member
	// since), as a cancelled one does, and gives back the rest as a
	// detach does (counted: newer messages may have gone out meanwhile,
	// and a client sees a message out of order only if redelivered).
	// Its node found down or restarted detaches it as any other
	// (FeatureKeepOnLeave).
	opLeave = 19
)

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

var errShort = errors.New("quorum: command too short")

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)  { e.u64(uint64(v)) }
func (e *encoder) bytes(v []byte) {
	e.grow(4 + len(v))
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
}

// grow makes room for n more bytes, doubling: append grows a large
// buffer by a quarter at a time, and an inbox of message bodies (the
// proposer's batch) was copied about four times over on its way to its
// final size.
func (e *encoder) grow(n int) {
	if cap(e.b)-len(e.b) >= n {
		return
	}
	nb := make([]byte, len(e.b), 2*cap(e.b)+n)
	copy(nb, e.b)
	e.b = nb
}
func (e *encoder) str(v string) {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) ids(v []uint64) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.u64(x)
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < n {
		d.err = errShort
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) i64() int64 { return int64(d.u64()) }

// bytes returns a slice of the entry itself (not copied).
func (d *decoder) bytes() []byte {
	n := int(d.u32())
	if !d.need(n) {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) ids() []uint64 {
	n := int(d.u32())
	if !d.need(8 * n) {
		return nil
	}
	v := make([]uint64, n)
	for i := range v {
		v[i] = d.u64()
	}
	return v
}
