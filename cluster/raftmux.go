package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The Raft channels. Every Raft group of a node (the metadata group and
// one per quorum queue) talks to another node over one connection: the
// node's link to that peer, dialled once on channel "raft" and kept. A
// request names its group; the peer answers on the same connection, in
// any order, matched by the request's id. Frames:
//
//	request   u32 length, u64 id, u8 kind, u8 group length, group, body
//	response  u32 length, u64 id, u8 status, body (status raftOK) or error text
//
// (the length counts what follows it; bodies are raftcodec.go's). A
// snapshot goes on a connection of its own, channel "raftsnap/<group>":
// the request's frame (u32 length, body), the snapshot's bytes, and the
// answer (u32 length, u8 status, body).
//
// The acceptor reads its connection's requests on one goroutine, which
// hands a heartbeat to its group's heartbeat handler itself (it answers
// at once); any other request joins its group's lane, a queue served in order
// by a goroutine that runs while it holds requests. So a group whose
// raft is busy (storing entries) holds up no other group, and no group
// costs a goroutine while it is idle.

const (
	channelRaft     = "raft"
	channelSnapshot = "raftsnap/"
)

// Response statuses on the raft channels.
const (
	raftOK      = 0
	raftError   = 1 // the body is raft's error text
	raftNoGroup = 2 // no such group on the node (yet, or any more)
)

// errNoGroup: the peer has no such group (yet, or any more).
var errNoGroup = errors.New("cluster: no such Raft group")

// maxRaftFrame bounds a frame on the raft channel, checked before
// anything is allocated for it.
const maxRaftFrame = 1 << 30

// raftLink is this node's connection, for every group, to the node at an
// address; dialled when a request needs it after it ended.
type raftLink struct {
	n    *Node
	addr string

	mu      sync.Mutex
	conn    *linkConn
	dialing *linkDial
}

// linkDial is a dial under way; those that wait for it share its outcome.
type linkDial struct {
	done chan struct{}
	err  error
}

// link returns the node's link to addr (without the node's lock: every
// request of every group looks its link up).
func (n *Node) link(addr string) *raftLink {
	if l, ok := n.links.Load(addr); ok {
		return l.(*raftLink)
	}
	l, _ := n.links.LoadOrStore(addr, &raftLink{n: n, addr: addr})
	return l.(*raftLink)
}

// get returns the link's connection, dialling it if there is none.
func (l *raftLink) get(deadline time.Time) (*linkConn, error) {
	for {
		l.mu.Lock()
		if lc := l.conn; lc != nil {
			l.mu.Unlock()
			return lc, nil
		}
		if d := l.dialing; d != nil {
			l.mu.Unlock()
			timer := time.NewTimer(time.Until(deadline))
			select {
			case <-d.done:
				timer.Stop()
				if d.err != nil {
					return nil, d.err
				}
				continue
			case <-timer.C:
				return nil, fmt.Errorf("cluster: connecting to %s: %w", l.addr, context.DeadlineExceeded)
			}
		}
		d := &linkDial{done: make(chan struct{})}
		l.dialing = d
		l.mu.Unlock()
		ctx, cancel := context.WithDeadline(l.n.ctx, deadline)
		c, p, err := l.n.dial(ctx, l.addr, channelRaft)
		cancel()
		var lc *linkConn
		if err == nil {
			now := time.Now().UnixNano()
			lc = &linkConn{l: l, c: c, peer: p.name, pending: map[uint64]*pendingCall{}, closed: make(chan struct{})}
			lc.out = newFrameWriter(c, l.n.timing.IOTimeout, func(err error) {
				lc.broken(fmt.Errorf("cluster: Raft RPC to %s: %w", l.addr, err))
			})
			lc.lastRecv.Store(now)
		}
		l.mu.Lock()
		d.err = err
		l.dialing = nil
		l.conn = lc
		l.mu.Unlock()
		close(d.done)
		if err != nil {
			return nil, err
		}
		go lc.read()
		go lc.sweep()
		return lc, nil
	}
}

// answeredSince reports whether the link's connection has carried an
// answer since t.
func (l *raftLink) answeredSince(t time.Time) bool {
	l.mu.Lock()
	lc := l.conn
	l.mu.Unlock()
	return lc != nil && lc.lastRecv.Load() >= t.UnixNano()
}

// roundTrip sends group t's request (kind, body) and waits for the
// answer's body, for at most Timing.IOTimeout.
func (l *raftLink) roundTrip(t *GroupTransport, kind byte, body []byte, lazy bool) ([]byte, error) {
	deadline := time.Now().Add(l.n.timing.IOTimeout)
	lc, err := l.get(deadline)
	if err != nil {
		return nil, err
	}
	pc, id, err := lc.send(t.group, kind, body, lazy, deadline)
	if err != nil {
		return nil, err
	}
	// The connection's sweep fails the call at its deadline (no timer
	// per call).
	select {
	case <-pc.done:
	case <-t.closed:
		lc.forget(id)
		return nil, raft.ErrTransportShutdown
	case <-l.n.ctx.Done():
		lc.forget(id)
		return nil, ErrClosed
	}
	if err := pc.result(); err != nil {
		return nil, err
	}
	return pc.body, nil
}

// linkConn is one connection of a link, with the calls waiting on it.
type linkConn struct {
	l    *raftLink
	c    net.Conn
	peer string // the peer's node name

	out *frameWriter

	mu       sync.Mutex
	pending  map[uint64]*pendingCall // nil once broken
	nextID   uint64
	err      error
	closed   chan struct{} // closed once broken
	lastRecv atomic.Int64  // when the last answer arrived (Unix ns)
}

type pendingCall struct {
	done     chan struct{}
	deadline time.Time
	status   byte
	body     []byte
	err      error
	peer     string
}

// result is the call's error once done: its connection's, or the peer's
// answer.
func (pc *pendingCall) result() error {
	switch {
	case pc.err != nil:
		return pc.err
	case pc.status == raftOK:
		return nil
	case pc.status == raftNoGroup:
		return fmt.Errorf("%w: %s: %s", errNoGroup, pc.peer, pc.body)
	default:
		return errors.New(string(pc.body))
	}
}

// send writes a request and registers its call.
func (lc *linkConn) send(group string, kind byte, body []byte, lazy bool, deadline time.Time) (*pendingCall, uint64, error) {
	pc := &pendingCall{done: make(chan struct{}), deadline: deadline, peer: lc.peer}
	lc.mu.Lock()
	if lc.pending == nil {
		err := lc.err
		lc.mu.Unlock()
		return nil, 0, err
	}
	lc.nextID++
	id := lc.nextID
	lc.pending[id] = pc
	lc.mu.Unlock()
	var hdr [14]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(8+1+1+len(group)+len(body)))
	binary.BigEndian.PutUint64(hdr[4:12], id)
	hdr[12] = kind
	hdr[13] = byte(len(group))
	if err := lc.out.write(lazy, hdr[:], []byte(group), body); err != nil {
		return nil, 0, err
	}
	return pc, id, nil
}

