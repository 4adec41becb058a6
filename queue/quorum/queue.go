package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster"
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
	bodies *bodyFiles // bodies that came with snapshots it restored (snapshot.go, bodies.go)
	trans  raft.Transport
	place  *Placement                 // the replica set in a cluster; nil: a one-voter group
	obs    *raft.Observer             // its leader changes (watchLeaders); nil for a one-voter group
	seen   atomic.Pointer[leaderSeen] // the last leader obs saw (ledTerm)
	// bootNow, made before bootstrapLater starts (a new group's member
	// waiting for its first leader), is closed once (bootOnce) to end
	// that wait at once (BootstrapNow).
	bootNow  chan struct{}
	bootOnce sync.Once

	// lctx ends when this replica sees the leader change (forwardCtx).
	lmu     sync.Mutex
	lctx    context.Context
	lcancel context.CancelFunc
	replay  uint64 // entries up to this index were applied before this start: their effects are not redone

	mu        sync.Mutex
	m         *machine
	limits    queue.Limits
	consumers map[uint64]*local
	nextKey   uint64
	noAckOut  int             // no-ack deliveries whose settle is not applied yet
	detaching map[uint64]bool // consumers of down nodes this leader proposed to detach
	// cancelling: consumers of this node cancelled (acks expected), whose
	// cancel the machine has not applied yet: Counts counts them while
	// they hold messages.
	cancelling map[uint64]bool
	// attaching: consumers of this node whose attach is proposed and not
	// applied yet (a cancel may come first: it stays in cancelling).
	attaching map[uint64]bool
	downKeys  map[string]map[uint64]bool // by down node: its consumers when this leader first saw it down
	deleted   bool
	stopped   bool
	stats     queue.MessageStats
	expiry    *time.Timer
	expiryAt  int64
	lastUse   time.Time
	idle      *time.Timer
	reader    entryReader // the log entry messages were read back from last

	// orphans: consumers of running nodes that are not voters, by key,
	// with when this leader last asked (or first saw them); askingOrphans
	// while a round of questions is out (askOrphans).
	orphans       map[uint64]time.Time
	askingOrphans bool

	nudger  cluster.Nudger // a replicated group's followers hear of what is applied at once
	compact compactor      // snapshots sooner while the queue is near empty (compact.go)
	// early: the leader's entries are stored early (floorLog.StoreLogs);
	// see earlyStores.
	early bool

	pmu     sync.Mutex
	inbox   encoder
	count   int
	seq     uint64
	waiters map[uint64]*waiter
	closing bool
	leaving bool     // closing as a replica removed from its group: what waits is still sent
	leftTo  []string // once leaving: the group's other members, where what it sends goes
	retry   []batch  // what no leader took, to send again first (failed, resend)
	// leaderless counts the batches no leader took by their deadline.
	leaderless atomic.Uint64
	wake       chan struct{}
	done       chan struct{}
	inflight   chan struct{}  // a slot per entry in flight
	flights    sync.WaitGroup // their waiting goroutines
}

// local is one consumer of this node.
type local struct {
	key   uint64
	tag   string
	c     queue.Consumer
	noAck bool
	// held: what the consumer refused while busy (queue.Busy: its
	// connection's outbound buffer was full, its channel's flow stopped)
	// and was given since, in order, for a Kick to offer again. It stays
	// checked out to the consumer: nothing goes back through the log,
	// where the messages checked out meanwhile overtook it (a refusal
	// given back to the queue broke the queue's order). A consumer with
	// a prefetch is bounded by it; any other is blocked in the machine
	// (an opUnassign of nothing) until the Kick that empties held.
	held []heldDelivery
	// blocked: an opUnassign blocked the consumer in the machine (it
	// refused, busy or not); the Kick that leaves it nothing held
	// proposes its opUnblock. One refused for want of credit (not busy)
	// gives back what it is given until then.
	blocked bool

	prefetch  int // its attach's arguments, for an attach again (reattach)
	priority  int
	exclusive bool
}

// unlimitedCredit is the credit in the machine of a consumer without a
// prefetch (prefetch 0, or no-ack): as RabbitMQ's quorum queues give it
// (rabbit_quorum_queue's UNLIMITED_PREFETCH_COUNT), so that a consumer
// attaching to a backlog is not given all of it at once (what its
// connection refuses, it holds: local.held).
var unlimitedCredit = 2000

// heldDelivery is a delivery a consumer refused: its body is read back
// when it is offered again.
type heldDelivery struct {
	e queue.Entry
	m *msg
}

// busy reports whether c refused its last delivery only for now
// (queue.Busy).
func busy(c queue.Consumer) bool {
	b, ok := c.(queue.Busy)
	return ok && b.RefusedBusy()
}

// bounded reports whether lc's prefetch bounds what is checked out to
// it: a consumer with acknowledgements and a prefetch.
func (lc *local) bounded() bool { return !lc.noAck && lc.prefetch > 0 }

