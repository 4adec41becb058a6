package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream"
)

// A classic queue seen from a node that is not its home: a remoteQueue,
// the stand-in routing and declarations find. Publishes routed to it,
// settlements of its deliveries, consumer credit, starts and cancels go to
// the home over one ordered link per home node (link: a goroutine
// batching them into "warren.ops" calls, one at a time, so that they
// arrive in order); a publish's confirm waits for the home's answer, sent
// once the home's store has the message. Consumers attach on the home
// ("warren.consume"), whose deliveries come back in "warren.deliver"
// calls (cluster_home.go), at most the consumer's prefetch (or
// defaultRemoteWindow) ahead of its settlements. basic.get, purge, stats
// and deletions are synchronous calls to the home. While the home is down
// (cluster.MemberDown) the stand-in answers 404 as RabbitMQ 3.10 does and
// its consumers are cancelled; it is no route for publishes (as a dead
// queue process is none in RabbitMQ: mandatory ones come back with
// basic.return, confirms are acks when no other queue took the message),
// but a quorum queue's stand-in nacks them.

// defaultRemoteWindow is how many deliveries a home sends ahead of their
// settlement to a consumer with no prefetch limit.
const defaultRemoteWindow = 1000

// remoteCallTimeout bounds a synchronous queue call to a home node.
const remoteCallTimeout = 10 * time.Second

// remoteSide is this node's stand-ins' shared state.
type remoteSide struct {
	s   *Server
	typ *remoteType
	// quorumType is the stand-ins' of quorum queues on a node that holds
	// no replica: they forward to a member.
	quorumType *remoteType
	// streamType is the stand-ins' of streams homed on another node.
	streamType *remoteType
	base       uint64 // consumer ids start here: unique across restarts
	next       atomic.Uint64

	mu        sync.Mutex // guards the maps; a leaf lock
	consumers map[uint64]*remoteConsumer
	links     map[string]*link
	down      map[string]bool
}

func newRemoteSide(s *Server) *remoteSide {
	var b [8]byte
	rand.Read(b[:])
	r := &remoteSide{s: s, base: binary.BigEndian.Uint64(b[:]) &^ 0xffffffff,
		consumers: map[uint64]*remoteConsumer{}, links: map[string]*link{}, down: map[string]bool{}}
	r.typ = &remoteType{r: r}
	r.quorumType = &remoteType{r: r, quorum: true}
	r.streamType = &remoteType{r: r, stream: true}
	return r
}

func (r *remoteSide) isDown(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down[node]
}

// setDown records that node stopped (or started) answering; a stopped
// home's stand-ins cancel their consumers, but a quorum queue's: those
// wait, their stand-in marked lost, for repointStandIns to move them to
// a stand-in that forwards to a member running (the stopped one's
// proxies are gone; what they held the group gives back).
func (r *remoteSide) setDown(node string, down bool) {
	r.mu.Lock()
	was := r.down[node]
	r.down[node] = down
	var gone, waiting []*remoteConsumer
	if down && !was {
		for id, rc := range r.consumers {
			if rc.q.home == node {
				if rc.q.typ == r.quorumType {
					waiting = append(waiting, rc)
				} else {
					gone = append(gone, rc)
				}
				delete(r.consumers, id)
			}
		}
	}
	r.mu.Unlock()
	for _, rc := range gone {
		rc.q.dropConsumer(rc)
	}
	for _, rc := range waiting {
		rc.q.mu.Lock()
		rc.pending = nil
		rc.q.mu.Unlock()
		rc.q.lost.Store(true)
	}
}

func (r *remoteSide) link(node string) *link {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.links[node]
	if l == nil {
		l = &link{r: r, node: node, wake: make(chan struct{}, 1)}
		r.links[node] = l
		r.s.clusterWG.Add(1)
		go l.run()
	}
	return l
}

// remoteType is the queue type of stand-ins: its Publish forwards.
type remoteType struct {
	r      *remoteSide
	quorum bool
	stream bool
}

func (t *remoteType) Info() queue.TypeInfo {
	if t.quorum {
		return t.r.s.quorum.Info()
	}
	if t.stream {
		return t.r.s.streams.Info()
	}
	return t.r.s.classic.Info()
}

