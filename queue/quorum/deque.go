package quorum

import "github.com/warrenmq/warren/queue"

// deque is a FIFO of messages with a front insert: the machine's ready
// and returned messages. A backlog of millions lives here, so it holds
// them as slots without pointers, in fixed chunks: the garbage collector
// neither scans them nor follows a pointer per message, and memory goes
// back chunk by chunk as the head advances. The few pointers a message
// may have (its cached body, a body file reference) wait in maps beside
// the slots, keyed by id, bounded by the body cache's budget (bodies) or
// present only on a replica that restored a snapshot (refs).
//
// A *msg goes in by value and comes out as a new *msg: the deque keeps no
// pointer a caller holds.
type deque struct {
	chunks []*chunk
	head   int // chunks[0][head] is the front
	tail   int // chunks[len-1][tail-1] is the back
	n      int
	bodies map[uint64]*queue.Message
	refs   map[uint64]*bodyRef
}

const chunkLen = 1024

// slot is a message in a deque: msg without its pointers.
type slot struct {
	id, idx uint64
	expires int64
	owner   uint64
	pos     uint32
	size    uint32
	count   uint32
}

type chunk [chunkLen]slot

func (q *deque) len() int { return q.n }

func (q *deque) pushBack(m *msg) {
	if len(q.chunks) == 0 || q.tail == chunkLen {
		q.chunks = append(q.chunks, new(chunk))
		if len(q.chunks) == 1 {
			q.head = 0
		}
		q.tail = 0
	}
	q.chunks[len(q.chunks)-1][q.tail] = q.slotOf(m)
	q.tail++
	q.n++
}

func (q *deque) pushFront(m *msg) {
	if q.n == 0 {
		q.pushBack(m)
		return
	}
	if q.head == 0 {
		q.chunks = append(q.chunks, nil)
		copy(q.chunks[1:], q.chunks)
		q.chunks[0] = new(chunk)
		q.head = chunkLen
	}
	q.head--
	q.chunks[0][q.head] = q.slotOf(m)
	q.n++
}

// front is a copy of the front message (nil: none).
func (q *deque) front() *msg {
	if q.n == 0 {
		return nil
	}
	m := q.msgOf(q.chunks[0][q.head], false)
	return &m
}

// frontExpires is the front message's expiry, and whether there is one.
func (q *deque) frontExpires() (int64, bool) {
	if q.n == 0 {
		return 0, false
	}
	return q.chunks[0][q.head].expires, true
}

func (q *deque) popFront() *msg {
	if q.n == 0 {
		return nil
	}
	m := q.msgOf(q.chunks[0][q.head], true)
	q.head++
	q.n--
	switch {
	case q.n == 0:
		// Keep one chunk for the next push.
		q.chunks[0] = q.chunks[len(q.chunks)-1]
		clear(q.chunks[1:])
		q.chunks = q.chunks[:1]
		q.head, q.tail = 0, 0
	case q.head == chunkLen:
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.head = 0
	}
	return &m
}

// each calls f with each message, front to back; f may not keep the
// pointer, which is reused.
func (q *deque) each(f func(*msg)) {
	var m msg
	pos := q.head
	for i, c := 0, 0; i < q.n; i++ {
		if pos == chunkLen {
			c, pos = c+1, 0
		}
		m = q.msgOf(q.chunks[c][pos], false)
		f(&m)
		pos++
	}
}

func (q *deque) slotOf(m *msg) slot {
	if m.body != nil {
		if q.bodies == nil {
			q.bodies = map[uint64]*queue.Message{}
		}
		q.bodies[m.id] = m.body
	}
	if m.ref != nil {
		if q.refs == nil {
			q.refs = map[uint64]*bodyRef{}
		}
		q.refs[m.id] = m.ref
	}
	return slot{id: m.id, idx: m.idx, expires: m.expires, owner: m.owner, pos: m.pos, size: m.size, count: m.count}
}

// msgOf is s as a msg with its pointers; take: they leave the deque.
func (q *deque) msgOf(s slot, take bool) msg {
	m := msg{id: s.id, idx: s.idx, expires: s.expires, owner: s.owner, pos: s.pos, size: s.size, count: s.count}
	if len(q.bodies) > 0 {
		if b, ok := q.bodies[s.id]; ok {
			m.body = b
			if take {
				delete(q.bodies, s.id)
			}
		}
	}
	if len(q.refs) > 0 {
		if r, ok := q.refs[s.id]; ok {
			m.ref = r
			if take {
				delete(q.refs, s.id)
			}
		}
	}
	return m
}