// offer offers e to lc and counts it: it reports false when lc refused
// it (and took nothing); settled gets a no-ack delivery's id. q.mu is
// held.
func (q *Queue) offer(lc *local, e queue.Entry, ctx any, settled *[]uint64) bool {
	switch lc.c.Deliver(q, e, ctx) {
	case queue.Refused:
		return false
	case queue.Pending:
		q.stats.Deliver++
		if e.Redelivered {
			q.stats.Redeliver++
		}
	case queue.Settled:
		q.stats.DeliverNoAck++
		q.noAckOut++
		*settled = append(*settled, e.Seq)
	}
	return true
}

// deliverHeld offers lc what it holds, in order, until it refuses again.
// q.mu is held.
func (q *Queue) deliverHeld(lc *local, ctx any, settled *[]uint64) {
	n := 0
	for _, h := range lc.held {
		e := h.e
		if e.Msg == nil {
			e.Msg = q.body(h.m)
		}
		if !q.offer(lc, e, ctx, settled) {
			break
		}
		n++
	}
	clear(lc.held[:n])
	lc.held = lc.held[n:]
	if len(lc.held) == 0 {
		lc.held = nil
	}
}

// settleNoAck proposes the settlement of no-ack deliveries.
func (q *Queue) settleNoAck(settled []uint64) {
	if len(settled) == 0 {
		return
	}
	q.propose(opSettle, func(e *encoder) { e.ids(settled) }, &waiter{done: func(error) {
		q.mu.Lock()
		q.noAckOut -= len(settled)
		q.mu.Unlock()
	}})
}

// heldIDs are the ids of what lc holds.
func (lc *local) heldIDs() []uint64 {
	ids := make([]uint64, len(lc.held))
	for i, h := range lc.held {
		ids[i] = h.e.Seq
	}
	return ids
}

// waiter is a proposal's caller.
type waiter struct {
	msg  *queue.Message // an enqueue's message
	done func(error)    // an enqueue's confirm
	ch   chan result    // a call's result
}

