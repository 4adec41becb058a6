package quorum

import (
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

// machine is a quorum queue's state machine, in the spirit of RabbitMQ's
// rabbit_fifo: every replica applies the same log entries to it and gets
// the same state. apply reads no clock (the leader's time is in each
// entry), iterates no map, draws no random number. What it decides for
// this node (deliveries to its consumers, results for its proposals, dead
// letters) comes back as effects; the queue acts on them.
//
// Message bodies stay in the Raft log: a message is its place there
// (index, position in the batch) and a few counters. body is a cache of
// the body (the publisher's message on the leader), kept within a budget
// and never part of the state: snapshots carry none. A message that came
// inline with a snapshot this replica restored has its body in a body
// file instead of the log (msg.ref).
type machine struct {
	cfg       config
	returns   deque // returned messages, served first (as rabbit_fifo's returns)
	ready     deque // messages in enqueue order
	out       map[uint64]*msg
	consumers []*consumer // in attach order
	enqueuers map[uint64]*enqueuer
	nextID    uint64
	service   uint64 // service counter: round robin among equals
	readyN    int
	readyB    int64
	now       int64 // the entry's leader clock, Unix ms
	// rejecting: publishes are refused (reject-publish under fifoRules):
	// from when the queue went over its limit until it is down to 80% of
	// it.
	rejecting bool

	// Not state: the body cache's use.
	cachedN int
	cachedB int64
	budgetN int
	budgetB int64
}

// config is what of the queue's limits the machine applies.
type config struct {
	TTL           int64          // ms; -1 none
	MaxLen        int64          // -1 none
	MaxBytes      int64          // -1 none
	Overflow      queue.Overflow // with fifoRules
	DeliveryLimit int64          // -1 none
	SAC           bool
}

// fifoRules, set in a config's overflow byte (opConfig, snapshots),
// selects rules of RabbitMQ 3.10's rabbit_fifo that earlier builds did
// not follow; this build proposes it:
//   - the length limits are applied after every entry, not only after an
//     enqueue: a requeue that takes the queue over its limit, or a lower
//     limit, drops the head at once; heads dropped together are
//     dead-lettered newest first (rabbit_fifo's effects are in that order);
//   - reject-publish takes the message that takes the queue over its
//     limit and refuses publishes from then on until the queue is down to
//     80% of it (rabbit_fifo's soft limit);
//   - reject-publish-dlx, which quorum queues do not have, is drop-head;
//   - basic.consume's exclusive flag is ignored.
//
// A config of before (the opConfig entries and snapshots of earlier
// builds) has it clear and keeps the rules its entries were applied
// with: a publish refused then is refused when its log is applied again.
const fifoRules queue.Overflow = 0x80

// overflow is the x-overflow behaviour, without fifoRules.
func (c config) overflow() queue.Overflow { return c.Overflow &^ fifoRules }

// rules reports whether c has fifoRules.
func (c config) rules() bool { return c.Overflow&fifoRules != 0 }

// configFor is the machine's config for limits l, with fifoRules or (not
// rules) as earlier builds made it.
func configFor(l queue.Limits, rules bool) config {
	o := l.Overflow
	if rules {
		if o == queue.RejectPublishDLX {
			o = queue.DropHead // RabbitMQ logs a warning and keeps the default
		}
		o |= fifoRules
	}
	c := config{TTL: -1, MaxLen: l.MaxLength, MaxBytes: l.MaxLengthBytes, Overflow: o, DeliveryLimit: -1, SAC: l.SingleActive}
	if l.HasMessageTTL {
		c.TTL = l.MessageTTL.Milliseconds()
	}
	if l.HasDeliveryLimit {
		c.DeliveryLimit = l.DeliveryLimit
	}
	return c
}

// msg is one message of the queue.
type msg struct {
	id      uint64 // the queue's own, rising: Entry.Seq
	idx     uint64 // the Raft log entry with its enqueue
	pos     uint32 // its command's place in that entry
	size    uint32 // body bytes
	expires int64  // Unix ms; 0 never
	count   uint32 // returns: x-delivery-count
	owner   uint64 // the consumer key it is checked out to; 0 ready, getOwner for basic.get
	body    *queue.Message
	// ref: the body is in a body file of this replica, not in its log (a
	// message that came inline with a snapshot it restored; bodies.go).
	// Where a body is kept is not state: replicas differ.
	ref *bodyRef
}

// getOwner owns what basic.get checked out before gets named their node
// (opGet, in logs and snapshots of before).
const getOwner = ^uint64(0)

// getOwnerOf owns what basic.get checked out on node (opGet2): a key of
// its own per node, the same on every replica, in the top half of the
// key space below getOwner. Consumer keys are a random proposer id plus
// a count: a clash is as unlikely as two proposers' ids clashing.
func getOwnerOf(node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	return 1<<63 | h.Sum64()>>2
}

type consumer struct {
	key       uint64
	node      string
	pid       uint64 // the proposer that attached it: that queue's incarnation on node
	prefetch  uint32 // 0 unlimited
	priority  int32
	exclusive bool
	out       int
	blocked   bool
	served    uint64
	// cancelled: basic.cancel came (opCancel); it takes nothing more and
	// goes once it holds nothing (release).
	cancelled bool
}

func (c *consumer) canTake() bool {
	return !c.blocked && !c.cancelled && (c.prefetch == 0 || c.out < int(c.prefetch))
}

// enqueuer is what the machine remembers of a proposer: the batches of it
// applied last, so that a batch sent again (its outcome was unknown to
// the proposer, a leader change) is applied once.
type enqueuer struct {
	seq     uint64   // highest sequence number applied
	last    uint64   // log index of its last batch, for eviction
	batches []uint64 // the first sequence numbers of its last maxBatches batches
}

// maxEnqueuers bounds the dedup table; the one seen longest ago goes.
const maxEnqueuers = 256

// maxBatches is how many of a proposer's batches are remembered: more
// than it has in flight (maxInflight) while one is sent again.
const maxBatches = 64

func (e *enqueuer) applied(first uint64) bool { return slices.Contains(e.batches, first) }

// Errors a proposal's result carries.
var (
	// ErrRejected: reject-publish refused the message (the queue is full).
	ErrRejected = errors.New("quorum: queue full, publish rejected")
	errUnknown  = errors.New("quorum: unknown command")
)

// effects are what applying entries decided for this node.
type effects struct {
	deliver []delivery
	results []result
	dead    []dead
	// detached are the consumers this entry detached (by their own
	// cancel, a reset or a leader's DetachDown).
	detached []uint64
	// expiry is the earliest head expiry after the apply (0 none), for the
	// leader's timer.
	expiry int64
	// used: a consumer came or went, or a basic.get was served, on any
	// node: a use of the queue for x-expires (every replica times it).
	used bool
}

type delivery struct {
	consumer uint64
	m        *msg
	e        queue.Entry
}

type result struct {
	pid, seq uint64
	err      error
	n        int
	entry    *queue.Entry
	m        *msg
	get      bool // a basic.get's (entry nil: empty)
}

type dead struct {
	m      *msg
	reason queue.Reason
}

func newMachine(cfg config) *machine {
	return &machine{cfg: cfg, out: map[uint64]*msg{}, enqueuers: map[uint64]*enqueuer{}, budgetN: 1 << 14, budgetB: 64 << 20}
}

// lookup finds the publisher's own message on the proposing node, so the
// leader keeps the message it was handed instead of a decoded copy.
type lookup func(pid, seq uint64) *queue.Message

// apply applies one log entry at index idx. A batch that does not decode
// is skipped whole (every replica skips it alike).
func (s *machine) apply(idx uint64, data []byte, local lookup, fx *effects) {
	d := &decoder{b: data}
	if d.u8() != batchVersion {
		return
	}
	now := d.i64()
	if now > s.now {
		s.now = now // the clock never goes back, whatever leaders think
	}
	pid := d.u64()
	n := int(d.u32())
	if n > 0 && len(d.b) >= 9 {
		// A batch sent again after an unknown outcome is applied once:
		// batches are named by their first command's sequence number.
		first := beUint64(d.b[1:9])
		if e := s.enqueuers[pid]; e != nil && e.applied(first) {
			return
		}
		s.seen(pid, first, idx)
	}
	for pos := 0; pos < n && d.err == nil; pos++ {
		op := d.u8()
		seq := d.u64()
		s.command(op, pid, seq, idx, uint32(pos), d, local, fx)
	}
	s.expireHeads(fx)
	s.checkout(fx)
	if s.cfg.rules() {
		// Whatever the commands did (a requeue, a lower limit), after
		// the consumers took what they could.
		s.limit(fx)
	}
	fx.expiry = s.headExpiry()
}

func (s *machine) command(op uint8, pid, seq, idx uint64, pos uint32, d *decoder, local lookup, fx *effects) {
	res := func(r result) {
		r.pid, r.seq = pid, seq
		fx.results = append(fx.results, r)
	}
	switch op {
	case opEnqueue:
		ex, rk, props, body := d.str(), d.str(), d.bytes(), d.bytes()
		if d.err != nil {
			return
		}
		refuse := s.rejecting
		if !s.cfg.rules() {
			refuse = s.full(len(body)) && s.cfg.Overflow != queue.DropHead
		}
		if refuse {
			res(result{err: ErrRejected})
			return
		}
		var m *queue.Message
		if local != nil {
			m = local(pid, seq)
		}
		if m == nil {
			m = queue.NewStored(ex, rk, props, body, 0)
			m.Persistent = amqp.PropDeliveryMode(props) == 2
		}
		s.nextID++
		x := &msg{id: s.nextID, idx: idx, pos: pos, size: uint32(len(body)), expires: s.expiryFor(m)}
		s.cache(x, m)
		s.ready.pushBack(x)
		s.readyN++
		s.readyB += int64(x.size)
		s.checkout(fx) // a consumer may take it before a limit or TTL 0 drops it
		if s.cfg.rules() {
			s.limit(fx)
		}
		for !s.cfg.rules() && s.cfg.Overflow == queue.DropHead && s.over() {
			h := s.pop()
			if h == nil {
				break
			}
			fx.dead = append(fx.dead, dead{h, queue.MaxLen})
			s.forget(h)
		}
		res(result{})
	case opAttach:
		key, node, prefetch, prio, excl := d.u64(), d.str(), d.u32(), int32(d.u32()), d.u8() == 1
		if d.err != nil {
			return
		}
		if s.consumer(key) != nil {
			res(result{})
			return
		}
		if s.cfg.rules() {
			excl = false // rabbit_fifo ignores basic.consume's exclusive flag
		} else if err := s.exclusiveUse(excl); err != nil {
			res(result{err: err})
			return
		}
		s.consumers = append(s.consumers, &consumer{key: key, node: node, pid: pid, prefetch: prefetch, priority: prio, exclusive: excl})
		fx.used = true
		res(result{})
	case opDetach:
		key := d.u64()
		s.detach(key, fx)
		fx.used = true
		res(result{})
	case opCancel:
		key := d.u64()
		fx.used = true
		if c := s.consumer(key); c != nil {
			if c.out == 0 {
				s.detach(key, fx)
			} else {
				c.cancelled = true
			}
		}
		res(result{})
	case opLeave:
		key, ids := d.u64(), d.ids()
		if d.err != nil {
			return
		}
		c := s.consumer(key)
		if c == nil {
			res(result{})
			return
		}
		keep := make(map[uint64]bool, len(ids)) // looked up only
		for _, id := range ids {
			keep[id] = true
		}
		for _, m := range s.ownedBy(key) {
			if !keep[m.id] {
				s.release(m)
				s.giveBack(m, fx)
			}
		}
		if c.out <= 0 {
			s.detach(key, fx)
		} else {
			c.cancelled = true
		}
		res(result{})
	case opSettle, opReturn, opReturnLast, opDiscard:
		ids := d.ids()
		for _, id := range ids {
			m := s.out[id]
			if m == nil {
				continue // settled already (a retried or duplicate settle)
			}
			s.release(m)
			switch op {
			case opSettle:
				s.forget(m)
			case opReturn:
				s.giveBack(m, fx)
			case opReturnLast:
				s.giveBackLast(m, fx)
			case opDiscard:
				fx.dead = append(fx.dead, dead{m, queue.Rejected})
				s.forget(m)
			}
		}
		res(result{})
	case opUnassign:
		key, ids := d.u64(), d.ids()
		if c := s.consumer(key); c != nil {
			c.blocked = true
		}
		for i := len(ids) - 1; i >= 0; i-- {
			m := s.out[ids[i]]
			if m == nil || m.owner != key {
				continue
			}
			s.release(m)
			// Back to its place: a returned one ahead of the returns,
			// another ahead of the messages.
			if m.count > 0 {
				s.returns.pushFront(m)
			} else {
				s.ready.pushFront(m)
			}
			s.readyN++
			s.readyB += int64(m.size)
		}
		res(result{})
	case opUnblock:
		if c := s.consumer(d.u64()); c != nil {
			c.blocked = false
		}
		res(result{})
	case opGet, opGet2:
		fx.used = true
		noAck := d.u8() == 1
		owner := getOwner
		if op == opGet2 {
			owner = getOwnerOf(d.str())
		}
		if d.err != nil {
			return
		}
		s.expireHeads(fx)
		m := s.pop()
		if m == nil {
			res(result{get: true})
			return
		}
		e := s.entry(m)
		if noAck {
			s.forget(m)
		} else {
			m.owner = owner
			s.out[m.id] = m
		}
		res(result{get: true, entry: &e, m: m, n: s.readyN})
	case opPurge:
		n := s.readyN
		for m := s.pop(); m != nil; m = s.pop() {
			s.forget(m)
		}
		res(result{n: n})
	case opTick:
		res(result{})
	case opConfig:
		var c config
		c.TTL, c.MaxLen, c.MaxBytes = d.i64(), d.i64(), d.i64()
		c.Overflow = queue.Overflow(d.u8())
		c.DeliveryLimit = d.i64()
		c.SAC = d.u8() == 1
		if d.err == nil {
			s.cfg = c
		}
		res(result{})
	case opResetNode, opResetNode2:
		node := d.str()
		var keep uint64
		if op == opResetNode2 {
			keep = d.u64()
		}
		if d.err != nil {
			return
		}
		var keys []uint64
		for _, c := range s.consumers {
			if c.node == node && (keep == 0 || c.pid != keep) {
				keys = append(keys, c.key)
			}
		}
		for _, k := range keys {
			s.detach(k, fx)
		}
		// What basic.get handed out on a node that restarted comes back
		// too (of before opGet2, whatever node it was).
		s.returnGets(getOwner, fx)
		s.returnGets(getOwnerOf(node), fx)
		res(result{})
	case opReturnGets:
		node := d.str()
		if d.err != nil {
			return
		}
		s.returnGets(getOwnerOf(node), fx)
		res(result{})
	default:
		d.err = errUnknown
	}
}

// exclusiveUse is the exclusive consumers' check of before fifoRules:
// an exclusive consumer shuts others out, and is refused while there is
// another. A cancelled one counts for neither: it holds what it had and
// takes nothing.
func (s *machine) exclusiveUse(excl bool) error {
	live := 0
	for _, c := range s.consumers {
		if c.cancelled {
			continue
		}
		if c.exclusive {
			return queue.ErrExclusiveConsumer
		}
		live++
	}
	if excl && live > 0 {
		return queue.ErrHasConsumers
	}
	return nil
}

// limit applies the length limits under fifoRules, as rabbit_fifo's
// evaluate_limit: drop-head dead-letters heads while the queue is over a
// limit; reject-publish refuses publishes once it is over one, until it
// is at or below 80% of every limit. rabbit_fifo evaluates them after
// each command, its checkout done; the machine after each enqueue and
// after each entry's checkout (an entry is a proposer's batch: a closed
// channel's returns, then its detach; no consumer is to take them in
// between).
func (s *machine) limit(fx *effects) {
	if s.cfg.overflow() == queue.RejectPublish {
		if s.over() {
			s.rejecting = true
		} else if s.rejecting && s.belowSoft() {
			s.rejecting = false
		}
		return
	}
	s.rejecting = false
	first := len(fx.dead)
	for s.over() {
		h := s.pop()
		if h == nil {
			break
		}
		fx.dead = append(fx.dead, dead{h, queue.MaxLen})
		s.forget(h)
	}
	slices.Reverse(fx.dead[first:])
}

// belowSoft reports whether the ready messages are at or below 80% of
// every limit (rabbit_fifo's is_below_soft_limit: trunc(limit * 0.8)).
func (s *machine) belowSoft() bool {
	soft := func(v int64) int64 { return v/10*8 + v%10*8/10 }
	return (s.cfg.MaxLen < 0 || int64(s.readyN) <= soft(s.cfg.MaxLen)) &&
		(s.cfg.MaxBytes < 0 || s.readyB <= soft(s.cfg.MaxBytes))
}

// seen records a batch of pid whose first sequence number is seq, evicting
// the enqueuer seen longest ago past maxEnqueuers (smallest last index;
// ties cannot happen: one entry has one proposer).
func (s *machine) seen(pid, seq, idx uint64) {
	e := s.enqueuers[pid]
	if e == nil {
		if len(s.enqueuers) >= maxEnqueuers {
			var oldest uint64
			first := true
			var oldestIdx uint64
			for k, v := range s.enqueuers {
				if first || v.last < oldestIdx || v.last == oldestIdx && k < oldest {
					oldest, oldestIdx, first = k, v.last, false
				}
			}
			delete(s.enqueuers, oldest)
		}
		e = &enqueuer{}
		s.enqueuers[pid] = e
	}
	e.seq, e.last = max(e.seq, seq), idx
	if len(e.batches) >= maxBatches {
		e.batches = slices.Delete(e.batches, 0, 1)
	}
	e.batches = append(e.batches, seq)
}

func (s *machine) consumer(key uint64) *consumer {
	for _, c := range s.consumers {
		if c.key == key {
			return c
		}
	}
	return nil
}

// gotOut is how many messages basic.get has checked out (unsettled):
// every checked-out message is a consumer's (counted in its out) or a
// get's.
func (s *machine) gotOut() int {
	n := len(s.out)
	for _, c := range s.consumers {
		n -= c.out
	}
	return max(n, 0)
}

// ownedBy lists the messages checked out to key, by id.
func (s *machine) ownedBy(key uint64) []*msg {
	var ms []*msg
	for _, m := range s.out {
		if m.owner == key {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *msg) int { return cmpU(a.id, b.id) })
	return ms
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// detach removes consumer key; what it had checked out comes back,
// counted as a return (RabbitMQ's quorum queues count those too).
func (s *machine) detach(key uint64, fx *effects) {
	i := slices.IndexFunc(s.consumers, func(c *consumer) bool { return c.key == key })
	if i < 0 {
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	fx.detached = append(fx.detached, key)
	for _, m := range s.ownedBy(key) {
		s.release(m)
		s.giveBack(m, fx)
	}
}

// returnGets gives back what owner (a getOwner key) has checked out.
func (s *machine) returnGets(owner uint64, fx *effects) {
	for _, m := range s.ownedBy(owner) {
		s.release(m)
		s.giveBack(m, fx)
	}
}

// release takes m out of the checked-out set; a cancelled consumer that
// holds nothing more goes.
func (s *machine) release(m *msg) {
	delete(s.out, m.id)
	if c := s.consumer(m.owner); c != nil {
		c.out--
		if c.cancelled && c.out <= 0 {
			s.consumers = slices.DeleteFunc(s.consumers, func(x *consumer) bool { return x == c })
		}
	}
	m.owner = 0
}

// giveBack returns m to the queue with its count raised, or dead-letters
// it past the delivery limit.
func (s *machine) giveBack(m *msg, fx *effects) { s.requeue(m, fx, &s.returns) }

// requeue raises m's count and appends it to list, or dead-letters it
// past the delivery limit.
func (s *machine) requeue(m *msg, fx *effects, list *deque) {
	m.count++
	if s.cfg.DeliveryLimit >= 0 && int64(m.count) > s.cfg.DeliveryLimit {
		fx.dead = append(fx.dead, dead{m, queue.DeliveryLimit})
		s.forget(m)
		return
	}
	list.pushBack(m)
	s.readyN++
	s.readyB += int64(m.size)
}

// giveBackLast returns m behind every ready message instead (a client's
// requeue, opReturnLast).
func (s *machine) giveBackLast(m *msg, fx *effects) { s.requeue(m, fx, &s.ready) }

// forget drops a message that left the queue.
func (s *machine) forget(m *msg) {
	if m.body != nil {
		s.cachedN--
		s.cachedB -= int64(m.size)
	}
}

func (s *machine) cache(m *msg, body *queue.Message) {
	if s.roomFor(m.size) {
		m.body = body
		s.cachedN++
		s.cachedB += int64(m.size)
	}
}

// roomFor reports whether the body cache has room for size more bytes.
func (s *machine) roomFor(size uint32) bool {
	return s.cachedN < s.budgetN && s.cachedB+int64(size) <= s.budgetB
}

// pop takes the next ready message: returns first.
func (s *machine) pop() *msg {
	m := s.returns.popFront()
	if m == nil {
		m = s.ready.popFront()
	}
	if m != nil {
		s.readyN--
		s.readyB -= int64(m.size)
	}
	return m
}

// headExpires is the expiry of the message pop takes next (0: never),
// and whether there is one.
func (s *machine) headExpires() (int64, bool) {
	if e, ok := s.returns.frontExpires(); ok {
		return e, true
	}
	return s.ready.frontExpires()
}

func (s *machine) full(size int) bool {
	return s.cfg.MaxLen >= 0 && int64(s.readyN) >= s.cfg.MaxLen ||
		s.cfg.MaxBytes >= 0 && s.readyB+int64(size) > s.cfg.MaxBytes
}

func (s *machine) over() bool {
	return s.cfg.MaxLen >= 0 && int64(s.readyN) > s.cfg.MaxLen ||
		s.cfg.MaxBytes >= 0 && s.readyB > s.cfg.MaxBytes
}

func (s *machine) expiryFor(m *queue.Message) int64 {
	ttl := s.cfg.TTL
	if m.HasTTL {
		if t := m.TTL.Milliseconds(); ttl < 0 || t < ttl {
			ttl = t
		}
	}
	if ttl < 0 {
		return 0
	}
	return s.now + ttl
}

// expireHeads dead-letters expired messages at the heads (as RabbitMQ,
// only the head expires; one behind an unexpired head waits).
func (s *machine) expireHeads(fx *effects) {
	for {
		e, ok := s.headExpires()
		if !ok || e == 0 || e > s.now {
			return
		}
		m := s.pop()
		fx.dead = append(fx.dead, dead{m, queue.Expired})
		s.forget(m)
	}
}

func (s *machine) headExpiry() int64 {
	var e int64
	for _, q := range [...]*deque{&s.returns, &s.ready} {
		if x, ok := q.frontExpires(); ok && x != 0 && (e == 0 || x < e) {
			e = x
		}
	}
	return e
}

// pick chooses the consumer for the next message: with single active
// consumer the first attached, if it can take one; else the highest
// priority consumer that can, the one served longest ago among equals.
func (s *machine) pick() *consumer {
	if s.cfg.SAC {
		// The first attached that is not cancelled is the active one (a
		// cancelled one keeps what it holds; the next takes over).
		for _, c := range s.consumers {
			if c.cancelled {
				continue
			}
			if c.canTake() {
				return c
			}
			return nil
		}
		return nil
	}
	var best *consumer
	for _, c := range s.consumers {
		if !c.canTake() {
			continue
		}
		if best == nil || c.priority > best.priority || c.priority == best.priority && c.served < best.served {
			best = c
		}
	}
	return best
}

// checkout hands ready messages to consumers with credit.
func (s *machine) checkout(fx *effects) {
	for s.readyN > 0 {
		c := s.pick()
		if c == nil {
			return
		}
		m := s.pop()
		if m.expires != 0 && m.expires < s.now {
			fx.dead = append(fx.dead, dead{m, queue.Expired})
			s.forget(m)
			continue
		}
		m.owner = c.key
		c.out++
		s.out[m.id] = m
		s.service++
		c.served = s.service
		fx.deliver = append(fx.deliver, delivery{consumer: c.key, m: m, e: s.entry(m)})
	}
}

func (s *machine) entry(m *msg) queue.Entry {
	return queue.Entry{Seq: m.id, Msg: m.body, Redelivered: m.count > 0, Returns: m.count, Expires: m.expires * int64(time.Millisecond)}
}
