package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// The home side of the queue RPCs (cluster_remote.go has the other): a
// node's real classic queues serving publishes, consumers, gets, purges,
// stats and deletions from the other nodes. Per calling node a peer holds
// its proxies (the queue.Consumers standing for its consumers), the
// deliveries out to it not yet settled (held), and the deliveries waiting
// to be sent, which its push goroutine sends in "warren.deliver" calls,
// one at a time. When a peer goes down (cluster.MemberDown, or a push
// that fails) its proxies are removed and what it held is requeued.

type homeSide struct {
	s  *Server
	mu sync.Mutex // guards peers; before peer.mu
	// peers by node name
	peers map[string]*peer
	// retMu guards retired; a leaf (taken under peer.mu).
	retMu sync.Mutex
	// retired: the replicas of quorum queues this node is no longer a
	// member of (quorum.Queue.Leave), for a while: what their proxies
	// delivered before is settled through them (they forward to the
	// group).
	retired map[qkey]retiredQueue
}

type retiredQueue struct {
	q  queue.Queue
	at time.Time
}

// retiredFor is how long a replica that left is kept for settlements
// of what it delivered.
const retiredFor = time.Hour

// retire keeps q, the replica of vhost's queue name that left this node.
func (h *homeSide) retire(vhost, name string, q queue.Queue) {
	h.retMu.Lock()
	defer h.retMu.Unlock()
	if h.retired == nil {
		h.retired = map[qkey]retiredQueue{}
	}
	for k, r := range h.retired {
		if time.Since(r.at) > retiredFor {
			delete(h.retired, k)
		}
	}
	h.retired[qkey{vhost, name}] = retiredQueue{q, time.Now()}
}

// retiredQueue is the replica of vhost's queue name that left this node
// last, nil none.
func (h *homeSide) retiredQueue(vhost, name string) queue.Queue {
	h.retMu.Lock()
	defer h.retMu.Unlock()
	return h.retired[qkey{vhost, name}].q
}

type peer struct {
	h    *homeSide
	node string
	wake chan struct{}
	stop chan struct{}

	mu      sync.Mutex // after a queue's lock (proxy.Deliver); a leaf otherwise
	closed  bool
	proxies map[uint64]*proxy
	held    map[heldKey]heldEntry
	out     []outDelivery
	// cancelled: consumers the peer cancelled before their
	// "warren.consume" arrived (a cancel goes on the peer's link, its
	// consume in a call of its own, and they may cross), with when: a
	// consume that comes after its cancel is refused, or it would leave
	// a proxy no one cancels. Kept cancelledFor.
	cancelled map[uint64]time.Time
}

// cancelledFor is how long a cancel that overtook its consume is kept.
const cancelledFor = time.Minute

type heldKey struct {
	q   queue.Queue
	seq uint64
}

type heldEntry struct {
	e     queue.Entry
	proxy uint64 // 0: a basic.get's
}

type outDelivery struct {
	proxy uint64
	q     queue.Queue
	e     queue.Entry
	props []byte
	noAck bool
}

// proxy stands for a consumer of another node on a queue of this one.
type proxy struct {
	p       *peer
	id      uint64
	tag     string
	q       queue.Queue
	noAck   bool
	credit  int // deliveries it may still send before settlements
	started bool
	gone    bool
	// busy: its last Deliver was refused for want of window only (the
	// peer has not taken what it was sent yet; its credit Kicks the
	// queue): queue.Busy. Guarded by p.mu.
	busy bool
}

// RefusedBusy implements queue.Busy.
func (x *proxy) RefusedBusy() bool {
	x.p.mu.Lock()
	defer x.p.mu.Unlock()
	return x.busy
}

func newHomeSide(s *Server) *homeSide { return &homeSide{s: s, peers: map[string]*peer{}} }

func (h *homeSide) peer(node string) *peer {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[node]
	if p == nil {
		p = &peer{h: h, node: node, wake: make(chan struct{}, 1), stop: make(chan struct{}),
			proxies: map[uint64]*proxy{}, held: map[heldKey]heldEntry{}}
		h.peers[node] = p
		h.s.clusterWG.Add(1)
		go p.push()
	}
	return p
}

// peerDown forgets node's consumers and requeues what they held.
func (h *homeSide) peerDown(node string) {
	h.mu.Lock()
	p := h.peers[node]
	delete(h.peers, node)
	h.mu.Unlock()
	if p != nil {
		p.shutdown()
	}
}

