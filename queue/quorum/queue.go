package quorum

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/raftstore"
)

// ErrNoLeader: the group had no leader in time (publishes are nacked).
var ErrNoLeader = errors.New("quorum: no leader")

// errClosed: the queue was deleted or the broker is stopping.
var errClosed = errors.New("quorum: closed")

// Queue is one quorum queue on this node: its Raft group, the applied
// state, and the node's consumers of it.
//
// Goroutines: raft's own three (run, FSM, snapshots), and the proposer,
// which sends what waits in the inbox as one log entry and waits for it
// to be applied before it sends the next (so entries grow with the load).
// Locks: mu guards the machine and the consumers; Consumer.Deliver runs
// under it (on raft's FSM goroutine). pmu guards the inbox and the
// waiters, a leaf.
type Queue struct {
	typ    *Type
	decl   queue.Decl
	hooks  queue.Hooks
	gid    uint64
	pid    uint64 // this incarnation's proposer id
	r      *raft.Raft
	group  *raftstore.Group
	logs   *floorLog
	snaps  raft.SnapshotStore
	trans  raft.Transport
	replay uint64 // entries up to this index were applied before this start: their effects are not redone

	mu        sync.Mutex
	m         *machine
	limits    queue.Limits
	consumers map[uint64]*local
	nextKey   uint64
	noAckOut  int // no-ack deliveries whose settle is not applied yet
	deleted   bool
	stopped   bool
	stats     queue.MessageStats
	expiry    *time.Timer
	expiryAt  int64
	lastUse   time.Time
	idle      *time.Timer

	pmu      sync.Mutex
	inbox    encoder
	count    int
	seq      uint64
	waiters  map[uint64]*waiter
	closing  bool
	wake     chan struct{}
	done     chan struct{}
	inflight chan struct{}  // a slot per entry in flight
	flights  sync.WaitGroup // their waiting goroutines
}

// local is one consumer of this node.
type local struct {
	key      uint64
	tag      string
	c        queue.Consumer
	noAck    bool
	refusing bool // it refused; what it is given goes back until a Kick
}

// waiter is a proposal's caller.
type waiter struct {
	msg  *queue.Message // an enqueue's message
	done func(error)    // an enqueue's confirm
	ch   chan result    // a call's result
}

func (t *Type) open(d queue.Decl, l queue.Limits, h queue.Hooks, gid uint64, fresh bool) (*Queue, error) {
	st, _ := t.raftStore()
	g, err := st.Group(gid)
	if err != nil {
		return nil, err
	}
	snaps, err := st.SnapshotStore(gid, 2)
	if err != nil {
		return nil, err
	}
	q := &Queue{typ: t, decl: d, hooks: h, gid: gid, pid: newPID(), group: g, logs: &floorLog{Group: g}, snaps: snaps,
		m: newMachine(configFor(l)), limits: l, consumers: map[uint64]*local{}, waiters: map[uint64]*waiter{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), inflight: make(chan struct{}, maxInflight), lastUse: t.cfg.Now()}
	q.replay, _ = g.LastIndex()
	var addr raft.ServerAddress
	if t.cfg.Transport != nil {
		addr, q.trans, err = t.cfg.Transport(gid)
		if err != nil {
			return nil, err
		}
	} else {
		addr, q.trans = raft.NewInmemTransport("")
	}
	cfg := t.raftConfig()
	existing, err := raft.HasExistingState(q.logs, g, snaps)
	if err != nil {
		return nil, err
	}
	r, err := raft.NewRaft(cfg, (*fsm)(q), q.logs, g, snaps, q.trans)
	if err != nil {
		return nil, fmt.Errorf("quorum: start group %d: %w", gid, err)
	}
	q.r = r
	if !existing {
		// A new group (or one stored as a queue whose group never
		// started, a crash in between): this node is its one voter.
		// Bootstrapping the running raft makes it elect itself at once.
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: cfg.LocalID, Address: addr}}}
		if err := r.BootstrapCluster(conf).Error(); err != nil {
			r.Shutdown()
			return nil, fmt.Errorf("quorum: bootstrap group %d: %w", gid, err)
		}
	}
	q.elect(cfg.LocalID, addr)
	t.mu.Lock()
	t.queues[gid] = q
	t.known[gid] = true
	t.mu.Unlock()
	go q.proposer()
	// The queue's limits (they may have changed by policy), and, after a
	// restart, this node's consumers from before are gone.
	if !fresh {
		q.propose(opResetNode, func(e *encoder) { e.str(t.cfg.NodeID) }, nil)
	}
	q.proposeConfig(l)
	if fresh {
		// Declare-ok goes once the group leads, so a publish right after
		// it is taken at once.
		if _, err := q.call(opTick, nil); err != nil {
			q.Stop()
			return nil, err
		}
	}
	q.armIdle()
	return q, nil
}