func (t *remoteType) New(queue.Decl, queue.Limits, queue.Hooks) (queue.Queue, error) {
	return nil, errors.New("remote queues are made by the metadata group")
}

// Publish forwards m to the homes of qs; done gets the homes' verdict.
func (t *remoteType) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	byHome := map[string][]string{}
	var homes []string
	for _, q := range qs {
		rq := q.(*remoteQueue)
		if rq.ghost || (!t.quorum && t.r.isDown(rq.home)) {
			continue
		}
		if _, ok := byHome[rq.home]; !ok {
			homes = append(homes, rq.home)
		}
		byHome[rq.home] = append(byHome[rq.home], rq.decl.Name)
	}
	if len(homes) == 0 {
		if done != nil {
			done(nil)
		}
		return false, false
	}
	var j *joinDone
	if done != nil {
		j = &joinDone{done: done}
		j.n.Store(int32(len(homes)))
	}
	for _, home := range homes {
		var d func(error)
		if j != nil {
			d = j.one
		}
		if t.r.isDown(home) {
			if d != nil {
				d(errHomeDown)
			}
			continue
		}
		var w wbuf
		w.u8(linkPublish)
		w.str(qs[0].Decl().VHost)
		w.strs(byHome[home])
		w.str(m.Exchange)
		w.str(m.RoutingKey)
		w.bytes(m.Props)
		w.bytes(m.Body)
		t.r.link(home).send(w.b, d)
	}
	return true, false
}

var errHomeDown = errors.New("cluster: the queue's home node is down")

// remoteQueue is a classic queue homed on another node.
type remoteQueue struct {
	r    *remoteSide
	typ  *remoteType // r.typ, or r.quorumType
	v    *vhost
	decl queue.Decl
	home string
	// ghost: an older incarnation of a queue homed here, replayed from
	// the log at a restart until the log deletes it; it holds nothing.
	ghost bool

	mu        sync.Mutex // a queue's lock: before a channel's
	consumers map[uint64]*remoteConsumer
	deleted   bool
	// leader: a quorum queue's leader as the member this stand-in
	// forwards to named it in its last Stats answer ("" before one).
	leader string
	// lost: a quorum queue's stand-in whose member stopped with its
	// consumers attached there (setDown): repointStandIns replaces it.
	lost atomic.Bool
}

// remoteConsumer is a consumer of this node attached to a remote queue.
type remoteConsumer struct {
	id      uint64
	tag     string
	c       queue.Consumer
	q       *remoteQueue
	noAck   bool
	started bool
	// pending: deliveries from the home the consumer did not take yet.
	pending []queue.Entry
}

func newRemoteQueue(v *vhost, d queue.Decl, home string) *remoteQueue {
	return &remoteQueue{r: v.srv.remote, typ: v.srv.remote.typ, v: v, decl: d, home: home, consumers: map[uint64]*remoteConsumer{}}
}

func (q *remoteQueue) homeUp() bool      { return q.ghost || !q.r.isDown(q.home) }
func (q *remoteQueue) Decl() *queue.Decl { return &q.decl }
func (q *remoteQueue) Type() queue.Type  { return q.typ }
func (q *remoteQueue) Touch()            {}

// CheckPublish implements queue.PublishChecker for a stream's stand-in:
// its home would refuse a partition header out of range (406) on its
// own node, so this node refuses it too, before forwarding anything.
func (q *remoteQueue) CheckPublish(m *queue.Message) error {
	if q.typ != q.r.streamType {
		return nil
	}
	return stream.CheckPartitionHeaders(q.decl.Args, m)
}
func (q *remoteQueue) MessageStats() queue.MessageStats {
	return queue.MessageStats{}
}
func (q *remoteQueue) DeliveryProps(e queue.Entry) []byte { return e.Msg.Props }