// forget drops a call whose caller stopped waiting.
func (lc *linkConn) forget(id uint64) {
	lc.mu.Lock()
	if lc.pending != nil {
		delete(lc.pending, id)
	}
	lc.mu.Unlock()
}

// sweepEvery is how often a connection fails its calls past their
// deadline.
const sweepEvery = 250 * time.Millisecond

// sweep fails the calls past their deadline until the connection ends;
// the connection goes too when nothing at all came back on it for
// Timing.IOTimeout while a call timed out (its peer is gone without
// closing it), so that the next request dials again.
func (lc *linkConn) sweep() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-lc.closed:
			return
		case now := <-tick.C:
			var late []*pendingCall
			lc.mu.Lock()
			for id, pc := range lc.pending {
				if now.After(pc.deadline) {
					delete(lc.pending, id)
					late = append(late, pc)
				}
			}
			lc.mu.Unlock()
			if len(late) == 0 {
				continue
			}
			for _, pc := range late {
				pc.err = fmt.Errorf("cluster: Raft RPC to %s: %w", lc.l.addr, context.DeadlineExceeded)
				close(pc.done)
			}
			if now.Sub(time.Unix(0, lc.lastRecv.Load())) >= lc.l.n.timing.IOTimeout {
				lc.broken(fmt.Errorf("cluster: no answer from %s for %v", lc.l.addr, lc.l.n.timing.IOTimeout))
				return
			}
		}
	}
}

