package server

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// vhost is one virtual host: its exchanges, queues and bindings. mu guards
// the maps and every exchange's bindings; routing takes it for reading.
type vhost struct {
	name  string
	srv   *Server
	store persist.Store
	log   *zerolog.Logger

	mu        sync.RWMutex
	exchanges map[string]*exchange.Exchange
	queues    map[string]queue.Queue
	// replicas are the queues of the cluster's metadata group, by name:
	// their home and incarnation (cluster_meta.go); nil for a single node.
	replicas map[string]*replica
	// headersExchanges counts headers exchanges, so that publishes decode
	// the headers property only when some exchange could look at it.
	headersExchanges int
	lookup           exchange.Lookup
	scratchPool      sync.Pool
	hooks            queue.Hooks
	policies         []policyEntry // highest priority first
	// conns counts the open connections, for the max-connections limit.
	conns atomic.Int64
	stats vhostStats // message_stats counters (stats.go)
	// tracing is on while the firehose is (trace.go); tr is its state.
	tracing atomic.Bool
	tr      tracer
}

func newVhost(s *Server, name string) *vhost {
	v := &vhost{
		name:      name,
		srv:       s,
		store:     s.store,
		log:       &s.log,
		exchanges: map[string]*exchange.Exchange{},
		queues:    map[string]queue.Queue{},
		replicas:  map[string]*replica{},
	}
	v.lookup = func(name string) *exchange.Exchange { return v.exchanges[name] }
	v.scratchPool.New = func() any { return &routeScratch{} }
	v.hooks = queue.Hooks{
		DeadLetter: v.deadLetter,
		Expired:    func(q queue.Queue) { v.deleteQueueIfUnused(q) },
		Cancel: func(_ queue.Queue, c queue.ConsumerRef) {
			if k, ok := c.Consumer.(*consumer); ok {
				k.ch.cancelByBroker(k)
			}
		},
	}
	for _, d := range []exchange.Decl{
		{Name: "", Kind: exchange.Direct, Durable: true},
		{Name: "amq.direct", Kind: exchange.Direct, Durable: true},
		{Name: "amq.fanout", Kind: exchange.Fanout, Durable: true},
		{Name: "amq.topic", Kind: exchange.Topic, Durable: true},
		{Name: "amq.headers", Kind: exchange.Headers, Durable: true},
		{Name: "amq.match", Kind: exchange.Headers, Durable: true},
		{Name: traceExchange, Kind: exchange.Topic, Durable: true, Internal: true},
	} {
		v.addExchange(d)
	}
	return v
}

// addExchange creates an exchange. v.mu must be held (or v unpublished).
func (v *vhost) addExchange(d exchange.Decl) *exchange.Exchange {
	e := exchange.New(d)
	v.exchanges[d.Name] = e
	if d.Kind == exchange.Headers {
		v.headersExchanges++
	}
	return e
}

// removeExchange deletes e and every binding to or from it. v.mu must be
// held for writing.
func (v *vhost) removeExchange(e *exchange.Exchange) {
	if e.Durable {
		v.forgetBindingsFrom(e)
		v.logStoreErr(v.store.DeleteExchange(v.name, e.Name))
	}
	delete(v.exchanges, e.Name)
	if e.Kind == exchange.Headers {
		v.headersExchanges--
	}
	v.unbindDest(binding.Destination{Kind: binding.Exchange, Name: e.Name})
}

// unbindDest removes every binding to d, then auto-deletes exchanges that
// lost their last binding as RabbitMQ does. v.mu must be held for writing.
func (v *vhost) unbindDest(d binding.Destination) {
	v.forgetBindingsTo(d)
	// In a cluster an exchange losing a binding to an exclusive queue,
	// which only this node has, stays: the metadata group decides.
	local := v.srv.clustered() && v.localDest(d)
	for _, src := range v.exchanges {
		if src.UnbindDest(d) > 0 && !local {
			v.maybeAutoDeleteExchange(src)
		}
	}
}