func (q *remoteQueue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// call makes a synchronous queue call to the home.
func (q *remoteQueue) call(method string, req []byte) ([]byte, error) {
	if !q.homeUp() || q.ghost {
		return nil, errHomeDown
	}
	n := q.r.s.cluster
	if n == nil {
		return nil, errHomeDown
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteCallTimeout)
	defer cancel()
	out, err := n.Call(ctx, q.home, method, req)
	if err != nil && strings.Contains(err.Error(), notReadyText) {
		return nil, errHomeDown
	}
	return out, err
}

// consumeReq is a "warren.consume" request.
type consumeReq struct {
	VHost     string `json:"vhost"`
	Queue     string `json:"queue"`
	ID        uint64 `json:"id"`
	Tag       string `json:"tag"`
	Exclusive bool   `json:"exclusive,omitempty"`
	Priority  int    `json:"priority,omitempty"`
	Args      []byte `json:"args,omitempty"`
	NoAck     bool   `json:"no_ack,omitempty"`
	Prefetch  uint16 `json:"prefetch,omitempty"`
}

// Consume errors as the home words them.
const (
	consumeExclusive    = "exclusive"
	consumeHasConsumers = "has_consumers"
	consumeDeleted      = "deleted"
)

func (q *remoteQueue) AddConsumer(o queue.ConsumeOptions) error {
	rc := &remoteConsumer{id: q.r.base + q.r.next.Add(1), tag: o.Tag, c: o.Consumer, q: q, noAck: o.NoAck}
	b, _ := json.Marshal(consumeReq{VHost: q.decl.VHost, Queue: q.decl.Name, ID: rc.id, Tag: o.Tag, Exclusive: o.Exclusive,
		Priority: o.Priority, Args: persist.EncodeArgs(o.Args), NoAck: o.NoAck, Prefetch: o.Prefetch})
	// Registered first: the first deliveries may come before the answer.
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return queue.ErrDeleted
	}
	q.consumers[rc.id] = rc
	q.mu.Unlock()
	q.r.mu.Lock()
	q.r.consumers[rc.id] = rc
	q.r.mu.Unlock()
	out, err := q.call("warren.consume", b)
	if err == nil && len(out) > 0 {
		switch string(out) {
		case consumeExclusive:
			err = queue.ErrExclusiveConsumer
		case consumeHasConsumers:
			err = queue.ErrHasConsumers
		case consumeDeleted:
			err = queue.ErrDeleted
		case queue.ErrPrefetchRequired.Error():
			// The home answers the queue's other refusals with their
			// text: these two are known again by it, so that the channel
			// answers them as a local queue's (consumeError).
			err = queue.ErrPrefetchRequired
		case queue.ErrNoAckRefused.Error():
			err = queue.ErrNoAckRefused
		default:
			err = errors.New(string(out))
		}
	}
	if err != nil {
		q.forget(rc)
		if errors.Is(err, errHomeDown) {
			return &HomeDownError{Name: q.decl.Name, VHost: q.decl.VHost, Node: q.home}
		}
		return err
	}
	return nil
}

func (q *remoteQueue) forget(rc *remoteConsumer) {
	q.mu.Lock()
	delete(q.consumers, rc.id)
	q.mu.Unlock()
	q.r.mu.Lock()
	delete(q.r.consumers, rc.id)
	q.r.mu.Unlock()
}

// dropConsumer cancels rc (its home went down): the channel forgets it
// and tells its client, as for a deleted queue.
func (q *remoteQueue) dropConsumer(rc *remoteConsumer) {
	q.mu.Lock()
	_, ok := q.consumers[rc.id]
	delete(q.consumers, rc.id)
	rc.pending = nil
	q.mu.Unlock()
	if ok && q.v.hooks.Cancel != nil {
		q.v.hooks.Cancel(q, queue.ConsumerRef{Tag: rc.tag, Consumer: rc.c})
	}
}

func (q *remoteQueue) RemoveConsumer(tag string, c queue.Consumer) bool {
	q.mu.Lock()
	var rc *remoteConsumer
	for _, x := range q.consumers {
		if x.tag == tag && x.c == c {
			rc = x
			break
		}
	}
	if rc == nil {
		q.mu.Unlock()
		return false
	}
	delete(q.consumers, rc.id)
	pending := rc.pending
	rc.pending = nil
	q.mu.Unlock()
	q.r.mu.Lock()
	delete(q.r.consumers, rc.id)
	q.r.mu.Unlock()
	if q.homeUp() {
		l := q.r.link(q.home)
		if len(pending) > 0 && !rc.noAck {
			l.send(q.settleOp(pending, queue.Requeue), nil)
		}
		var w wbuf
		w.u8(linkCancel)
		w.uv(rc.id)
		l.send(w.b, nil)
	}
	return false
}