// broken ends the connection: its calls fail with err, and the link
// dials anew for the next request.
func (lc *linkConn) broken(err error) {
	lc.mu.Lock()
	pend := lc.pending
	if pend != nil {
		lc.pending = nil
		lc.err = err
	}
	lc.mu.Unlock()
	if pend == nil {
		return
	}
	close(lc.closed)
	lc.c.Close()
	lc.l.mu.Lock()
	if lc.l.conn == lc {
		lc.l.conn = nil
	}
	lc.l.mu.Unlock()
	for _, pc := range pend {
		pc.err = err
		close(pc.done)
	}
}

// read reads answers until the connection ends.
func (lc *linkConn) read() {
	r := bufio.NewReaderSize(lc.c, 32<<10)
	for {
		var hdr [13]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			lc.broken(fmt.Errorf("cluster: Raft connection to %s: %w", lc.l.addr, err))
			// The peer may be gone: checked as for a connection accepted
			// from it (a leader may hold no connection a follower dialled).
			lc.l.n.connLost(lc.peer)
			return
		}
		size := binary.BigEndian.Uint32(hdr[:4])
		if size < 9 || size > maxRaftFrame {
			lc.broken(fmt.Errorf("cluster: Raft connection to %s: an answer of %d bytes", lc.l.addr, size))
			return
		}
		body := make([]byte, size-9)
		if _, err := io.ReadFull(r, body); err != nil {
			lc.broken(fmt.Errorf("cluster: Raft connection to %s: %w", lc.l.addr, err))
			return
		}
		lc.lastRecv.Store(time.Now().UnixNano())
		id := binary.BigEndian.Uint64(hdr[4:12])
		lc.mu.Lock()
		pc := lc.pending[id]
		delete(lc.pending, id)
		lc.mu.Unlock()
		if pc != nil {
			pc.status, pc.body = hdr[12], body
			close(pc.done)
		}
	}
}

// frameWriter serialises the frames written to one connection. A frame
// is flushed once no other writer waits (frames written at once go in one
// write), except a lazy one (a heartbeat, or its answer): that waits up
// to lazyFlush for company, so that the heartbeats of many idle groups
// cross in a few writes instead of one each. A failed write fails the
// connection (onErr), since a frame may be cut.
type frameWriter struct {
	c       net.Conn
	w       *bufio.Writer
	timeout time.Duration // a write's deadline
	onErr   func(error)

	mu     sync.Mutex
	queued atomic.Int32
	armed  bool // a lazy flush is due
	err    error
}

// lazyFlush bounds how long a heartbeat's frame waits in the buffer.
const lazyFlush = 5 * time.Millisecond

func newFrameWriter(c net.Conn, timeout time.Duration, onErr func(error)) *frameWriter {
	return &frameWriter{c: c, w: bufio.NewWriterSize(c, 64<<10), timeout: timeout, onErr: onErr}
}

func (f *frameWriter) write(lazy bool, parts ...[]byte) error {
	f.queued.Add(1)
	f.mu.Lock()
	last := f.queued.Add(-1) == 0
	if f.err != nil {
		err := f.err
		f.mu.Unlock()
		return err
	}
	_ = f.c.SetWriteDeadline(time.Now().Add(f.timeout))
	for _, p := range parts {
		f.w.Write(p)
	}
	var err error
	switch {
	case !last:
	case !lazy:
		err = f.w.Flush()
	case !f.armed:
		f.armed = true
		time.AfterFunc(lazyFlush, f.flushLazy)
	}
	if err != nil {
		f.err = err
	}
	f.mu.Unlock()
	if err != nil {
		f.onErr(err)
	}
	return err
}

func (f *frameWriter) flushLazy() {
	f.mu.Lock()
	f.armed = false
	var err error
	if f.err == nil && f.w.Buffered() > 0 {
		_ = f.c.SetWriteDeadline(time.Now().Add(f.timeout))
		if err = f.w.Flush(); err != nil {
			f.err = err
		}
	}
	f.mu.Unlock()
	if err != nil {
		f.onErr(err)
	}
}

// raftServer is the acceptor's side of one connection on channel "raft".
type raftServer struct {
	n    *Node
	c    net.Conn
	peer string
	out  *frameWriter
	done chan struct{} // closed when the connection's reading ends

	mu    sync.Mutex
	lanes map[*GroupTransport]*lane
}

// lane is a group's requests from one connection, served in order.
type lane struct {
	jobs    []laneJob
	running bool
}

type laneJob struct {
	id  uint64
	cmd any
}