func (p *peer) shutdown() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	proxies := p.proxies
	p.proxies = map[uint64]*proxy{}
	held := p.held
	p.held = map[heldKey]heldEntry{}
	p.out = nil
	for _, x := range proxies {
		x.gone = true
	}
	p.mu.Unlock()
	byQueue := map[queue.Queue][]queue.Entry{}
	for k, he := range held {
		byQueue[k.q] = append(byQueue[k.q], he.e)
	}
	for q, es := range byQueue {
		sortEntries(es)
		q.Settle(es, queue.Requeue)
	}
	for _, x := range proxies {
		p.removeProxy(x)
	}
	p.h.s.log.Info().Str("node", p.node).Int("requeued", len(held)).Int("consumers", len(proxies)).Msg("a node with consumers of this node's queues is gone")
}

func sortEntries(es []queue.Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Seq < es[j-1].Seq; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// removeProxy detaches x from its queue (auto-deleting it as a consumer
// leaving would).
func (p *peer) removeProxy(x *proxy) {
	if x.q.RemoveConsumer(x.tag, x) {
		d := x.q.Decl()
		if v := p.h.s.vhost(d.VHost); v != nil {
			v.deleteQueueIfUnused(x.q)
		}
	}
}

// Deliver implements queue.Consumer: the delivery waits for the peer's
// push goroutine.
func (x *proxy) Deliver(q queue.Queue, e queue.Entry, ctx any) queue.Outcome {
	p := x.p
	p.mu.Lock()
	defer p.mu.Unlock()
	x.busy = false
	if x.gone || p.closed || !x.started {
		return queue.Refused
	}
	if x.credit <= 0 {
		x.busy = true
		return queue.Refused
	}
	x.credit--
	p.out = append(p.out, outDelivery{proxy: x.id, q: q, e: e, props: q.DeliveryProps(e), noAck: x.noAck})
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if x.noAck {
		return queue.Settled
	}
	p.held[heldKey{q, e.Seq}] = heldEntry{e: e, proxy: x.id}
	return queue.Pending
}

// maxPushBatch bounds the bytes of one "warren.deliver" call.
const maxPushBatch = 4 << 20

// push sends the peer's deliveries until it is shut down.
func (p *peer) push() {
	s := p.h.s
	defer s.clusterWG.Done()
	for {
		select {
		case <-p.wake:
		case <-p.stop:
			return
		case <-s.clusterCtx.Done():
			return
		}
		for {
			p.mu.Lock()
			n, size := 0, 0
			for n < len(p.out) && (n == 0 || size+len(p.out[n].e.Msg.Body) <= maxPushBatch) {
				size += len(p.out[n].e.Msg.Body) + len(p.out[n].props)
				n++
			}
			batch := p.out[:n:n]
			p.out = p.out[n:]
			p.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			if !p.send(batch) {
				p.h.peerDown(p.node)
				return
			}
		}
	}
}

// send makes one "warren.deliver" call; false when the peer did not
// answer.
func (p *peer) send(batch []outDelivery) bool {
	s := p.h.s
	var w wbuf
	for _, d := range batch {
		w.uv(d.proxy)
		encodeEntry(&w, d.e, d.props)
	}
	n := s.cluster
	if n == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(s.clusterCtx, 2*remoteCallTimeout)
	out, err := n.Call(ctx, p.node, "warren.deliver", w.b)
	cancel()
	if err != nil {
		s.log.Warn().Err(err).Str("node", p.node).Msg("delivering to a consumer on another node failed")
		return false
	}
	// Consumers gone there: what this batch sent them is requeued.
	r := rbuf{b: out}
	gone := map[uint64]bool{}
	for !r.done() {
		gone[r.uv()] = true
	}
	if len(gone) == 0 {
		return true
	}
	var drop []*proxy
	byQueue := map[queue.Queue][]queue.Entry{}
	p.mu.Lock()
	for id := range gone {
		if x := p.proxies[id]; x != nil {
			x.gone = true
			delete(p.proxies, id)
			drop = append(drop, x)
		}
	}
	for _, d := range batch {
		if gone[d.proxy] && !d.noAck {
			k := heldKey{d.q, d.e.Seq}
			if _, ok := p.held[k]; ok {
				delete(p.held, k)
				byQueue[d.q] = append(byQueue[d.q], d.e)
			}
		}
	}
	p.mu.Unlock()
	for q, es := range byQueue {
		q.Settle(es, queue.Requeue)
	}
	for _, x := range drop {
		p.removeProxy(x)
	}
	return true
}

// homeQueue finds a real queue of this node.
func (s *Server) homeQueue(vhost, name string) (*vhost, queue.Queue) {
	v := s.vhost(vhost)
	if v == nil {
		return nil, nil
	}
	q := v.lookupQueue(name)
	if _, remote := q.(*remoteQueue); remote || q == nil {
		return v, nil
	}
	return v, q
}

// handleConsume is "warren.consume": a consumer of node from.
func (h *homeSide) handleConsume(_ context.Context, from string, req []byte) ([]byte, error) {
	var c consumeReq
	if err := json.Unmarshal(req, &c); err != nil {
		return nil, err
	}
	_, q := h.s.homeQueue(c.VHost, c.Queue)
	if q == nil {
		return []byte(consumeDeleted), nil
	}
	p := h.peer(from)
	window := int(c.Prefetch)
	if window == 0 {
		window = defaultRemoteWindow
	}
	x := &proxy{p: p, id: c.ID, tag: c.Tag, q: q, noAck: c.NoAck, credit: window}
	p.mu.Lock()
	if _, ok := p.cancelled[c.ID]; ok {
		// Cancelled already (its channel moved it, or closed).
		delete(p.cancelled, c.ID)
		p.mu.Unlock()
		return []byte(consumeDeleted), nil
	}
	p.proxies[c.ID] = x
	p.mu.Unlock()
	err := q.AddConsumer(queue.ConsumeOptions{Tag: c.Tag, Consumer: x, Exclusive: c.Exclusive, Priority: c.Priority,
		Args: persist.DecodeArgs(c.Args), NoAck: c.NoAck, Prefetch: c.Prefetch})
	if err != nil {
		p.mu.Lock()
		delete(p.proxies, c.ID)
		p.mu.Unlock()
	}
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, queue.ErrExclusiveConsumer):
		return []byte(consumeExclusive), nil
	case errors.Is(err, queue.ErrHasConsumers):
		return []byte(consumeHasConsumers), nil
	case errors.Is(err, queue.ErrDeleted):
		return []byte(consumeDeleted), nil
	}
	return []byte(err.Error()), nil
}

