package quorum

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// A snapshot is the machine's state: the messages' places in the log,
// their counters and owners, the consumers, the proposers' last batches.
// A message whose entry is in this replica's log is a reference to it
// (the entries live messages are in are kept from compaction: floor); a
// message that is not (it came with an installed snapshot) carries its
// body inline. A snapshot sent to another replica (raft's
// InstallSnapshot) is expanded first: every reference becomes its body,
// read from the log (expand), since the receiver's log has none of the
// entries below the snapshot.
//
// Version 1 (no proposer of a consumer, no batches, no inline bodies) is
// still read.
const (
	snapshotV1      = 1
	snapshotVersion = 2
)

// Message flags in a version 2 snapshot.
const (
	flagInline = 1 // exchange, routing key, props and body follow
)

// encode writes the state; floor is the lowest log index a message of it
// lives in (0: none).
func (s *machine) encode() (b []byte, floor uint64) {
	e := &encoder{}
	e.u8(snapshotVersion)
	e.i64(s.cfg.TTL)
	e.i64(s.cfg.MaxLen)
	e.i64(s.cfg.MaxBytes)
	e.u8(uint8(s.cfg.Overflow))
	e.i64(s.cfg.DeliveryLimit)
	e.u8(b2u(s.cfg.SAC))
	e.u64(s.nextID)
	e.u64(s.service)
	e.i64(s.now)
	e.u32(uint32(len(s.consumers)))
	for _, c := range s.consumers {
		e.u64(c.key)
		e.str(c.node)
		e.u64(c.pid)
		e.u32(c.prefetch)
		e.u32(uint32(c.priority))
		e.u8(b2u(c.exclusive))
		e.u8(b2u(c.blocked) | b2u(c.cancelled)<<1) // bit 1: cancelled (a version 2 snapshot of before has 0 there)
		e.u64(c.served)
	}
	keys := make([]uint64, 0, len(s.enqueuers))
	for k := range s.enqueuers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.u32(uint32(len(keys)))
	for _, k := range keys {
		q := s.enqueuers[k]
		e.u64(k)
		e.u64(q.seq)
		e.u64(q.last)
		e.ids(q.batches)
	}
	put := func(m *msg) {
		e.u64(m.id)
		e.u64(m.idx)
		e.u32(m.pos)
		e.u32(m.size)
		e.i64(m.expires)
		e.u32(m.count)
		e.u64(m.owner)
		if m.own {
			e.u8(flagInline)
			putBody(e, m.body)
			return
		}
		e.u8(0)
		if floor == 0 || m.idx < floor {
			floor = m.idx
		}
	}
	e.u32(uint32(s.returns.len()))
	s.returns.each(put)
	e.u32(uint32(s.ready.len()))
	s.ready.each(put)
	out := make([]*msg, 0, len(s.out))
	for _, m := range s.out {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *msg) int { return cmpU(a.id, b.id) })
	e.u32(uint32(len(out)))
	for _, m := range out {
		put(m)
	}
	return e.b, floor
}

