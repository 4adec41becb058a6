package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// The encoding of hashicorp/raft's RPCs on the raft channels (raftmux.go):
// every field of each struct, in declaration order, integers as uvarints,
// byte strings length-prefixed, a time as a flag and its Unix nanoseconds.
// It replaces NetworkTransport's msgpack (reflection, an allocation per
// field); TestRaftCodecFields fails when raft adds a field this does not
// carry.

// RPC kinds on the raft channel.
const (
	kindAppend     = 1
	kindVote       = 2
	kindPreVote    = 3
	kindTimeoutNow = 4
	kindSnapshot   = 5 // on a raftsnap connection only
)

type rbuf []byte

func (b *rbuf) u64(v uint64) { *b = binary.AppendUvarint(*b, v) }

func (b *rbuf) bool(v bool) {
	if v {
		*b = append(*b, 1)
	} else {
		*b = append(*b, 0)
	}
}

func (b *rbuf) bytes(p []byte) {
	b.u64(uint64(len(p)))
	*b = append(*b, p...)
}

func (b *rbuf) time(t time.Time) {
	if t.IsZero() {
		*b = append(*b, 0)
		return
	}
	*b = append(*b, 1)
	*b = binary.AppendVarint(*b, t.UnixNano())
}

func (b *rbuf) header(h raft.RPCHeader) {
	b.u64(uint64(h.ProtocolVersion))
	b.bytes(h.ID)
	b.bytes(h.Addr)
}

// rdec reads what rbuf wrote; the first error sticks.
type rdec struct {
	b   []byte
	err error
}

var errShortRPC = errors.New("cluster: truncated Raft RPC")

func (d *rdec) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortRPC
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rdec) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.err = errShortRPC
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// bytes returns a slice of the frame (nil when empty): the decoded
// request keeps the frame alive, one allocation for all its entries.
func (d *rdec) bytes() []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShortRPC
		return nil
	}
	if n == 0 {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *rdec) time() time.Time {
	if !d.bool() {
		return time.Time{}
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShortRPC
		return time.Time{}
	}
	d.b = d.b[n:]
	return time.Unix(0, v)
}

func (d *rdec) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(d.u64()), ID: d.bytes(), Addr: d.bytes()}
}

// done is the decoder's error, or one for bytes left over.
func (d *rdec) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("cluster: %d bytes after a Raft RPC", len(d.b))
	}
	return d.err
}

// requestSize is about what encodeRequest writes for cmd (a little
// more), so that an AppendEntries is encoded into one allocation rather
// than grown by doubling through its entries.
func requestSize(cmd any) int {
	n := 9 * binary.MaxVarintLen64 // the fixed fields and the lengths, at their longest
	if r, ok := cmd.(*raft.AppendEntriesRequest); ok {
		n += len(r.RPCHeader.ID) + len(r.RPCHeader.Addr) + len(r.Leader)
		for _, l := range r.Entries {
			n += 3*binary.MaxVarintLen64 + 2*binary.MaxVarintLen32 + len(l.Data) + len(l.Extensions) + 1 + binary.MaxVarintLen64
		}
	}
	return n
}

func encodeRequest(b rbuf, cmd any) (rbuf, byte, error) {
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.bytes(r.Leader)
		b.u64(r.PrevLogEntry)
		b.u64(r.PrevLogTerm)
		b.u64(uint64(len(r.Entries)))
		for _, l := range r.Entries {
			b.u64(l.Index)
			b.u64(l.Term)
			b.u64(uint64(l.Type))
			b.bytes(l.Data)
			b.bytes(l.Extensions)
			b.time(l.AppendedAt)
		}
		b.u64(r.LeaderCommitIndex)
		return b, kindAppend, nil
	case *raft.RequestVoteRequest:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.bytes(r.Candidate)
		b.u64(r.LastLogIndex)
		b.u64(r.LastLogTerm)
		b.bool(r.LeadershipTransfer)
		return b, kindVote, nil
	case *raft.RequestPreVoteRequest:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.u64(r.LastLogIndex)
		b.u64(r.LastLogTerm)
		return b, kindPreVote, nil
	case *raft.TimeoutNowRequest:
		b.header(r.RPCHeader)
		return b, kindTimeoutNow, nil
	case *raft.InstallSnapshotRequest:
		b.header(r.RPCHeader)
		b.u64(uint64(r.SnapshotVersion))
		b.u64(r.Term)
		b.bytes(r.Leader)
		b.u64(r.LastLogIndex)
		b.u64(r.LastLogTerm)
		b.bytes(r.Peers)
		b.bytes(r.Configuration)
		b.u64(r.ConfigurationIndex)
		b.u64(uint64(r.Size))
		return b, kindSnapshot, nil
	}
	return b, 0, fmt.Errorf("cluster: no encoding for Raft request %T", cmd)
}