// handleOps is "warren.ops": publishes, settlements, credit, starts and
// cancels from node from, in its order. It answers once every publish's
// store write is done (its confirm).
func (h *homeSide) handleOps(_ context.Context, from string, req []byte) ([]byte, error) {
	s := h.s
	r := rbuf{b: req}
	var statuses []byte
	var wg sync.WaitGroup
	var smu sync.Mutex
	p := h.peer(from)
	for !r.done() {
		switch r.u8() {
		case linkPublish:
			vh, names := r.str(), r.strs()
			ex, rk := r.str(), r.str()
			props, body := r.bytes(), r.bytes()
			if r.err != nil {
				return nil, r.err
			}
			i := len(statuses)
			statuses = append(statuses, pubOK)
			v := s.vhost(vh)
			if v == nil {
				continue
			}
			var qs []queue.Queue
			notHere := false
			for _, n := range names {
				if _, q := s.homeQueue(vh, n); q != nil {
					qs = append(qs, q)
				} else if v.lookupQueue(n) != nil {
					// Not its home (any more): a quorum queue whose
					// replica left this node, which the sender's
					// stand-in still takes for a member. A nack, never
					// a confirm of a message no queue took: the sender
					// publishes again once it knows a member.
					notHere = true
				}
			}
			if notHere {
				statuses[i] = pubNack
				s.log.Warn().Str("vhost", vh).Strs("queues", names).Str("from", from).Msg("forwarded publish for a queue not served here: nacked")
				continue
			}
			msg := queue.NewStored(ex, rk, props, body, 0)
			wg.Add(1)
			_, dropped := v.deliver(msg, qs, func(err error) {
				if err != nil {
					smu.Lock()
					statuses[i] = pubNack
					smu.Unlock()
				}
				wg.Done()
			}, nil)
			if dropped {
				smu.Lock()
				statuses[i] = pubNack
				smu.Unlock()
			}
		case linkSettle:
			vh, name, op := r.str(), r.str(), queue.SettleOp(r.u8())
			n := r.uv()
			if r.err != nil || n > uint64(len(r.b)) {
				return nil, errShortRPC
			}
			seqs := make([]uint64, 0, n)
			for range n {
				seqs = append(seqs, r.uv())
			}
			_, q := s.homeQueue(vh, name)
			p.settle(q, vh, name, seqs, op)
		case linkCredit:
			id, n := r.uv(), r.uv()
			p.credit(id, int(n))
		case linkStart:
			p.start(r.uv())
		case linkCancel:
			p.cancel(r.uv())
		default:
			return nil, errShortRPC
		}
	}
	wg.Wait()
	smu.Lock()
	defer smu.Unlock()
	return statuses, nil
}