// serveRaft serves the requests on c until it ends.
func (n *Node) serveRaft(c net.Conn, p peer) {
	s := &raftServer{n: n, c: c, peer: p.name, done: make(chan struct{}), lanes: map[*GroupTransport]*lane{}}
	s.out = newFrameWriter(c, n.timing.IOTimeout, func(error) { c.Close() })
	defer close(s.done)
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		var hdr [14]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && n.ctx.Err() == nil {
				n.log.Debug().Err(err).Str("peer_node", p.name).Msg("cluster Raft connection ended")
			}
			return
		}
		size := binary.BigEndian.Uint32(hdr[:4])
		glen := uint32(hdr[13])
		if size < 10+glen || size > maxRaftFrame {
			n.log.Warn().Str("peer_node", p.name).Uint32("size", size).Msg("cluster Raft connection closed: a malformed frame")
			return
		}
		rest := make([]byte, size-10)
		if _, err := io.ReadFull(r, rest); err != nil {
			return
		}
		id := binary.BigEndian.Uint64(hdr[4:12])
		kind := hdr[12]
		group := string(rest[:glen])
		t := n.groupTransport(group)
		if t == nil {
			s.reply(id, raftNoGroup, fmt.Appendf(nil, "no Raft group %q on node %s", group, n.cfg.NodeName), false)
			continue
		}
		if kind == kindSnapshot {
			s.reply(id, raftError, []byte("cluster: a snapshot on the raft channel"), false)
			continue
		}
		cmd, err := decodeRequest(kind, rest[glen:])
		if err != nil {
			n.log.Warn().Err(err).Str("peer_node", p.name).Str("group", group).Msg("cluster Raft connection closed: a malformed request")
			return
		}
		if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && isHeartbeat(ae) {
			if fn := t.heartbeatHandler(); fn != nil {
				s.heartbeat(t, id, cmd, fn)
				continue
			}
		}
		s.enqueue(t, laneJob{id, cmd})
	}
}

func (n *Node) groupTransport(group string) *GroupTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.groups[group]
}

// enqueue adds j to its group's lane, starting the lane's goroutine if
// it is not running.
func (s *raftServer) enqueue(t *GroupTransport, j laneJob) {
	s.mu.Lock()
	ln := s.lanes[t]
	if ln == nil {
		ln = &lane{}
		s.lanes[t] = ln
	}
	ln.jobs = append(ln.jobs, j)
	if ln.running {
		s.mu.Unlock()
		return
	}
	ln.running = true
	s.mu.Unlock()
	go s.runLane(t, ln)
}

func (s *raftServer) runLane(t *GroupTransport, ln *lane) {
	for {
		s.mu.Lock()
		if len(ln.jobs) == 0 {
			ln.running = false
			delete(s.lanes, t)
			s.mu.Unlock()
			return
		}
		j := ln.jobs[0]
		ln.jobs[0] = laneJob{}
		ln.jobs = ln.jobs[1:]
		s.mu.Unlock()
		s.serve(t, j)
	}
}

// heartbeat serves a heartbeat on the reading goroutine, as
// NetworkTransport does: raft's heartbeat handler answers at once (it
// touches no disk but at a new term), and a goroutine per heartbeat cost
// more than the handler (its start and stack growth, thousands a second
// with many groups). A handler that did not answer (its raft is shutting
// down) gets the error at once.
func (s *raftServer) heartbeat(t *GroupTransport, id uint64, cmd any, hb func(raft.RPC)) {
	respCh := make(chan raft.RPCResponse, 1)
	hb(raft.RPC{Command: cmd, RespChan: respCh})
	select {
	case resp := <-respCh:
		s.respond(id, resp, true)
	default:
		s.reply(id, raftError, []byte(raft.ErrTransportShutdown.Error()), true)
	}
}

// serve hands j to its group's raft and writes the answer.
func (s *raftServer) serve(t *GroupTransport, j laneJob) {
	if ae, ok := j.cmd.(*raft.AppendEntriesRequest); ok && !s.commitFirst(t, ae) {
		return
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: j.cmd, RespChan: respCh}
	select {
	case t.consume <- rpc:
	case <-t.closed:
		s.reply(j.id, raftError, []byte(raft.ErrTransportShutdown.Error()), false)
		return
	case <-s.done:
		return
	}
	select {
	case resp := <-respCh:
		// An AppendEntries of nothing is answered lazily, as it came.
		ae, lazy := j.cmd.(*raft.AppendEntriesRequest)
		s.respond(j.id, resp, lazy && len(ae.Entries) == 0)
	case <-t.closed:
		s.reply(j.id, raftError, []byte(raft.ErrTransportShutdown.Error()), false)
	case <-s.done:
	}
}