// decodeRequest decodes a request of kind. An AppendEntries' entry count
// is checked against the frame (an entry takes at least 6 bytes) before
// anything is allocated for them.
func decodeRequest(kind byte, p []byte) (any, error) {
	d := &rdec{b: p}
	var cmd any
	switch kind {
	case kindAppend:
		r := &raft.AppendEntriesRequest{RPCHeader: d.header(), Term: d.u64(), Leader: d.bytes(),
			PrevLogEntry: d.u64(), PrevLogTerm: d.u64()}
		n := d.u64()
		if n > uint64(len(d.b))/6 {
			return nil, errShortRPC
		}
		if n > 0 {
			logs := make([]raft.Log, n)
			r.Entries = make([]*raft.Log, n)
			for i := range logs {
				l := &logs[i]
				l.Index = d.u64()
				l.Term = d.u64()
				l.Type = raft.LogType(d.u64())
				l.Data = d.bytes()
				l.Extensions = d.bytes()
				l.AppendedAt = d.time()
				r.Entries[i] = l
			}
		}
		r.LeaderCommitIndex = d.u64()
		cmd = r
	case kindVote:
		cmd = &raft.RequestVoteRequest{RPCHeader: d.header(), Term: d.u64(), Candidate: d.bytes(),
			LastLogIndex: d.u64(), LastLogTerm: d.u64(), LeadershipTransfer: d.bool()}
	case kindPreVote:
		cmd = &raft.RequestPreVoteRequest{RPCHeader: d.header(), Term: d.u64(), LastLogIndex: d.u64(), LastLogTerm: d.u64()}
	case kindTimeoutNow:
		cmd = &raft.TimeoutNowRequest{RPCHeader: d.header()}
	case kindSnapshot:
		cmd = &raft.InstallSnapshotRequest{RPCHeader: d.header(), SnapshotVersion: raft.SnapshotVersion(d.u64()),
			Term: d.u64(), Leader: d.bytes(), LastLogIndex: d.u64(), LastLogTerm: d.u64(), Peers: d.bytes(),
			Configuration: d.bytes(), ConfigurationIndex: d.u64(), Size: int64(d.u64())}
	default:
		return nil, fmt.Errorf("cluster: unknown Raft RPC kind %d", kind)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return cmd, nil
}

func encodeResponse(b rbuf, resp any) (rbuf, error) {
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.u64(r.LastLog)
		b.bool(r.Success)
		b.bool(r.NoRetryBackoff)
	case *raft.RequestVoteResponse:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.bytes(r.Peers)
		b.bool(r.Granted)
	case *raft.RequestPreVoteResponse:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.bool(r.Granted)
	case *raft.TimeoutNowResponse:
		b.header(r.RPCHeader)
	case *raft.InstallSnapshotResponse:
		b.header(r.RPCHeader)
		b.u64(r.Term)
		b.bool(r.Success)
	default:
		return b, fmt.Errorf("cluster: no encoding for Raft response %T", resp)
	}
	return b, nil
}

// decodeResponse fills resp (a pointer to the response type of the
// request sent) from p.
func decodeResponse(p []byte, resp any) error {
	d := &rdec{b: p}
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		*r = raft.AppendEntriesResponse{RPCHeader: d.header(), Term: d.u64(), LastLog: d.u64(), Success: d.bool(), NoRetryBackoff: d.bool()}
	case *raft.RequestVoteResponse:
		*r = raft.RequestVoteResponse{RPCHeader: d.header(), Term: d.u64(), Peers: d.bytes(), Granted: d.bool()}
	case *raft.RequestPreVoteResponse:
		*r = raft.RequestPreVoteResponse{RPCHeader: d.header(), Term: d.u64(), Granted: d.bool()}
	case *raft.TimeoutNowResponse:
		*r = raft.TimeoutNowResponse{RPCHeader: d.header()}
	case *raft.InstallSnapshotResponse:
		*r = raft.InstallSnapshotResponse{RPCHeader: d.header(), Term: d.u64(), Success: d.bool()}
	default:
		return fmt.Errorf("cluster: no decoding for Raft response %T", resp)
	}
	return d.done()
}

// isHeartbeat: an AppendEntries raft's heartbeat goroutine sends (as
// NetworkTransport tells one: a term and a leader, nothing else), which
// goes to the group's heartbeat handler, not behind its other requests.
func isHeartbeat(r *raft.AppendEntriesRequest) bool {
	leader := r.Addr
	if len(leader) == 0 {
		leader = r.Leader
	}
	return r.Term != 0 && leader != nil && r.PrevLogEntry == 0 && r.PrevLogTerm == 0 &&
		len(r.Entries) == 0 && r.LeaderCommitIndex == 0
}
