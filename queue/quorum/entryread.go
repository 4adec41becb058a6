package quorum

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/queue"
)

// entryReader reads messages back from their log entries, keeping the
// entry read last and where each of its commands starts. One entry is a
// proposer's batch: under load it holds hundreds or thousands of
// enqueues, which a draining backlog reads one after the other; read
// whole for each of them (a pread, a CRC check and a walk to the
// command), a 1 KB message cost as much as its whole entry and a backlog
// drained at a few thousand messages a second.
//
// It keeps at most one entry, and lets it go once its last command was
// read (a backlog is read in order) or when its owner resets it.
type entryReader struct {
	idx   uint64
	data  []byte
	offs  []int // where each command starts in data
	loads int   // entries read from the log, for the tests
}

// message reads the message of the command at pos of entry idx of q's
// log.
func (r *entryReader) message(q *Queue, idx uint64, pos uint32) (*queue.Message, error) {
	if r.data == nil || r.idx != idx {
		r.reset()
		r.loads++
		var l raft.Log
		if err := q.logs.GetLog(idx, &l); err != nil {
			return nil, fmt.Errorf("group %d entry %d: %w", q.gid, idx, err)
		}
		offs, err := commandOffsets(l.Data)
		if err != nil {
			return nil, fmt.Errorf("group %d entry %d: %w", q.gid, idx, err)
		}
		r.idx, r.data, r.offs = idx, l.Data, offs
	}
	if int(pos) >= len(r.offs) {
		return nil, fmt.Errorf("group %d entry %d has no message at %d", q.gid, idx, pos)
	}
	m, err := enqueueAt(r.data[r.offs[pos]:])
	if err != nil {
		return nil, fmt.Errorf("group %d entry %d at %d: %w", q.gid, idx, pos, err)
	}
	if int(pos) == len(r.offs)-1 {
		r.reset()
	}
	return m, nil
}

// reset lets the entry go.
func (r *entryReader) reset() { r.idx, r.data, r.offs = 0, nil, nil }

// commandOffsets is where each command of a batch entry starts.
func commandOffsets(data []byte) ([]int, error) {
	offs, err := commandSpans(data)
	if err != nil {
		return nil, err
	}
	return offs[:len(offs)-1], nil
}

// commandSpans is where each command of a batch entry starts, then
// where the last one ends.
func commandSpans(data []byte) ([]int, error) {
	d := &decoder{b: data}
	d.u8()
	d.i64()
	d.u64()
	n := d.u32()
	if d.err != nil || uint64(n) > uint64(len(d.b)) {
		return nil, errShort
	}
	offs := make([]int, 0, n+1)
	for p := uint32(0); p < n && d.err == nil; p++ {
		offs = append(offs, len(data)-len(d.b))
		op := d.u8()
		d.u64()
		if op == opEnqueue {
			d.str()
			d.str()
			d.bytes()
			d.bytes()
			continue
		}
		skip(op, d)
	}
	if d.err != nil {
		return nil, d.err
	}
	return append(offs, len(data)-len(d.b)), nil
}

// enqueueAt decodes the message of the enqueue command at the start of
// b, into a buffer of its own (the entry's is not kept for one message).
func enqueueAt(b []byte) (*queue.Message, error) {
	d := &decoder{b: b}
	op := d.u8()
	d.u64()
	if d.err == nil && op != opEnqueue {
		return nil, fmt.Errorf("command %d is not an enqueue", op)
	}
	ex, rk, props, body := d.str(), d.str(), d.bytes(), d.bytes()
	if d.err != nil {
		return nil, d.err
	}
	buf := make([]byte, len(props)+len(body))
	copy(buf, props)
	copy(buf[len(props):], body)
	return queue.NewStored(ex, rk, buf[:len(props):len(props)], buf[len(props):], 0), nil
}