// maybeAutoDeleteExchange deletes an auto-delete exchange with no bindings
// left where it is the source. v.mu must be held for writing.
func (v *vhost) maybeAutoDeleteExchange(e *exchange.Exchange) {
	if e.AutoDelete && !e.HasBindings() && v.exchanges[e.Name] == e {
		v.removeExchange(e)
	}
}

type routeScratch struct {
	ex     exchange.Scratch
	names  []string
	queues []queue.Queue
	found  bool // the exchange exists
}

// routeMessage resolves a message to its queues, decoding the headers
// property only if a headers exchange could look at it. Hand the result
// back with releaseScratch.
func (v *vhost) routeMessage(exName, key string, props []byte) *routeScratch {
	s, _, found := v.route(exName, key, func() map[string]any {
		h, _ := amqp.PropHeaders(props)
		return map[string]any(h)
	})
	s.found = found
	return s
}

// route resolves a publish to its queues. It returns the scratch holding
// the result, to be handed back with releaseScratch, and whether the
// exchange exists. headers is called at most once, only if needed.
func (v *vhost) route(exName, key string, headers func() map[string]any) (*routeScratch, *exchange.Exchange, bool) {
	s := v.scratchPool.Get().(*routeScratch)
	s.names, s.queues = s.names[:0], s.queues[:0]
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.exchanges[exName]
	if e == nil {
		return s, nil, false
	}
	if exName == "" {
		if q := v.queues[key]; q != nil {
			s.queues = append(s.queues, q)
		}
		return s, e, true
	}
	var h map[string]any
	if v.headersExchanges > 0 {
		h = headers()
	}
	s.names = exchange.RouteAll(v.lookup, e, key, h, &s.ex, s.names)
	for _, n := range s.names {
		if q := v.queues[n]; q != nil {
			s.queues = append(s.queues, q)
		}
	}
	return s, e, true
}

func (v *vhost) releaseScratch(s *routeScratch) {
	clear(s.queues)
	v.scratchPool.Put(s)
}

// deleteQueue removes q (its store record too) and its bindings, and
// tells its consumers. It is a no-op for a queue already gone.
func (v *vhost) deleteQueue(q queue.Queue, ifUnused, ifEmpty bool) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := q.Decl().Name
	ready, consumers, err := q.Delete(ifUnused, ifEmpty)
	if err != nil {
		return 0, err
	}
	if v.queues[name] == q {
		v.unbindDest(binding.Destination{Kind: binding.Queue, Name: name})
		delete(v.queues, name)
		delete(v.replicas, name)
		v.srv.churn.queueDeleted.Add(1)
	}
	for _, c := range consumers {
		if k, ok := c.Consumer.(*consumer); ok {
			k.ch.cancelByBroker(k)
		}
	}
	return ready, nil
}

// deleteQueueIfUnused auto-deletes q after its last consumer left (or
// expires it). In a cluster the home of a replicated queue proposes its
// deletion, on a goroutine of its own: this may run under locks Apply
// takes.
func (v *vhost) deleteQueueIfUnused(q queue.Queue) {
	if r := v.replicaOf(q); r != nil {
		if v.srv.meta.isSelf(r.home) {
			go v.deleteHomed(q, r, true, false)
		}
		return
	}
	v.deleteQueue(q, true, false)
}

// deleteExclusive deletes every exclusive queue owned by connection
// owner; in a cluster its home (this node) proposes the deletion.
func (v *vhost) deleteExclusive(owner uint64) {
	v.mu.RLock()
	var qs []queue.Queue
	for _, q := range v.queues {
		if d := q.Decl(); d.Exclusive && d.Owner == owner {
			qs = append(qs, q)
		}
	}
	v.mu.RUnlock()
	for _, q := range qs {
		if r := v.replicaOf(q); r != nil {
			if _, err := v.deleteHomed(q, r, false, false); err != nil {
				v.srv.log.Warn().Err(err).Str("vhost", v.name).Str("queue", q.Decl().Name).Msg("deleting a closed connection's exclusive queue failed")
			}
			continue
		}
		v.deleteQueue(q, false, false)
	}
}

// genName returns a server-generated name such as amq.gen-<random>.
func genName(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