// commitFirst tells raft the commit index an AppendEntries carries
// before raft stores the entries it carries. A follower raft learns that
// entries are committed from the AppendEntries after them, and acts on
// that only once it has stored (and synced) the new entries of that
// request too; so a follower's consumers got each message a sync later
// than the leader's. An AppendEntries of nothing with the same term,
// leader and previous entry, and a commit index no later than that
// previous entry, is one the leader could have sent itself (raft sends
// one to a follower it has nothing new for): raft checks the previous
// entry as usual and applies up to it, which is all stored here and
// matches the leader's log. Sent only when it commits something the
// last request did not (t.hinted). It reports false if the group or
// connection closed meanwhile.
func (s *raftServer) commitFirst(t *GroupTransport, ae *raft.AppendEntriesRequest) bool {
	n := len(ae.Entries)
	if n == 0 {
		return true
	}
	c := min(ae.LeaderCommitIndex, ae.PrevLogEntry)
	hinted := t.hinted.Load()
	t.hinted.Store(max(hinted, min(ae.LeaderCommitIndex, ae.Entries[n-1].Index)))
	if c <= hinted {
		return true
	}
	h := *ae
	h.Entries = nil
	h.LeaderCommitIndex = c
	select {
	case t.consume <- raft.RPC{Command: &h, RespChan: make(chan raft.RPCResponse, 1)}:
		return true
	case <-t.closed:
		return true // serve answers the request with the shutdown error
	case <-s.done:
		return false
	}
}

func (s *raftServer) respond(id uint64, resp raft.RPCResponse, lazy bool) {
	if resp.Error != nil {
		s.reply(id, raftError, []byte(resp.Error.Error()), lazy)
		return
	}
	body, err := encodeResponse(nil, resp.Response)
	if err != nil {
		s.reply(id, raftError, []byte(err.Error()), lazy)
		return
	}
	s.reply(id, raftOK, body, lazy)
}

// reply writes an answer; a connection that cannot take it is closed
// (its reading ends, and the dialler's calls on it fail).
func (s *raftServer) reply(id uint64, status byte, body []byte, lazy bool) {
	var hdr [13]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(8+1+len(body)))
	binary.BigEndian.PutUint64(hdr[4:12], id)
	hdr[12] = status
	_ = s.out.write(lazy, hdr[:], body) // a failure closes the connection
}

// serveSnapshot serves the one InstallSnapshot of connection c for t.
func (n *Node) serveSnapshot(c net.Conn, p peer, t *GroupTransport) {
	_ = c.SetDeadline(time.Now().Add(n.timing.IOTimeout))
	r := bufio.NewReaderSize(c, 64<<10)
	fail := func(err error) {
		n.log.Warn().Err(err).Str("peer_node", p.name).Str("group", t.group).Msg("cluster snapshot transfer failed")
	}
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		fail(err)
		return
	}
	size := binary.BigEndian.Uint32(l[:])
	if size > MaxRPCSize {
		fail(fmt.Errorf("a request of %d bytes", size))
		return
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		fail(err)
		return
	}
	cmd, err := decodeRequest(kindSnapshot, body)
	if err != nil {
		fail(err)
		return
	}
	req := cmd.(*raft.InstallSnapshotRequest)
	_ = c.SetDeadline(t.snapshotDeadline(req.Size))
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: req, Reader: io.LimitReader(r, req.Size), RespChan: respCh}
	answer := func(status byte, body []byte) {
		w := bufio.NewWriter(c)
		var hdr [5]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(1+len(body)))
		hdr[4] = status
		w.Write(hdr[:])
		w.Write(body)
		_ = w.Flush()
	}
	select {
	case t.consume <- rpc:
	case <-t.closed:
		answer(raftError, []byte(raft.ErrTransportShutdown.Error()))
		return
	}
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			answer(raftError, []byte(resp.Error.Error()))
			return
		}
		out, err := encodeResponse(nil, resp.Response)
		if err != nil {
			answer(raftError, []byte(err.Error()))
			return
		}
		answer(raftOK, out)
	case <-t.closed:
		answer(raftError, []byte(raft.ErrTransportShutdown.Error()))
	}
}