func (t *Type) open(d queue.Decl, l queue.Limits, h queue.Hooks, gid uint64, fresh bool, p *Placement) (*Queue, error) {
	st, _ := t.raftStore()
	g, err := st.Group(gid)
	if err != nil {
		return nil, err
	}
	inner, err := st.SnapshotStore(gid, 2)
	if err != nil {
		return nil, err
	}
	q := &Queue{typ: t, decl: d, hooks: h, gid: gid, pid: newPID(), group: g, logs: &floorLog{Group: g}, place: p,
		m: newMachine(configFor(l, p == nil)), limits: l, consumers: map[uint64]*local{}, waiters: map[uint64]*waiter{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), inflight: make(chan struct{}, maxInflight), lastUse: t.cfg.Now()}
	snaps := newSnapshots(q, inner, st.SnapshotDir(gid))
	q.snaps = snaps
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
	// Before NewRaft: its FSM may apply entries before it returns.
	q.early = q.earlyStores(p)
	existing, err := raft.HasExistingState(q.logs, g, snaps)
	if err != nil {
		q.closeTransport()
		return nil, err
	}
	r, err := raft.NewRaft(cfg, (*fsm)(q), q.logs, g, snaps, q.trans)
	if err != nil {
		q.closeTransport()
		q.bodies.close()
		return nil, fmt.Errorf("quorum: start group %d: %w", gid, err)
	}
	q.r = r
	q.compact.set(r, q.typ.cfg.CompactIdle)
	if p != nil {
		q.nudger.Set(r)
		t.watchLeaders(q)
	}
	if q.early {
		leads := func() bool { return r.State() == raft.Leader }
		q.logs.leads.Store(&leads)
	}
	// raft's restore is done: from now on a snapshot opened is one raft
	// sends to a replica (and body files nothing refers to go).
	snaps.start()
	if !existing {
		// A new group (or one stored as a queue whose group never
		// started, a crash in between): this node is its one voter, or
		// one of the placement's members, each of which bootstraps the
		// same configuration.
		conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: cfg.LocalID, Address: addr}}}
		if p != nil {
			conf = raft.Configuration{}
			for _, m := range p.Members {
				a := addr
				if m != t.cfg.NodeID {
					var ok bool
					if a, ok = t.cfg.Addr(m); !ok {
						t.unwatchLeaders(q)
						r.Shutdown()
						q.closeTransport()
						return nil, fmt.Errorf("quorum: group %d: no address for member %s", gid, m)
					}
				}
				conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m), Address: a})
			}
		}
		if p != nil && p.join {
			// Added to a running group: the leader gives it everything.
		} else if p != nil && fresh && p.Leader != "" && p.Leader != t.cfg.NodeID {
			// Only the first leader bootstraps a new group: a member with
			// no configuration never stands for election, so the first
			// leader wins its first election (it stands at once and again
			// until the others have their replicas open), and the others
			// learn the configuration from it. Should it not lead soon, the
			// member bootstraps the same configuration itself.
			q.bootNow = make(chan struct{})
			go q.bootstrapLater(conf)
		} else if err := r.BootstrapCluster(conf).Error(); err != nil && (p == nil || !errors.Is(err, raft.ErrCantBootstrap)) {
			// A first leader that opens its replica late (its node was
			// paused or slow to apply the record) may find the group
			// started: its members bootstrapped the same configuration
			// (bootstrapLater) and their leader reached this replica
			// between NewRaft and here. It is a member as any other then.
			t.unwatchLeaders(q)
			r.Shutdown()
			q.closeTransport()
			return nil, fmt.Errorf("quorum: bootstrap group %d: %w", gid, err)
		}
	}
	switch {
	case p == nil:
		q.elect(cfg.LocalID, addr, false)
	case fresh && p.Leader == t.cfg.NodeID:
		// The other members open their replicas as they apply the
		// queue's record: until one grants its vote, this node stands
		// again (well before their own election timeouts). Only until
		// the group has had a leader: a replica without one later (its
		// leader handed over as this node stops, or died) must not
		// stand, since a TimeoutNow deposes whoever is winning.
		go func() {
			for range 20 {
				if _, id := r.LeaderWithID(); id != "" || q.seen.Load() != nil || r.State() == raft.Shutdown {
					return
				}
				q.elect(cfg.LocalID, addr, true)
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	t.mu.Lock()
	t.queues[gid] = q
	t.known[gid] = true
	if _, asked := t.bootAsked[gid]; asked {
		delete(t.bootAsked, gid)
		q.bootstrapNow()
	}
	t.mu.Unlock()
	go q.proposer()
	// The queue's limits (they may have changed by policy), and, after a
	// restart, this node's consumers from before are gone.
	// A replica of a cluster's queue resets too when new: the node may
	// have held one before (its disk wiped, or removed and added again)
	// whose consumers the group still has.
	if !fresh || p != nil {
		q.propose(opResetNode2, func(e *encoder) { e.str(t.cfg.NodeID); e.u64(q.pid) }, nil)
	}
	if p == nil || !fresh || p.Leader == t.cfg.NodeID {
		q.proposeConfig(l)
	}
	if fresh && p == nil {
		// Declare-ok goes once the group leads, so a publish right after
		// it is taken at once. (A replicated queue's declaring node waits
		// with Sync, outside the metadata group's apply.)
		if _, err := q.call(opTick, nil); err != nil {
			q.Stop()
			return nil, err
		}
	}
	q.armIdle()
	return q, nil
}

// bootstrapLater bootstraps conf on a new group's member if no leader
// gave it a configuration within Config.BootstrapWait (its first leader
// is down, or slow), or at once when the first
// leader asks (BootstrapNow: it could not open its replica). The members
// then stand for election one at a time (cluster.Campaign, the silent
// first leader left out), instead of after raft's timeouts (5 to 10 s in
// a cluster).
func (q *Queue) bootstrapLater(conf raft.Configuration) {
	select {
	case <-time.After(q.typ.cfg.BootstrapWait):
	case <-q.bootNow:
	case <-q.done:
		return
	}
	if _, id := q.r.LeaderWithID(); id != "" {
		return
	}
	if f := q.r.GetConfiguration(); f.Error() != nil || len(f.Configuration().Servers) > 0 {
		return
	}
	if err := q.r.BootstrapCluster(conf).Error(); err != nil {
		if !errors.Is(err, raft.ErrCantBootstrap) {
			q.typ.logErr(err, "quorum queue: cannot bootstrap a replica whose first leader is silent")
		}
		return
	}
	cluster.Campaign(q.r, q.typ.cfg.NodeID, q.place.Leader, 0, cluster.CampaignStagger, q.done, q.standNow)
}

// BootstrapNow: the first leader of the new group gid could not open
// its replica, and asks its members (the server, over the cluster) not
// to wait Config.BootstrapWait for it: this node's member bootstraps the group
// now (bootstrapLater), or as soon as it opens if it has not yet. Asks
// for groups that never open here are dropped after a minute.
func (t *Type) BootstrapNow(gid uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.queues[gid]; q != nil {
		q.bootstrapNow()
		return
	}
	now := time.Now()
	for g, at := range t.bootAsked {
		if now.Sub(at) > time.Minute {
			delete(t.bootAsked, g)
		}
	}
	if t.bootAsked == nil {
		t.bootAsked = map[uint64]time.Time{}
	}
	t.bootAsked[gid] = now
}

// bootstrapNow ends bootstrapLater's wait, if it waits.
func (q *Queue) bootstrapNow() {
	if q.bootNow != nil {
		q.bootOnce.Do(func() { close(q.bootNow) })
	}
}

// closeTransport releases the group's transport (a cluster transport
// unregisters the group from the node's listener).
func (q *Queue) closeTransport() {
	if c, ok := q.trans.(io.Closer); ok {
		c.Close()
	}
}

func (q *Queue) proposeConfig(l queue.Limits) {
	c := configFor(l, q.fifoRules())
	q.propose(opConfig, func(e *encoder) {
		e.i64(c.TTL)
		e.i64(c.MaxLen)
		e.i64(c.MaxBytes)
		e.u8(uint8(c.Overflow))
		e.i64(c.DeliveryLimit)
		e.u8(b2u(c.SAC))
	}, nil)
}

// fifoRules reports whether the queue's configs select fifoRules: a
// one-voter group's always; a replicated group's once every member runs
// a build that applies them (Config.Features), since every replica must
// apply the log alike (an earlier build takes the bit for another
// x-overflow).
func (q *Queue) fifoRules() bool {
	return q.membersHave(FeatureFifoRules)
}

// Features a replicated group uses only once every member has them
// (Config.Features).
const (
	// FeatureFifoRules: rabbit_fifo's length limits and exclusive flag
	// (config's fifoRules bit).
	FeatureFifoRules = "quorum.fifo-rules"
	// FeatureKeepOnLeave: a replica that leaves its group lets its
	// consumers keep what they were delivered (opLeave).
	FeatureKeepOnLeave = "quorum.keep-on-leave"
)

// membersHave reports whether every member of the queue's group has
// feature: a one-voter group's always.
func (q *Queue) membersHave(feature string) bool {
	return q.place == nil || q.typ.cfg.Features == nil || q.typ.cfg.Features(feature, q.place.Members)
}

// RefreshConfig proposes the queue's config again if this replica leads
// its group: Config.Features may say yes now.
func (q *Queue) RefreshConfig() {
	if !q.Leads() {
		return
	}
	q.mu.Lock()
	l := q.limits
	q.mu.Unlock()
	q.proposeConfig(l)
}

// elect makes a group whose one voter is this node (or, many, when this
// node is to lead a new replicated group) stand for election now, instead
// of after a heartbeat timeout: raft's TimeoutNow, sent to itself over
// its own transport. Other groups wait for an election as raft does.
func (q *Queue) elect(id raft.ServerID, addr raft.ServerAddress, many bool) {
	f := q.r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	srv := f.Configuration().Servers
	if !many && (len(srv) != 1 || srv[0].ID != id || srv[0].Suffrage != raft.Voter) {
		return
	}
	q.typ.logErr(q.standNow(), "quorum queue: cannot call an election")
}

// standNow sends this replica a TimeoutNow: it stands for election at
// once (an in-memory transport is connected to itself first).
func (q *Queue) standNow() error {
	if it, ok := q.trans.(*raft.InmemTransport); ok {
		it.Connect(it.LocalAddr(), it)
	}
	return cluster.TimeoutNow(q.trans, q.typ.cfg.NodeID)
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

// proposer sends the inbox as one entry whenever it has anything. On the
// leader, the entry is appended and a short-lived goroutine per entry
// waits for it to be applied (at most maxInflight at a time); on another
// member it is forwarded to the leader (Config.Forward), one at a time so
// that entries keep their order. An entry whose outcome is unknown (the
// leader changed) is sent again: the machine applies a batch once.
//
// What no leader took by its deadline is failed (failed): its waiters
// are told, and its commands that must still happen wait in retry, sent
// again ahead of newer entries (resend) once a leader takes them.
func (q *Queue) proposer() {
	defer close(q.done)
	defer q.flights.Wait()
	var again <-chan time.Time // set while entries wait in retry
	for {
		select {
		case <-q.wake:
		case <-again:
		}
		for {
			q.pmu.Lock()
			n, closing, leaving := q.count, q.closing, q.leaving
			resend := len(q.retry) > 0 && (!closing || leaving)
			if n == 0 && !resend {
				q.pmu.Unlock()
				if closing {
					return
				}
				break
			}
			var b batch
			if n > 0 {
				data := q.inbox.b
				b = batch{data: data, first: q.seq - uint64(n) + 1, last: q.seq}
				q.inbox.b, q.count = nil, 0
				q.pmu.Unlock()
				hdr := encoder{b: data[:0]}
				q.header(&hdr, n)
				b.deadline = time.Now().Add(leaderWait)
			} else {
				q.pmu.Unlock()
			}
			if resend && !q.resend() {
				if leaving {
					// Removed from the group, and none of its members
					// takes them: they go, as what a stopping replica
					// has not sent does.
					q.pmu.Lock()
					q.retry = nil
					q.pmu.Unlock()
				}
				if n == 0 {
					break // no leader yet: again after resendWait, or with the next proposal
				}
			}
			if n > 0 {
				if err := q.send(b, false); err != nil {
					q.failed(b, err)
				}
			}
		}
		again = nil
		q.pmu.Lock()
		if len(q.retry) > 0 {
			again = time.After(resendWait)
		}
		q.pmu.Unlock()
	}
}

// resendWait bounds each try of resend while the group has no leader.
const resendWait = time.Second

// failed ends b, which no leader took by its deadline (or that failed
// with err otherwise): its waiters are told err (a publish is nacked,
// a get or an attach fails), and what of it must still happen
// (resendable) waits in retry, to be sent again once a leader takes
// entries. Without that, settlements lost while a follower cannot reach
// its leader for leaderWait would leave messages checked out for good
// to consumers that settled them, or never had them (their unassign,
// their cancel or detach lost too).
func (q *Queue) failed(b batch, err error) {
	q.fail(b.first, b.last, err)
	if !errors.Is(err, ErrNoLeader) {
		return // stopped, or refused for good
	}
	q.leaderless.Add(1)
	data := resendable(b.data)
	if data == nil {
		return
	}
	q.pmu.Lock()
	if q.closing && !q.leaving {
		q.pmu.Unlock()
		return
	}
	q.retry = append(q.retry, batch{data: data, first: b.first, last: b.last})
	q.pmu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// resend sends the batches in retry, oldest first, each within
// resendWait of its try; it reports whether it sent them all.
func (q *Queue) resend() bool {
	for {
		q.pmu.Lock()
		if len(q.retry) == 0 {
			q.pmu.Unlock()
			return true
		}
		b := q.retry[0]
		q.pmu.Unlock()
		b.deadline = time.Now().Add(resendWait)
		if err := q.send(b, false); err != nil {
			return false
		}
		q.pmu.Lock()
		q.retry = q.retry[1:]
		q.pmu.Unlock()
	}
}

// resendable is what of a failed batch is sent again: its commands
// that change what is checked out to whom, or the queue's settings
// (settle, return, discard, unassign, unblock, cancel, detach, leave,
// config, the resets). Its enqueues (nacked), gets, attaches, purges
// and ticks (their callers were told it failed) become ticks with the
// same sequence numbers, so that the batch keeps its name (its first
// command's number) and one a leader applied after all (its outcome was
// unknown) is not applied twice. nil: nothing to send again.
func resendable(data []byte) []byte {
	offs, err := commandSpans(data)
	if err != nil {
		return nil
	}
	out := make([]byte, 0, len(data))
	out = append(out, data[:headerLen]...)
	keep := false
	for i := 0; i+1 < len(offs); i++ {
		c := data[offs[i]:offs[i+1]]
		switch c[0] {
		case opEnqueue, opAttach, opGet, opGet2, opPurge, opTick:
			out = append(out, opTick)
			out = append(out, c[1:9]...)
		default:
			keep = true
			out = append(out, c...)
		}
	}
	if !keep {
		return nil
	}
	return out
}

// header writes an entry's header for n commands of this proposer: the
// batch version, the leader clock, the proposer id (headerLen bytes).
func (q *Queue) header(e *encoder, n int) {
	e.u8(batchVersion)
	e.i64(q.typ.cfg.Now().UnixMilli())
	e.u64(q.pid)
	e.u32(uint32(n))
}

// batch is one entry on its way.
type batch struct {
	data        []byte
	first, last uint64
	deadline    time.Time
}

// lateDelivery: an entry applied this long after the leader appended it
// delivers nothing (below the 3 s in which the cluster takes a silent
// node for down).
const lateDelivery = 1500 * time.Millisecond

// maxInflight bounds the entries a queue has proposed and not yet seen
// applied.
const maxInflight = 4

// leaderWait bounds how long a proposal waits for the group to lead.
const leaderWait = 10 * time.Second

// forwardTimeout bounds one forwarded entry.
const forwardTimeout = 5 * time.Second

// send gets b appended by the leader: here, with its outcome awaited by a
// goroutine of its own (wait: in this call), or on the leader's node. It
// returns an error once b cannot be sent by its deadline.
func (q *Queue) send(b batch, wait bool) error {
	for {
		q.pmu.Lock()
		closing := q.closing && !q.leaving
		leaving := q.leaving
		q.pmu.Unlock()
		state := q.r.State()
		if state == raft.Shutdown {
			return errClosed
		}
		if state == raft.Leader {
			q.inflight <- struct{}{}
			f := q.r.Apply(b.data, 0)
			if wait {
				err := f.Error()
				<-q.inflight
				if err == nil || !retriable(err) {
					return err
				}
			} else {
				q.flights.Add(1)
				go func() {
					defer q.flights.Done()
					err := f.Error()
					<-q.inflight
					if err != nil && retriable(err) {
						err = q.send(b, true)
					}
					if err != nil {
						q.failed(b, err)
					}
				}()
				return nil
			}
		} else {
			ctx, cancel := q.forwardCtx()
			if _, id := q.r.LeaderWithID(); id != "" && string(id) != q.typ.cfg.NodeID && q.typ.cfg.Forward != nil {
				resp, err := q.typ.cfg.Forward(ctx, string(id), q.gid, b.data)
				if err == nil {
					cancel()
					q.forwarded(b, resp)
					return nil
				}
			}
			cancel()
			if leaving {
				// Removed from the group, this replica may hear of no
				// leader any more (or of one that is gone): the
				// members it knew are asked.
				if resp, err := q.forwardLeft(b.data, time.Now()); err == nil {
					q.forwarded(b, resp)
					return nil
				}
			}
		}
		if closing || time.Now().After(b.deadline) {
			// Stopping: what the leader did not take goes unanswered
			// by it (shutdown fails it).
			return ErrNoLeader
		}
		select {
		case <-q.r.LeaderCh():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// retriable reports whether an entry that failed with err may be sent
// again: it was not appended, or its outcome is unknown.
func retriable(err error) bool {
	return errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, raft.ErrEnqueueTimeout) || errors.Is(err, raft.ErrLeadershipTransferInProgress)
}

// Forwarded applies an entry another member forwarded: this node must
// lead the group. It returns once the entry is committed and applied
// here, with the sequence numbers of the proposer's enqueues that were
// refused (reject-publish), encoded.
func (t *Type) Forwarded(group uint64, data []byte) ([]byte, error) {
	t.mu.Lock()
	q := t.queues[group]
	t.mu.Unlock()
	if q == nil {
		return nil, ErrNoGroup
	}
	if q.r.State() != raft.Leader {
		return nil, raft.ErrNotLeader
	}
	f := q.r.Apply(data, forwardTimeout)
	if err := f.Error(); err != nil {
		return nil, err
	}
	e := &encoder{}
	fr, _ := f.Response().(forwardResult)
	fr.encode(e)
	return e.b, nil
}

// forwarded answers the publishers and the gets of a forwarded entry the
// leader applied: committed on a majority, so confirmed now rather than
// when this member applies it (it may never: it may be leaving the
// group). The other proposals' results (a purge's count, a consumer's
// attach) come from this member's own apply.
func (q *Queue) forwarded(b batch, resp []byte) {
	fr, err := decodeForwardResult(resp)
	if err != nil {
		return
	}
	var ws []*waiter
	var rs []result
	q.pmu.Lock()
	for s := b.first; s <= b.last; s++ {
		if w := q.waiters[s]; w != nil && w.msg != nil {
			delete(q.waiters, s)
			ws = append(ws, w)
			var err error
			if slices.Contains(fr.refused, s) {
				err = ErrRejected
			}
			rs = append(rs, result{err: err})
		}
	}
	for _, r := range fr.gets {
		if w := q.waiters[r.seq]; w != nil && r.seq >= b.first && r.seq <= b.last {
			delete(q.waiters, r.seq)
			ws = append(ws, w)
			rs = append(rs, r)
		}
	}
	q.pmu.Unlock()
	for i, w := range ws {
		w.answer(rs[i])
	}
}

// ErrNoGroup: this node has no open group of that id.
var ErrNoGroup = errors.New("quorum: no such group here")

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
	if q.early {
		// raft counts a leader's early-stored entry as its own copy at
		// once: nothing here acts on it (confirms, delivers) before it is
		// durable on this node too.
		if err := q.group.WaitDurable(l.Index); err != nil {
			q.typ.logErr(err, "quorum queue: an entry is not durable here: its effects are not applied on this node")
			return nil
		}
	}
	var fx effects
	var back map[uint64][]uint64 // refused deliveries by consumer
	var settled []uint64
	replayed := l.Index <= q.replay
	// An entry applied long after the leader appended it (this replica
	// was paused or cut off) does not deliver: by now the leader may have
	// taken this node for down and given its consumers' messages to
	// others. Its deliveries go back in place, and the consumers ask
	// again, in entries of now.
	late := q.place != nil && !l.AppendedAt.IsZero() && time.Since(l.AppendedAt) > lateDelivery
	var unblock, block []uint64
	q.mu.Lock()
	q.m.apply(l.Index, l.Data, q.lookup, &fx)
	if !replayed && !q.deleted {
		for _, d := range fx.deliver {
			lc := q.consumers[d.consumer]
			if lc == nil {
				if q.ownKey(d.consumer) {
					// Checked out to a consumer of this replica removed
					// here (a cancel or a detach not applied yet, or
					// applied by this very entry, after an enqueue of its
					// batch; or one whose attach is applied after its
					// cancel was proposed): it never reaches a channel,
					// so it goes back. (A detach applied first gave it
					// back already: the machine ignores this then.)
					back = addBack(back, d.consumer, d.e.Seq)
				}
				continue // another node's, or detached here: its detach returns it
			}
			if late {
				if back[lc.key] == nil && !lc.blocked {
					unblock = append(unblock, lc.key)
				}
				back = addBack(back, lc.key, d.e.Seq)
				continue
			}
			if len(lc.held) > 0 {
				lc.held = append(lc.held, heldDelivery{d.e, d.m}) // behind what it refused
				continue
			}
			if lc.blocked {
				// It refused for want of credit: what it is given goes
				// back until a Kick.
				back = addBack(back, lc.key, d.e.Seq)
				continue
			}
			e := d.e
			if e.Msg == nil {
				e.Msg = q.body(d.m)
			}
			if !q.offer(lc, e, nil, &settled) {
				if !busy(lc.c) {
					// For want of credit (its channel's): back, for
					// another consumer to take.
					back = addBack(back, lc.key, e.Seq)
					lc.blocked = true
					continue
				}
				lc.held = append(lc.held, heldDelivery{d.e, d.m})
				if !lc.bounded() && !lc.blocked {
					lc.blocked = true
					block = append(block, lc.key)
				}
			}
		}
	}
	// After the deliveries: the entry that applies a cancel may have
	// checked messages out to the consumer before it (an enqueue of the
	// same proposer's batch); those go back above.
	for k := range q.cancelling {
		if c := q.m.consumer(k); c != nil && c.cancelled || c == nil && !q.attaching[k] {
			delete(q.cancelling, k) // its cancel is applied
		}
	}
	// Dead-lettered by the leader alone, as rabbit_fifo's effects are
	// (at-most-once): every replica applies the entry, and each
	// republishing it put one copy per member in the dead-letter queue.
	// (q.r is not set yet while NewRaft runs: the nudger's raft is
	// read safely; a group of one voter is always its own leader.)
	var dead []queue.Dead
	if !replayed && q.limits.HasDLX && q.hooks.DeadLetter != nil && (q.place == nil || q.nudger.Leads()) {
		for _, x := range fx.dead {
			dead = append(dead, queue.Dead{Msg: q.bodyOf(x.m), Reason: x.reason, Exchange: q.limits.DeadLetterExchange,
				RoutingKey: q.limits.DeadLetterRoutingKey, HasRoutingKey: q.limits.HasDLRK})
		}
	}
	for _, r := range fx.results {
		if r.entry == nil || r.entry.Msg != nil {
			continue
		}
		// Another proposer's get: for its answer, if this replica leads
		// (Forwarded).
		if r.pid == q.pid || r.get && q.r.State() == raft.Leader {
			r.entry.Msg = q.body(r.m)
		}
	}
	if !replayed {
		q.armExpiry(fx.expiry)
	}
	// A consumer the machine detached that is still here was not
	// cancelled by this node (RemoveConsumer and Leave drop theirs
	// first): a leader took this node for down.
	var live []uint64
	if !replayed && !q.deleted && !q.stopped {
		for _, k := range fx.detached {
			if lc := q.consumers[k]; lc != nil {
				lc.held, lc.blocked = nil, false // the detach gave it back
				live = append(live, k)
			}
		}
	}
	held := q.m.readyN + len(q.m.out)
	if q.m.readyN == 0 {
		q.reader.reset() // nothing left to read back for now
	}
	// Proposed before mu is released: a Kick (which clears blocked
	// under mu, then proposes its opUnblock) must come after the
	// opUnassign that blocks the consumer, or the consumer stays blocked
	// with nothing left to unblock it. propose takes only pmu, a leaf.
	for key, ids := range back {
		q.propose(opUnassign, func(e *encoder) { e.u64(key); e.ids(ids) }, nil)
	}
	for _, key := range block {
		q.propose(opUnassign, func(e *encoder) { e.u64(key); e.ids(nil) }, nil)
	}
	for _, key := range unblock {
		q.propose(opUnblock, func(e *encoder) { e.u64(key) }, nil)
	}
	q.mu.Unlock()
	if !replayed {
		q.nudger.Applied(l.Index)
	}
	q.compact.applied(len(l.Data), held)

	for _, k := range live {
		go q.reattach(k)
	}
	if fx.used && !replayed {
		// A use on any node (its attach, cancel, detach or get is
		// applied here too) keeps every replica's x-expires timer back,
		// the declaring node's among them, which deletes the queue.
		q.use()
	}
	q.settleNoAck(settled)
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
	// For a forwarded entry (Type.Forwarded on the leader): which of the
	// proposer's enqueues were refused, so that it confirms the others at
	// once, and its gets' results.
	var fr forwardResult
	for _, r := range fx.results {
		switch {
		case r.pid == q.pid:
		case errors.Is(r.err, ErrRejected):
			fr.refused = append(fr.refused, r.seq)
		case r.get:
			fr.gets = append(fr.gets, r)
		}
	}
	if fr.refused == nil && fr.gets == nil {
		return nil // nearly every entry: no allocation for the response
	}
	return fr
}

// forwardResult is what applying a forwarded entry tells its proposer.
//
// A basic.get is answered from it, not from the proposer's own apply:
// the proposer may never apply the entry (its replica left the group
// meanwhile, delete_member), and a no-ack get's message is gone from the
// queue once the leader applied it.
type forwardResult struct {
	refused []uint64 // enqueues reject-publish refused
	gets    []result
}

// encode writes fr as Forwarded answers: the refused sequence numbers
// (all an earlier build reads), then the gets. A get whose body this
// replica could not read is left out: its proposer answers it from its
// own apply, as before.
func (fr forwardResult) encode(e *encoder) {
	e.ids(fr.refused)
	gets := slices.DeleteFunc(slices.Clone(fr.gets), func(r result) bool { return r.entry != nil && r.entry.Msg == nil })
	e.u32(uint32(len(gets)))
	for _, r := range gets {
		e.u64(r.seq)
		e.u64(uint64(r.n))
		if r.entry == nil {
			e.u8(0)
			continue
		}
		x := r.entry
		e.u8(1)
		e.u64(x.Seq)
		e.u8(b2u(x.Redelivered))
		e.u32(x.Returns)
		e.i64(x.Expires)
		e.str(x.Msg.Exchange)
		e.str(x.Msg.RoutingKey)
		e.bytes(x.Msg.Props)
		e.bytes(x.Msg.Body)
	}
}

// decodeForwardResult reads a Forwarded answer (an earlier build's has
// no gets).
func decodeForwardResult(b []byte) (forwardResult, error) {
	d := &decoder{b: b}
	fr := forwardResult{refused: d.ids()}
	if d.err != nil || len(d.b) == 0 {
		return fr, d.err
	}
	n := int(d.u32())
	for i := 0; i < n && d.err == nil; i++ {
		r := result{get: true, seq: d.u64(), n: int(d.u64())}
		if d.u8() == 1 {
			x := &queue.Entry{Seq: d.u64(), Redelivered: d.u8() == 1, Returns: d.u32(), Expires: d.i64()}
			ex, rk, props, body := d.str(), d.str(), d.bytes(), d.bytes()
			m := queue.NewStored(ex, rk, props, body, 0)
			m.Persistent = amqp.PropDeliveryMode(props) == 2
			x.Msg = m
			r.entry = x
		}
		fr.gets = append(fr.gets, r)
	}
	return fr, d.err
}

// ownKey reports whether key is a consumer key of this replica's
// incarnation (AddConsumer, reattach). q.mu is held.
func (q *Queue) ownKey(key uint64) bool {
	n := key - q.pid // the keys are q.pid plus 1, 2, ... (wrapping)
	return n >= 1 && n <= q.nextKey
}

// earlyStores reports whether the group's leader may store its entries
// early (floorLog.StoreLogs). raft then takes the leader's copy as stored
// before it is durable, so it may count an entry committed with only one
// durable copy, a follower's. Two things keep that from mattering: no
// replica acts on an entry before it is durable on the leader (its own
// FSM waits for the sync, Apply; the followers are told of a commit
// index no later than the leader's durable one, the transport's commit
// limit), so an entry a leader crash loses was confirmed and applied
// nowhere, and raft may overwrite it as any uncommitted entry; and once
// it is durable on the leader it is on a majority. So early stores are
// on for a group of one voter on this node alone (nothing to tell), or a
// group whose transport limits the commit index it sends
// (cluster.GroupTransport); else off (the in-memory transports of
// tests).
func (q *Queue) earlyStores(p *Placement) bool {
	if p == nil && q.typ.cfg.Transport == nil {
		return true
	}
	lt, ok := q.trans.(interface{ LimitCommit(func() uint64) })
	if !ok {
		return false
	}
	lt.LimitCommit(q.group.Durable)
	return true
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

// body reads m's message back from its log entry (or its body file). A
// message whose body cannot be read is delivered empty, with the error
// logged.
func (q *Queue) body(m *msg) *queue.Message {
	if m.body != nil {
		return m.body
	}
	b, err := q.stored(m)
	if err != nil {
		q.typ.logErr(err, "cannot read a quorum queue message")
		return &queue.Message{}
	}
	return b
}

// readBody reads the message of the command at pos of log entry idx
// (without q.reader: for a caller that does not hold q.mu).
func (q *Queue) readBody(idx uint64, pos uint32) (*queue.Message, error) {
	var r entryReader
	return r.message(q, idx, pos)
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
	case opDetach, opUnblock, opCancel:
		d.u64()
	case opSettle, opReturn, opReturnLast, opDiscard:
		d.ids()
	case opUnassign, opLeave:
		d.u64()
		d.ids()
	case opGet:
		d.u8()
	case opGet2:
		d.u8()
		d.str()
	case opReturnGets:
		d.str()
	case opConfig:
		d.i64()
		d.i64()
		d.i64()
		d.u8()
		d.i64()
		d.u8()
	case opResetNode:
		d.str()
	case opResetNode2:
		d.str()
		d.u64()
	}
}

// floorLog keeps the entries live messages are in: raft's compaction
// after a snapshot deletes only below the snapshot's floor.
type floorLog struct {
	*raftstore.Group
	floor atomic.Uint64
	// leads, when set (early stores: Queue.early), tells whether the
	// group leads now: a leader's own entries are stored early.
	leads atomic.Pointer[func() bool]
}

// StoreLogs implements raft.LogStore: a leader's entries (raft's
// dispatchLogs, on the main loop, which stores before it sends to the
// followers) are handed on once written, before their sync, so that the
// leader's sync and its followers' run at once instead of one after the
// other; a follower's are stored synced, as raft requires before it
// answers. What keeps it safe is Queue.early's.
func (l *floorLog) StoreLogs(logs []*raft.Log) error {
	if f := l.leads.Load(); f != nil && (*f)() {
		return l.Group.StoreLogsEarly(logs)
	}
	return l.Group.StoreLogs(logs)
}

func (l *floorLog) setFloor(f uint64) {
	for {
		old := l.floor.Load()
		if f <= old || l.floor.CompareAndSwap(old, f) {
			return
		}
	}
}

// DeleteRange implements raft.LogStore. Only compaction (a range from the
// front, short of the last entry) is held at the floor; raft's removal
// of a follower's conflicting suffix always goes through.
func (l *floorLog) DeleteRange(min, max uint64) error {
	if last, err := l.Group.LastIndex(); err == nil && max >= last {
		return l.Group.DeleteRange(min, max)
	}
	if f := l.floor.Load(); max >= f {
		if f == 0 || f-1 < min {
			return nil
		}
		max = f - 1
	}
	return l.Group.DeleteRange(min, max)
}