func (q *remoteQueue) settleOp(entries []queue.Entry, op queue.SettleOp) []byte {
	var w wbuf
	w.u8(linkSettle)
	w.str(q.decl.VHost)
	w.str(q.decl.Name)
	w.u8(byte(op))
	w.uv(uint64(len(entries)))
	for _, e := range entries {
		w.uv(e.Seq)
	}
	return w.b
}

// Kick starts new consumers at their home and offers them what came.
func (q *remoteQueue) Kick(ctx any) {
	q.mu.Lock()
	var start []uint64
	credit := map[uint64]uint64{}
	for _, rc := range q.consumers {
		if !rc.started {
			rc.started = true
			start = append(start, rc.id)
		}
		if n := q.drain(rc, ctx); n > 0 {
			credit[rc.id] = n
		}
	}
	q.mu.Unlock()
	if len(start) == 0 && len(credit) == 0 {
		return
	}
	l := q.r.link(q.home)
	for _, id := range start {
		var w wbuf
		w.u8(linkStart)
		w.uv(id)
		l.send(w.b, nil)
	}
	for id, n := range credit {
		l.send(creditOp(id, n), nil)
	}
}

func creditOp(id, n uint64) []byte {
	var w wbuf
	w.u8(linkCredit)
	w.uv(id)
	w.uv(n)
	return w.b
}

// drain offers rc its pending deliveries, in order, until it refuses
// one; it returns how many a no-ack consumer took (credit for the home).
// q.mu is held.
func (q *remoteQueue) drain(rc *remoteConsumer, ctx any) uint64 {
	var n uint64
	i := 0
	for ; i < len(rc.pending); i++ {
		out := rc.c.Deliver(q, rc.pending[i], ctx)
		if out == queue.Refused {
			break
		}
		if out == queue.Settled {
			n++
		}
	}
	rc.pending = rc.pending[i:]
	if len(rc.pending) == 0 {
		rc.pending = nil
	}
	return n
}

// deliver takes deliveries the home sent to rc; false when rc is gone.
func (q *remoteQueue) deliver(rc *remoteConsumer, es []queue.Entry) (bool, uint64) {
	q.mu.Lock()
	if q.consumers[rc.id] != rc {
		q.mu.Unlock()
		return false, 0
	}
	if s, ok := rc.c.(interface{ servedBy(queue.Queue) bool }); ok && !s.servedBy(q) {
		// Its channel's consumer went, or moved to another object, and
		// this stand-in was not told (a move that crossed its attach):
		// it is cancelled at the home as RemoveConsumer would, and this
		// batch goes back (the home requeues what a consumer not here
		// was sent).
		q.mu.Unlock()
		q.RemoveConsumer(rc.tag, rc.c)
		return false, 0
	}
	rc.pending = append(rc.pending, es...)
	n := q.drain(rc, nil)
	q.mu.Unlock()
	return true, n
}

func (q *remoteQueue) Settle(entries []queue.Entry, op queue.SettleOp) {
	if len(entries) == 0 || !q.homeUp() {
		return
	}
	q.r.link(q.home).send(q.settleOp(entries, op), nil)
}

// Delete is the metadata group's deletion here: the home deletes the
// real queue; the consumers of this node are cancelled.
func (q *remoteQueue) Delete(ifUnused, ifEmpty bool) (int, []queue.ConsumerRef, error) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, nil, nil
	}
	q.deleted = true
	var refs []queue.ConsumerRef
	var ids []uint64
	for id, rc := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: rc.tag, Consumer: rc.c})
		ids = append(ids, id)
	}
	q.consumers = map[uint64]*remoteConsumer{}
	q.mu.Unlock()
	q.r.mu.Lock()
	for _, id := range ids {
		delete(q.r.consumers, id)
	}
	q.r.mu.Unlock()
	return 0, refs, nil
}

