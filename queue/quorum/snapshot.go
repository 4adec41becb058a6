package quorum

import (
	"errors"
	"slices"

	"github.com/warrenmq/warren/queue"
)

// A snapshot is the machine's state without bodies: the messages' places
// in the log, their counters and owners, the consumers, the enqueuers'
// sequence numbers. The log entries the messages live in are kept
// (floor: the lowest index a live message needs), so a restore reads the
// bodies from the log.
const snapshotVersion = 1

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
		e.u32(c.prefetch)
		e.u32(uint32(c.priority))
		e.u8(b2u(c.exclusive))
		e.u8(b2u(c.blocked))
		e.u64(c.served)
	}
	keys := make([]uint64, 0, len(s.enqueuers))
	for k := range s.enqueuers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.u32(uint32(len(keys)))
	for _, k := range keys {
		e.u64(k)
		e.u64(s.enqueuers[k].seq)
		e.u64(s.enqueuers[k].last)
	}
	put := func(m *msg) {
		e.u64(m.id)
		e.u64(m.idx)
		e.u32(m.pos)
		e.u32(m.size)
		e.i64(m.expires)
		e.u32(m.count)
		e.u64(m.owner)
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

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

var errSnapshot = errors.New("quorum: snapshot does not decode")

// decodeMachine reads a snapshot back; bodies are not cached.
func decodeMachine(b []byte) (*machine, error) {
	d := &decoder{b: b}
	if d.u8() != snapshotVersion {
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
		k := &consumer{key: d.u64(), node: d.str(), prefetch: d.u32(), priority: int32(d.u32()), exclusive: d.u8() == 1, blocked: d.u8() == 1, served: d.u64()}
		s.consumers = append(s.consumers, k)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		k := d.u64()
		s.enqueuers[k] = &enqueuer{seq: d.u64(), last: d.u64()}
	}
	get := func() *msg {
		return &msg{id: d.u64(), idx: d.u64(), pos: d.u32(), size: d.u32(), expires: d.i64(), count: d.u32(), owner: d.u64()}
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