// settle ends deliveries the peer held of vhost's queue name, served
// here by q (nil: none now) or, for what it delivered before it left
// this node, by its retired replica; it gives their proxies credit.
func (p *peer) settle(q queue.Queue, vhost, name string, seqs []uint64, op queue.SettleOp) {
	var es, old []queue.Entry
	var retired queue.Queue
	looked := false
	kick := false
	p.mu.Lock()
	for _, seq := range seqs {
		k := heldKey{q, seq}
		he, ok := p.held[k]
		if !ok && !looked {
			// Only on a miss (rare): no lock per settlement otherwise.
			retired, looked = p.h.retiredQueue(vhost, name), true
		}
		if !ok && retired != nil {
			k = heldKey{retired, seq}
			he, ok = p.held[k]
		}
		if !ok {
			continue // requeued already (the peer was taken for gone), or another process's
		}
		delete(p.held, k)
		if k.q == q {
			es = append(es, he.e)
		} else {
			old = append(old, he.e)
		}
		if x := p.proxies[he.proxy]; x != nil && k.q == q {
			x.credit++
			kick = true
		}
	}
	p.mu.Unlock()
	if len(es) > 0 {
		q.Settle(es, op)
	}
	if len(old) > 0 {
		retired.Settle(old, op)
	}
	if kick {
		q.Kick(nil)
	}
}

func (p *peer) credit(id uint64, n int) {
	p.mu.Lock()
	x := p.proxies[id]
	if x != nil {
		x.credit += n
	}
	p.mu.Unlock()
	if x != nil {
		x.q.Kick(nil)
	}
}

func (p *peer) start(id uint64) {
	p.mu.Lock()
	x := p.proxies[id]
	if x != nil {
		x.started = true
	}
	p.mu.Unlock()
	if x != nil {
		x.q.Kick(nil)
	}
}

// cancel removes a proxy; what it delivered stays held until settled.
func (p *peer) cancel(id uint64) {
	p.mu.Lock()
	x := p.proxies[id]
	delete(p.proxies, id)
	if x != nil {
		x.gone = true
	} else {
		// Its consume may still be on its way.
		now := time.Now()
		if p.cancelled == nil {
			p.cancelled = map[uint64]time.Time{}
		}
		for k, at := range p.cancelled {
			if now.Sub(at) > cancelledFor {
				delete(p.cancelled, k)
			}
		}
		p.cancelled[id] = now
	}
	p.mu.Unlock()
	if x != nil {
		p.removeProxy(x)
	}
}

// handleGet is "warren.get".
func (h *homeSide) handleGet(_ context.Context, from string, req []byte) ([]byte, error) {
	r := rbuf{b: req}
	vh, name, noAck := r.str(), r.str(), r.flag()
	if r.err != nil {
		return nil, r.err
	}
	var w wbuf
	_, q := h.s.homeQueue(vh, name)
	g, ok := q.(queue.Getter)
	if q == nil || !ok {
		w.flag(false)
		w.uv(0)
		return w.b, nil
	}
	p := h.peer(from)
	e, remaining, ok := g.Get(noAck)
	w.flag(ok)
	w.uv(uint64(remaining))
	if ok {
		if !noAck {
			p.mu.Lock()
			p.held[heldKey{q, e.Seq}] = heldEntry{e: e}
			p.mu.Unlock()
		}
		encodeEntry(&w, e, q.DeliveryProps(e))
	}
	return w.b, nil
}

func (h *homeSide) handleStats(_ context.Context, _ string, req []byte) ([]byte, error) {
	r := rbuf{b: req}
	vh, name := r.str(), r.str()
	_, q := h.s.homeQueue(vh, name)
	if q == nil {
		return json.Marshal(queue.Stats{})
	}
	st := homeStats{Stats: q.Stats()}
	if qq, ok := q.(*quorum.Queue); ok {
		st.Leader = qq.LeaderNode()
	}
	return json.Marshal(st)
}

func (h *homeSide) handlePurge(_ context.Context, _ string, req []byte) ([]byte, error) {
	r := rbuf{b: req}
	vh, name := r.str(), r.str()
	_, q := h.s.homeQueue(vh, name)
	var w wbuf
	if pg, ok := q.(queue.Purger); ok && q != nil {
		w.uv(uint64(pg.Purge()))
	} else {
		w.uv(0)
	}
	return w.b, nil
}

// handleDelete is "warren.qdelete": another node's queue.delete of a
// queue of this one.
func (h *homeSide) handleDelete(_ context.Context, _ string, req []byte) ([]byte, error) {
	r := rbuf{b: req}
	vh, name, ifUnused, ifEmpty := r.str(), r.str(), r.flag(), r.flag()
	if r.err != nil {
		return nil, r.err
	}
	v, q := h.s.homeQueue(vh, name)
	var res metaResult
	if q == nil {
		res.Err = encodeErr(&NotFoundError{Kind: "queue", Name: name, VHost: vh})
	} else if rep := v.replicaOf(q); rep == nil {
		res.Err = encodeErr(&NotFoundError{Kind: "queue", Name: name, VHost: vh})
	} else {
		n, err := v.deleteHomed(q, rep, ifUnused, ifEmpty)
		res.N, res.Err = n, encodeErr(err)
	}
	return json.Marshal(res)
}