// remoteDelete asks the home to delete the queue (it checks if-unused
// and if-empty, and proposes the deletion).
func (q *remoteQueue) remoteDelete(ifUnused, ifEmpty bool) (int, error) {
	var w wbuf
	w.str(q.decl.VHost)
	w.str(q.decl.Name)
	w.flag(ifUnused)
	w.flag(ifEmpty)
	out, err := q.call("warren.qdelete", w.b)
	if err != nil {
		if errors.Is(err, errHomeDown) {
			return 0, &HomeDownError{Name: q.decl.Name, VHost: q.decl.VHost, Node: q.home}
		}
		return 0, fmt.Errorf("delete queue on its home %s: %w", q.home, err)
	}
	var res metaResult
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, err
	}
	return res.N, res.Err.err()
}

func (q *remoteQueue) queueReq() []byte {
	var w wbuf
	w.str(q.decl.VHost)
	w.str(q.decl.Name)
	return w.b
}

// homeStats is the home's answer to "warren.stats": the queue's Stats
// and, for a quorum queue's replica, its group's leader as the replica
// knows it (a node of an earlier build sends the Stats alone).
type homeStats struct {
	queue.Stats
	Leader string `json:",omitempty"`
}

// Stats asks the home; zero when it does not answer.
func (q *remoteQueue) Stats() queue.Stats {
	out, err := q.call("warren.stats", q.queueReq())
	if err != nil {
		return queue.Stats{}
	}
	var st homeStats
	json.Unmarshal(out, &st)
	q.mu.Lock()
	st.Consumers = max(st.Consumers, len(q.consumers))
	q.leader = st.Leader
	q.mu.Unlock()
	return st.Stats
}

// lastLeader is a quorum queue's leader as its member last named it.
func (q *remoteQueue) lastLeader() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.leader
}

// DeclareCounts implements queue.DeclareCounter: a quorum queue's
// stand-in asks its member for the leader's counts (quorumCounts), and
// falls back to Stats as every other stand-in does.
func (q *remoteQueue) DeclareCounts() (messages, consumers int) {
	if q.typ == q.r.quorumType && q.homeUp() && !q.ghost {
		q.v.mu.RLock()
		r := q.v.replicas[q.decl.Name]
		q.v.mu.RUnlock()
		if r != nil {
			if m, c, err := q.r.s.askQuorumStat(q.home, quorumGroupBase|r.inc, true); err == nil {
				return m, c
			}
		}
	}
	st := q.Stats()
	return st.Ready, st.Consumers
}

// Purge asks the home.
func (q *remoteQueue) Purge() int {
	out, err := q.call("warren.purge", q.queueReq())
	if err != nil {
		return 0
	}
	r := rbuf{b: out}
	return int(r.uv())
}

// Get asks the home for a message (basic.get).
func (q *remoteQueue) Get(noAck bool) (queue.Entry, int, bool) {
	req := q.queueReq()
	req = append(req, b2u(noAck))
	out, err := q.call("warren.get", req)
	if err != nil {
		return queue.Entry{}, 0, false
	}
	r := rbuf{b: out}
	ok := r.flag()
	remaining := int(r.uv())
	if !ok || r.err != nil {
		return queue.Entry{}, remaining, false
	}
	e := decodeEntry(&r)
	return e, remaining, r.err == nil
}

// encodeEntry writes a delivery of e with the home queue's props.
func encodeEntry(w *wbuf, e queue.Entry, props []byte) {
	w.uv(e.Seq)
	w.flag(e.Redelivered)
	w.uv(uint64(e.Returns))
	w.str(e.Msg.Exchange)
	w.str(e.Msg.RoutingKey)
	w.bytes(props)
	w.bytes(e.Msg.Body)
}

func decodeEntry(r *rbuf) queue.Entry {
	e := queue.Entry{Seq: r.uv(), Redelivered: r.flag(), Returns: uint32(r.uv())}
	ex, rk := r.str(), r.str()
	props, body := r.bytes(), r.bytes()
	e.Msg = queue.NewStored(ex, rk, props, body, 0)
	return e
}