func (q *Queue) proposeConfig(l queue.Limits) {
	c := configFor(l)
	q.propose(opConfig, func(e *encoder) {
		e.i64(c.TTL)
		e.i64(c.MaxLen)
		e.i64(c.MaxBytes)
		e.u8(uint8(c.Overflow))
		e.i64(c.DeliveryLimit)
		e.u8(b2u(c.SAC))
	}, nil)
}

// elect makes a group whose one voter is this node stand for election
// now, instead of after a heartbeat timeout: raft's TimeoutNow, sent to
// itself over its own transport. A group with other voters waits for
// them as raft does.
func (q *Queue) elect(id raft.ServerID, addr raft.ServerAddress) {
	f := q.r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	srv := f.Configuration().Servers
	if len(srv) != 1 || srv[0].ID != id || srv[0].Suffrage != raft.Voter {
		return
	}
	if it, ok := q.trans.(*raft.InmemTransport); ok {
		it.Connect(addr, it)
	}
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}}
	var resp raft.TimeoutNowResponse
	if err := q.trans.TimeoutNow(id, addr, req, &resp); err != nil {
		q.typ.logErr(err, "quorum queue: cannot call an election")
	}
}

// Raft returns the queue's Raft, for membership changes (AddVoter) and
// tests.
func (q *Queue) Raft() *raft.Raft { return q.r }

// GroupID is the queue's Raft group id in the node's store.
func (q *Queue) GroupID() uint64 { return q.gid }