func putBody(e *encoder, m *queue.Message) {
	e.str(m.Exchange)
	e.str(m.RoutingKey)
	e.bytes(m.Props)
	e.bytes(m.Body)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

var errSnapshot = errors.New("quorum: snapshot does not decode")

// decodeMachine reads a snapshot back. Inline bodies are kept (own);
// referenced ones are read from the log when needed.
func decodeMachine(b []byte) (*machine, error) {
	d := &decoder{b: b}
	v := d.u8()
	if v != snapshotV1 && v != snapshotVersion {
		return nil, errSnapshot
	}
	var c config
	c.TTL, c.MaxLen, c.MaxBytes = d.i64(), d.i64(), d.i64()
	c.Overflow = queue.Overflow(d.u8())
	c.DeliveryLimit = d.i64()
	c.SAC = d.u8() == 1
	s := newMachine(c)
	s.nextID, s.service, s.now = d.u64(), d.u64(), d.i64()
	for range d.u32() {
		if d.err != nil {
			break
		}
		k := &consumer{key: d.u64(), node: d.str()}
		if v >= snapshotVersion {
			k.pid = d.u64()
		}
		k.prefetch, k.priority, k.exclusive = d.u32(), int32(d.u32()), d.u8() == 1
		flags := d.u8()
		k.blocked, k.cancelled, k.served = flags&1 != 0, flags&2 != 0, d.u64()
		s.consumers = append(s.consumers, k)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		k := d.u64()
		e := &enqueuer{seq: d.u64(), last: d.u64()}
		if v >= snapshotVersion {
			e.batches = d.ids()
		}
		s.enqueuers[k] = e
	}
	get := func() *msg {
		m := &msg{id: d.u64(), idx: d.u64(), pos: d.u32(), size: d.u32(), expires: d.i64(), count: d.u32(), owner: d.u64()}
		if v >= snapshotVersion && d.u8()&flagInline != 0 {
			ex, rk, props, body := d.str(), d.str(), d.bytes(), d.bytes()
			buf := make([]byte, len(props)+len(body))
			copy(buf, props)
			copy(buf[len(props):], body)
			m.body = queue.NewStored(ex, rk, buf[:len(props):len(props)], buf[len(props):], 0)
			m.body.Persistent = amqp.PropDeliveryMode(props) == 2
			m.own = true
		}
		return m
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.returns.pushBack(m)
		s.readyN++
		s.readyB += int64(m.size)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.ready.pushBack(m)
		s.readyN++
		s.readyB += int64(m.size)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.out[m.id] = m
		if k := s.consumer(m.owner); k != nil {
			k.out++
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errSnapshot
	}
	return s, nil
}

// bodyReader reads the message at (idx, pos) from the log.
type bodyReader func(idx uint64, pos uint32) (*queue.Message, error)

// expand rewrites a snapshot so that every message carries its body
// inline, read by read: what another replica needs to be sent.
func expand(b []byte, read bodyReader) ([]byte, error) {
	d := &decoder{b: b}
	v := d.u8()
	if v != snapshotV1 && v != snapshotVersion {
		return nil, errSnapshot
	}
	e := &encoder{b: make([]byte, 0, len(b)*2)}
	e.u8(snapshotVersion)
	e.i64(d.i64())
	e.i64(d.i64())
	e.i64(d.i64())
	e.u8(d.u8())
	e.i64(d.i64())
	e.u8(d.u8())
	e.u64(d.u64())
	e.u64(d.u64())
	e.i64(d.i64())
	n := d.u32()
	e.u32(n)
	for range n {
		if d.err != nil {
			break
		}
		e.u64(d.u64())
		e.str(d.str())
		if v >= snapshotVersion {
			e.u64(d.u64())
		} else {
			e.u64(0)
		}
		e.u32(d.u32())
		e.u32(d.u32())
		e.u8(d.u8())
		e.u8(d.u8())
		e.u64(d.u64())
	}
	n = d.u32()
	e.u32(n)
	for range n {
		if d.err != nil {
			break
		}
		e.u64(d.u64())
		e.u64(d.u64())
		e.u64(d.u64())
		if v >= snapshotVersion {
			e.ids(d.ids())
		} else {
			e.ids(nil)
		}
	}
	for range 3 { // returns, ready, checked out
		n = d.u32()
		e.u32(n)
		for range n {
			if d.err != nil {
				break
			}
			id, idx, pos := d.u64(), d.u64(), d.u32()
			e.u64(id)
			e.u64(idx)
			e.u32(pos)
			e.u32(d.u32())
			e.i64(d.i64())
			e.u32(d.u32())
			e.u64(d.u64())
			e.u8(flagInline)
			if v >= snapshotVersion && d.u8()&flagInline != 0 {
				e.str(d.str())
				e.str(d.str())
				e.bytes(d.bytes())
				e.bytes(d.bytes())
				continue
			}
			if d.err != nil {
				break
			}
			m, err := read(idx, pos)
			if err != nil {
				return nil, err
			}
			putBody(e, m)
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errSnapshot
	}
	return e.b, nil
}

// Snapshot implements raft.FSM: the state is encoded now (on the FSM
// goroutine), and the log below the lowest entry a message still lives
// in is kept from compaction.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	q := (*Queue)(f)
	q.mu.Lock()
	b, floor := q.m.encode()
	q.mu.Unlock()
	if floor == 0 {
		floor = math.MaxUint64
	}
	q.logs.setFloor(floor)
	return snapshot(b), nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	q := (*Queue)(f)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	m, err := decodeMachine(b)
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.m = m
	q.mu.Unlock()
	return nil
}

// sendingSnapshots is a group's snapshot store. A snapshot raft opens
// once the group runs is one it sends to another replica
// (InstallSnapshot), which has none of the log entries the snapshot's
// messages are in: it is expanded, every message with its body. At the
// start (raft's own restore) it is read as stored.
type sendingSnapshots struct {
	raft.SnapshotStore
	q       *Queue
	started atomic.Bool
}

// Open implements raft.SnapshotStore.
func (s *sendingSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil || !s.started.Load() {
		return meta, rc, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, nil, err
	}
	x, err := expand(b, s.q.readBody)
	if err != nil {
		return nil, nil, fmt.Errorf("quorum: group %d: snapshot %s for a replica: %w", s.q.gid, id, err)
	}
	m := *meta
	m.Size = int64(len(x))
	return &m, io.NopCloser(bytes.NewReader(x)), nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}