// handleDeliver is "warren.deliver": deliveries from homes to this
// node's consumers. The answer lists the consumers no longer here (the
// home requeues what it sent them).
func (r *remoteSide) handleDeliver(_ context.Context, from string, req []byte) ([]byte, error) {
	rb := rbuf{b: req}
	type batch struct {
		rc *remoteConsumer
		es []queue.Entry
	}
	var order []uint64
	batches := map[uint64]*batch{}
	var unknown []uint64
	for !rb.done() {
		id := rb.uv()
		e := decodeEntry(&rb)
		if rb.err != nil {
			return nil, rb.err
		}
		b := batches[id]
		if b == nil {
			r.mu.Lock()
			rc := r.consumers[id]
			r.mu.Unlock()
			b = &batch{rc: rc}
			batches[id] = b
			order = append(order, id)
		}
		b.es = append(b.es, e)
	}
	l := r.link(from)
	for _, id := range order {
		b := batches[id]
		if b.rc == nil || b.rc.q.home != from {
			unknown = append(unknown, id)
			continue
		}
		ok, n := b.rc.q.deliver(b.rc, b.es)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		if n > 0 {
			l.send(creditOp(id, n), nil)
		}
	}
	var w wbuf
	for _, id := range unknown {
		w.uv(id)
	}
	return w.b, nil
}

// Link ops, in "warren.ops" requests.
const (
	linkPublish = 1
	linkSettle  = 2
	linkCredit  = 3
	linkStart   = 4
	linkCancel  = 5
)

// Publish statuses in a "warren.ops" answer, one per publish.
const (
	pubOK   = 0
	pubNack = 1
)

// link is the ordered channel of ops from this node to one home node.
type link struct {
	r    *remoteSide
	node string
	wake chan struct{}

	mu  sync.Mutex // guards ops; a leaf lock
	ops []linkOp
}

type linkOp struct {
	b    []byte
	done func(error) // a publish's (nil: not a publish, or no confirm)
	pub  bool
}

// maxLinkBatch bounds the bytes of one "warren.ops" call.
const maxLinkBatch = 8 << 20

func (l *link) send(b []byte, done func(error)) {
	l.mu.Lock()
	l.ops = append(l.ops, linkOp{b: b, done: done, pub: b[0] == linkPublish})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run sends the ops in order, one call at a time, until the server
// stops.
func (l *link) run() {
	s := l.r.s
	defer s.clusterWG.Done()
	for {
		select {
		case <-l.wake:
		case <-s.clusterCtx.Done():
			l.failAll()
			return
		}
		for {
			l.mu.Lock()
			n, size := 0, 0
			for n < len(l.ops) && (n == 0 || size+len(l.ops[n].b) <= maxLinkBatch) {
				size += len(l.ops[n].b)
				n++
			}
			batch := l.ops[:n:n]
			l.ops = l.ops[n:]
			l.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			l.flush(batch)
		}
	}
}

func (l *link) failAll() {
	l.mu.Lock()
	ops := l.ops
	l.ops = nil
	l.mu.Unlock()
	for _, op := range ops {
		if op.done != nil {
			op.done(errHomeDown)
		}
	}
}

func (l *link) flush(batch []linkOp) {
	var w wbuf
	for _, op := range batch {
		w.raw(op.b)
	}
	var out []byte
	err := errHomeDown
	if n := l.r.s.cluster; n != nil && !l.r.isDown(l.node) {
		ctx, cancel := context.WithTimeout(l.r.s.clusterCtx, 2*remoteCallTimeout)
		out, err = n.Call(ctx, l.node, "warren.ops", w.b)
		cancel()
	}
	if err != nil {
		l.r.s.log.Debug().Err(err).Str("home", l.node).Int("ops", len(batch)).Msg("forwarding to a queue's home failed")
	}
	i := 0
	for _, op := range batch {
		if !op.pub {
			continue
		}
		st := byte(pubNack)
		if err == nil && i < len(out) {
			st = out[i]
		}
		i++
		if op.done != nil {
			if st == pubOK {
				op.done(nil)
			} else {
				op.done(errHomeDown)
			}
		}
	}
}