// propose appends a command to the inbox; w (if set) gets its result.
func (q *Queue) propose(op uint8, fill func(*encoder), w *waiter) bool {
	q.pmu.Lock()
	if q.closing {
		q.pmu.Unlock()
		return false
	}
	q.seq++
	if len(q.inbox.b) == 0 {
		// Room for the entry's header, filled in when it is sent.
		q.inbox.b = append(make([]byte, 0, 8<<10), make([]byte, headerLen)...)
	}
	q.inbox.u8(op)
	q.inbox.u64(q.seq)
	if fill != nil {
		fill(&q.inbox)
	}
	q.count++
	if w != nil {
		q.waiters[q.seq] = w
	}
	q.pmu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// callTimeout bounds a synchronous command (a get, a purge, a consumer
// attach).
const callTimeout = 30 * time.Second

// call proposes a command and waits for its result.
func (q *Queue) call(op uint8, fill func(*encoder)) (result, error) {
	w := &waiter{ch: make(chan result, 1)}
	if !q.propose(op, fill, w) {
		return result{}, queue.ErrDeleted
	}
	select {
	case r := <-w.ch:
		return r, r.err
	case <-time.After(callTimeout):
		return result{}, ErrNoLeader
	}
}

// Sync waits until every command proposed before it was applied.
func (q *Queue) Sync() error {
	_, err := q.call(opTick, nil)
	return err
}

// proposer sends the inbox as one entry whenever it has anything; a
// short-lived goroutine per entry waits for it to be applied (and fails
// its waiters if it is not), at most maxInflight at a time.
func (q *Queue) proposer() {
	defer close(q.done)
	defer q.flights.Wait()
	for {
		<-q.wake
		for {
			q.pmu.Lock()
			n, closing := q.count, q.closing
			if n == 0 {
				q.pmu.Unlock()
				if closing {
					return
				}
				break
			}
			data := q.inbox.b
			first := q.seq - uint64(n) + 1
			last := q.seq
			q.inbox.b, q.count = nil, 0
			q.pmu.Unlock()
			hdr := encoder{b: data[:0]}
			hdr.u8(batchVersion)
			hdr.i64(q.typ.cfg.Now().UnixMilli())
			hdr.u64(q.pid)
			hdr.u32(uint32(n))
			if err := q.waitLeader(); err != nil {
				q.fail(first, last, err)
				continue
			}
			// Up to maxInflight entries in flight: the next one is
			// stored while the last is applied and confirmed.
			q.inflight <- struct{}{}
			f := q.r.Apply(data, 0)
			q.flights.Add(1)
			go func() {
				defer q.flights.Done()
				if err := f.Error(); err != nil {
					q.fail(first, last, err)
				}
				<-q.inflight
			}()
		}
	}
}

// maxInflight bounds the entries a queue has proposed and not yet seen
// applied.
const maxInflight = 4

// leaderWait bounds how long a proposal waits for the group to lead.
const leaderWait = 10 * time.Second

func (q *Queue) waitLeader() error {
	if q.r.State() == raft.Leader {
		return nil
	}
	deadline := time.Now().Add(leaderWait)
	for q.r.State() != raft.Leader {
		q.pmu.Lock()
		closing := q.closing
		q.pmu.Unlock()
		if closing && q.r.State() == raft.Shutdown {
			return errClosed
		}
		if time.Now().After(deadline) {
			return ErrNoLeader
		}
		select {
		case <-q.r.LeaderCh():
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// fail answers the waiters of seq first..last that no apply answered.
func (q *Queue) fail(first, last uint64, err error) {
	var ws []*waiter
	q.pmu.Lock()
	for s := first; s <= last; s++ {
		if w := q.waiters[s]; w != nil {
			ws = append(ws, w)
			delete(q.waiters, s)
		}
	}
	q.pmu.Unlock()
	for _, w := range ws {
		w.answer(result{err: err})
	}
}

func (w *waiter) answer(r result) {
	if w.done != nil {
		w.done(r.err)
	}
	if w.ch != nil {
		w.ch <- r
	}
}

// enqueue proposes m; done (if set) is called exactly once.
func (q *Queue) enqueue(m *queue.Message, done func(error)) bool {
	q.mu.Lock()
	gone := q.deleted || q.stopped
	if !gone {
		q.stats.Publish++
	}
	q.mu.Unlock()
	if gone {
		if done != nil {
			done(queue.ErrDeleted)
		}
		return false
	}
	w := &waiter{msg: m, done: done}
	ok := q.propose(opEnqueue, func(e *encoder) {
		e.str(m.Exchange)
		e.str(m.RoutingKey)
		e.bytes(m.Props)
		e.bytes(m.Body)
	}, w)
	if !ok && done != nil {
		done(queue.ErrDeleted)
	}
	return ok
}

// fsm is the queue as raft's state machine.
type fsm Queue

// Apply implements raft.FSM: the entry goes to the machine under the
// queue's lock, and the effects for this node follow: deliveries under
// the lock, then (without it) the proposals' results, dead letters and
// the leader's expiry timer.
func (f *fsm) Apply(l *raft.Log) any {
	q := (*Queue)(f)
	if l.Type != raft.LogCommand {
		return nil
	}
	var fx effects
	var back map[uint64][]uint64 // refused deliveries by consumer
	var settled []uint64
	replayed := l.Index <= q.replay
	q.mu.Lock()
	q.m.apply(l.Index, l.Data, q.lookup, &fx)
	if !replayed && !q.deleted {
		for _, d := range fx.deliver {
			lc := q.consumers[d.consumer]
			if lc == nil {
				continue // another node's, or detached here: its detach returns it
			}
			if lc.refusing {
				back = addBack(back, lc.key, d.e.Seq)
				continue
			}
			e := d.e
			if e.Msg == nil {
				e.Msg = q.body(d.m)
			}
			switch lc.c.Deliver(q, e, nil) {
			case queue.Refused:
				lc.refusing = true
				back = addBack(back, lc.key, e.Seq)
			case queue.Pending:
				q.stats.Deliver++
				if e.Redelivered {
					q.stats.Redeliver++
				}
			case queue.Settled:
				q.stats.DeliverNoAck++
				q.noAckOut++
				settled = append(settled, e.Seq)
			}
		}
	}
	var dead []queue.Dead
	if !replayed && q.limits.HasDLX && q.hooks.DeadLetter != nil {
		for _, x := range fx.dead {
			dead = append(dead, queue.Dead{Msg: q.bodyOf(x.m), Reason: x.reason, Exchange: q.limits.DeadLetterExchange,
				RoutingKey: q.limits.DeadLetterRoutingKey, HasRoutingKey: q.limits.HasDLRK})
		}
	}
	for _, r := range fx.results {
		if r.entry != nil && r.entry.Msg == nil && r.pid == q.pid {
			r.entry.Msg = q.body(r.m)
		}
	}
	if !replayed {
		q.armExpiry(fx.expiry)
	}
	q.mu.Unlock()

	for key, ids := range back {
		q.propose(opUnassign, func(e *encoder) { e.u64(key); e.ids(ids) }, nil)
	}
	if len(settled) > 0 {
		q.propose(opSettle, func(e *encoder) { e.ids(settled) }, &waiter{done: func(error) {
			q.mu.Lock()
			q.noAckOut -= len(settled)
			q.mu.Unlock()
		}})
	}
	if len(dead) > 0 {
		q.hooks.DeadLetter(q, dead)
	}
	var ws []*waiter
	var rs []result
	q.pmu.Lock()
	for _, r := range fx.results {
		if r.pid != q.pid {
			continue
		}
		if w := q.waiters[r.seq]; w != nil {
			delete(q.waiters, r.seq)
			ws = append(ws, w)
			rs = append(rs, r)
		}
	}
	q.pmu.Unlock()
	for i, w := range ws {
		w.answer(rs[i])
	}
	return nil
}

func addBack(m map[uint64][]uint64, key, id uint64) map[uint64][]uint64 {
	if m == nil {
		m = map[uint64][]uint64{}
	}
	m[key] = append(m[key], id)
	return m
}

// lookup gives the machine the publisher's own message for an enqueue
// this queue proposed.
func (q *Queue) lookup(pid, seq uint64) *queue.Message {
	if pid != q.pid {
		return nil
	}
	q.pmu.Lock()
	defer q.pmu.Unlock()
	if w := q.waiters[seq]; w != nil {
		return w.msg
	}
	return nil
}

// bodyOf is m's message, cached or read back from the log.
func (q *Queue) bodyOf(m *msg) *queue.Message {
	if m.body != nil {
		return m.body
	}
	return q.body(m)
}

// body reads m's message back from its log entry. A message whose entry
// cannot be read is delivered empty, with the error logged.
func (q *Queue) body(m *msg) *queue.Message {
	if m.body != nil {
		return m.body
	}
	var l raft.Log
	if err := q.logs.GetLog(m.idx, &l); err != nil {
		q.typ.logErr(fmt.Errorf("group %d entry %d: %w", q.gid, m.idx, err), "cannot read a quorum queue message")
		return &queue.Message{}
	}
	d := &decoder{b: l.Data}
	d.u8()
	d.i64()
	d.u64()
	n := d.u32()
	for pos := uint32(0); pos < n && d.err == nil; pos++ {
		op := d.u8()
		d.u64()
		if op != opEnqueue {
			skip(op, d)
			continue
		}
		ex, rk, props, b := d.str(), d.str(), d.bytes(), d.bytes()
		if pos == m.pos {
			// A copy: the entry's buffer is not kept for one message.
			buf := make([]byte, len(props)+len(b))
			copy(buf, props)
			copy(buf[len(props):], b)
			return queue.NewStored(ex, rk, buf[:len(props):len(props)], buf[len(props):], 0)
		}
	}
	q.typ.logErr(fmt.Errorf("group %d entry %d has no message at %d", q.gid, m.idx, m.pos), "cannot read a quorum queue message")
	return &queue.Message{}
}

// skip passes over a command's fields.
func skip(op uint8, d *decoder) {
	switch op {
	case opAttach:
		d.u64()
		d.str()
		d.u32()
		d.u32()
		d.u8()
	case opDetach, opUnblock:
		d.u64()
	case opSettle, opReturn, opDiscard:
		d.ids()
	case opUnassign:
		d.u64()
		d.ids()
	case opGet:
		d.u8()
	case opConfig:
		d.i64()
		d.i64()
		d.i64()
		d.u8()
		d.i64()
		d.u8()
	case opResetNode:
		d.str()
	}
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

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}

// floorLog keeps the entries live messages are in: raft's compaction
// after a snapshot deletes only below the snapshot's floor.
type floorLog struct {
	*raftstore.Group
	floor atomic.Uint64
}

func (l *floorLog) setFloor(f uint64) {
	for {
		old := l.floor.Load()
		if f <= old || l.floor.CompareAndSwap(old, f) {
			return
		}
	}
}

// DeleteRange implements raft.LogStore.
func (l *floorLog) DeleteRange(min, max uint64) error {
	if f := l.floor.Load(); max >= f {
		if f == 0 || f-1 < min {
			return nil
		}
		max = f - 1
	}
	return l.Group.DeleteRange(min, max)
}
