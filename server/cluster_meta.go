package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// The broker's definitions in the cluster's metadata group (issue 14).
//
// In cluster mode every definition change (exchanges, bindings, queue
// records but exclusive queues', vhosts, users, permissions, limits,
// policies) is a command proposed to the metadata group. Apply runs on
// every node, in log order, the same code a single node runs under
// vhost.mu, against the live vhost state, which every node builds from
// the same commands: the checks that can fail (inequivalent, not found,
// in use, the queue limit, the permissions a new queue or exchange needs)
// reach the same verdict everywhere. The node the command came through
// gets its own Apply's result from Propose and answers its client with
// it (metaResult: the reply code and text replyError gave, and the typed
// error's fields).
//
// A queue record carries its home node (the one that declared it) and
// its incarnation (the log index of its declaration). On its home the
// queue is the real queue; elsewhere a remoteQueue (cluster_remote.go).
// At a restart the home's stored queues are kept aside (stash) and
// reopened with their messages when the log or a snapshot declares them
// again with the incarnation they were stored with (cluster\x00queues
// blob); an older incarnation, replayed before its deletion, is a ghost
// that the replay deletes again, never the stored queue.
//
// Apply must be deterministic: no clock, no map order, no randomness.
// Command ids (cmd.ID) make a command proposed again after an unknown
// outcome take effect once: the results of the last maxRecent commands
// are kept, in the snapshot too.

// maxRecent is how many command results Apply remembers for retries.
const maxRecent = 4096

// proposeTimeout bounds a definition change waiting for the metadata group.
const proposeTimeout = 30 * time.Second

// incarnationsBlob is where a node keeps the incarnations of the
// queues it is the home of.
const incarnationsBlob = "cluster\x00queues"

// metaCmd is one command of the metadata group.
type metaCmd struct {
	ID     string `json:"id"`
	Op     string `json:"op"`
	VHost  string `json:"vhost,omitempty"`
	User   string `json:"user,omitempty"` // the Actor's
	System bool   `json:"system,omitempty"`

	Queue    *metaQueue    `json:"queue,omitempty"`
	Exchange *metaExchange `json:"exchange,omitempty"`
	Binding  *metaBinding  `json:"binding,omitempty"`
	Name     string        `json:"name,omitempty"`
	IfUnused bool          `json:"if_unused,omitempty"`
	Node     string        `json:"node,omitempty"`
	// Inc names the incarnation a queue command is for (0: the current).
	Inc uint64 `json:"inc,omitempty"`

	Policy *Policy  `json:"policy,omitempty"`
	Admin  *auth.Op `json:"admin,omitempty"`
	// Features: a node.started command's, its build's (cluster_features.go).
	Features []string `json:"features,omitempty"`
}

// Command ops.
const (
	opQueueDeclare    = "queue.declare"
	opQueueDelete     = "queue.delete"
	opExchangeDeclare = "exchange.declare"
	opExchangeDelete  = "exchange.delete"
	opBind            = "bind"
	opUnbind          = "unbind"
	opPolicySet       = "policy.set"
	opPolicyDelete    = "policy.delete"
	opAdmin           = "admin"
	opNodeStarted     = "node.started"
)

type metaQueue struct {
	Name       string `json:"name"`
	Durable    bool   `json:"durable,omitempty"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Args       []byte `json:"args,omitempty"` // persist.EncodeArgs: types kept
	Home       string `json:"home,omitempty"`
	Inc        uint64 `json:"inc,omitempty"` // in snapshots
	// A quorum queue's replica set and the member that leads first.
	Members []string `json:"members,omitempty"`
	Lead    string   `json:"lead,omitempty"`
	// Exclusive: the queue of the connection Owner names (ownerKey),
	// which is on Home.
	Exclusive bool   `json:"exclusive,omitempty"`
	Owner     string `json:"owner,omitempty"`
}

type metaExchange struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	Durable    bool   `json:"durable,omitempty"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Internal   bool   `json:"internal,omitempty"`
	Args       []byte `json:"args,omitempty"`
}

type metaBinding struct {
	Source       string `json:"source"`
	Dest         string `json:"dest"`
	DestExchange bool   `json:"dest_exchange,omitempty"`
	Key          string `json:"key,omitempty"`
	Args         []byte `json:"args,omitempty"`
}

func (b *metaBinding) binding() binding.Binding {
	d := binding.Destination{Kind: binding.Queue, Name: b.Dest}
	if b.DestExchange {
		d.Kind = binding.Exchange
	}
	return binding.Binding{Dest: d, Key: b.Key, Args: persist.DecodeArgs(b.Args)}
}

func newMetaBinding(src string, b binding.Binding) *metaBinding {
	return &metaBinding{Source: src, Dest: b.Dest.Name, DestExchange: b.Dest.Kind == binding.Exchange, Key: b.Key, Args: persist.EncodeArgs(b.Args)}
}

// metaResult is what Apply returns: the error, as replyError words it
// and with the fields of its type, or what the operation counted.
type metaResult struct {
	Err *metaErr `json:"err,omitempty"`
	N   int      `json:"n,omitempty"`
}

type metaErr struct {
	Code   uint16 `json:"code"`
	Text   string `json:"text"`
	Type   string `json:"type,omitempty"` // notfound, locked, access, precondition, notimpl, homedown
	Kind   string `json:"kind,omitempty"`
	Name   string `json:"name,omitempty"`
	VHost  string `json:"vhost,omitempty"`
	User   string `json:"user,omitempty"`
	Reason uint8  `json:"reason,omitempty"`
	Node   string `json:"node,omitempty"`
}

// appliedError is an error Apply reached: its reply as Apply's
// replyError worded it, and the typed error rebuilt for callers that
// look at the type (the management API).
type appliedError struct {
	reply amqp.Error
	typed error
}

func (e *appliedError) Error() string { return e.reply.Error() }
func (e *appliedError) Unwrap() error { return e.typed }

func encodeErr(err error) *metaErr {
	if err == nil {
		return nil
	}
	r := replyError(err)
	me := &metaErr{Code: r.Code, Text: r.Text}
	var (
		nf  *NotFoundError
		le  *LockedError
		acc *AccessError
		pe  *PreconditionError
		ni  *NotImplementedError
		hd  *HomeDownError
		ap  *appliedError
	)
	switch {
	case errors.As(err, &ap):
		return encodeErr(ap.typed)
	case errors.Is(err, auth.ErrNoUser):
		me.Type = "nouser"
	case errors.Is(err, auth.ErrNoVHost):
		me.Type = "novhost"
	case errors.As(err, &hd):
		me.Type, me.Name, me.VHost, me.Node = "homedown", hd.Name, hd.VHost, hd.Node
	case errors.As(err, &nf):
		me.Type, me.Kind, me.Name, me.VHost = "notfound", nf.Kind, nf.Name, nf.VHost
	case errors.As(err, &le):
		me.Type, me.Name, me.VHost = "locked", le.Name, le.VHost
	case errors.As(err, &acc):
		me.Type, me.Kind, me.Name, me.VHost, me.User, me.Reason = "access", acc.Kind, acc.Name, acc.VHost, acc.User, uint8(acc.Reason)
	case errors.As(err, &pe):
		me.Type, me.Kind, me.Name, me.VHost, me.Reason = "precondition", pe.Kind, pe.Name, pe.VHost, uint8(pe.Reason)
	case errors.As(err, &ni):
		me.Type, me.Kind, me.Name, me.VHost = "notimpl", ni.Type, ni.Queue, ni.VHost
	}
	return me
}

func (me *metaErr) err() error {
	if me == nil {
		return nil
	}
	var typed error
	switch me.Type {
	case "nouser":
		return auth.ErrNoUser
	case "novhost":
		return auth.ErrNoVHost
	case "homedown":
		typed = &HomeDownError{Name: me.Name, VHost: me.VHost, Node: me.Node}
	case "notfound":
		typed = &NotFoundError{Kind: me.Kind, Name: me.Name, VHost: me.VHost}
	case "locked":
		typed = &LockedError{Name: me.Name, VHost: me.VHost}
	case "access":
		typed = &AccessError{Reason: AccessReason(me.Reason), Kind: me.Kind, Name: me.Name, VHost: me.VHost, User: me.User}
	case "precondition":
		typed = &PreconditionError{Reason: PreconditionReason(me.Reason), Kind: me.Kind, Name: me.Name, VHost: me.VHost}
	case "notimpl":
		typed = &NotImplementedError{Type: me.Kind, Queue: me.Name, VHost: me.VHost}
	default:
		typed = errors.New(me.Text)
	}
	return &appliedError{reply: amqp.Error{Code: me.Code, Text: me.Text}, typed: typed}
}

// replica is a replicated queue's record: its home node and incarnation.
type replica struct {
	home string
	inc  uint64
	// members and lead: a quorum queue's replica set and first leader.
	members []string
	lead    string
	// owner is the declaring connection (ownerKey): an exclusive queue
	// is locked to every other, on every node alike.
	owner string
}

// foreignOwner is the Decl.Owner of an exclusive queue whose connection
// is not on this node (or not of this process): no connection has it.
// Not 0, which is the management API's Actor.Conn.
const foreignOwner = ^uint64(0)

// ownerKey names connection conn of this process cluster-wide.
func (m *meta) ownerKey(conn uint64) string { return m.idBase + strconv.FormatUint(conn, 10) }

// ownerConn is the Decl.Owner of an exclusive queue owned by key: the
// connection's id if it is of this process, foreignOwner otherwise.
func (m *meta) ownerConn(key string) uint64 {
	if rest, ok := strings.CutPrefix(key, m.idBase); ok {
		if id, err := strconv.ParseUint(rest, 10, 64); err == nil {
			return id
		}
	}
	return foreignOwner
}

type qkey struct{ vhost, name string }

// stashed is a stored queue of this node waiting for its declaration.
type stashed struct {
	rec persist.QueueRecord
	inc uint64
}

// meta is the server's cluster.StateMachine.
type meta struct {
	s    *Server
	self string

	// The FSM goroutine's (Apply, Snapshot, Restore):
	recent map[string][]byte
	order  []string
	// stash: stored queues homed here, not yet declared again (restart).
	stash map[qkey]stashed
	// incs: the incarnation of each real queue homed here (persisted).
	incs map[qkey]uint64
	// seeded: the access control got its first start's vhost and users.
	seeded bool

	// nextID numbers this node's commands.
	nextID atomic.Uint64
	idBase string

	// startedMu guards started: the node.started command of this process
	// was applied here.
	startedMu sync.Mutex
	started   chan struct{}

	// mineMu guards mine: this node's Apply results of the commands it
	// proposed, by id, until propose takes them. Propose returns the
	// leader's result; a queue deletion's message count is the home's,
	// so the proposing node answers with its own.
	mineMu sync.Mutex
	mine   map[string][]byte

	// featMu guards features: each node's, as its last node.started
	// named them (cluster_features.go).
	featMu   sync.Mutex
	features map[string][]string
}

func newMeta(s *Server) *meta {
	var b [6]byte
	rand.Read(b[:])
	return &meta{
		s: s, self: s.cfg.Cluster.NodeName, recent: map[string][]byte{},
		stash: map[qkey]stashed{}, incs: map[qkey]uint64{}, mine: map[string][]byte{},
		idBase: s.cfg.Cluster.NodeName + "/" + hex.EncodeToString(b[:]) + "/", started: make(chan struct{}),
	}
}

// clustered reports whether definitions go through the metadata group.
func (s *Server) clustered() bool { return s.meta != nil }

// isSelf reports whether node is this one.
func (m *meta) isSelf(node string) bool { return node == m.self }

// propose commits c and returns this node's Apply result. It retries an
// unknown outcome with the same id (Apply does it once) until
// proposeTimeout.
func (s *Server) propose(c *metaCmd) (metaResult, error) {
	m := s.meta
	if c.Op == opQueueDeclare && c.Queue != nil {
		// RabbitMQ refuses any declaration of a queue whose home node
		// is down (404) before it compares arguments.
		if v := s.vhost(c.VHost); v != nil {
			if q := v.lookupQueue(c.Queue.Name); q != nil {
				if err := homeDown(q); err != nil {
					return metaResult{}, err
				}
			}
		}
	}
	c.ID = m.idBase + fmt.Sprint(m.nextID.Add(1))
	b, err := json.Marshal(c)
	if err != nil {
		return metaResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	for {
		n := s.cluster
		if n == nil {
			return metaResult{}, errClusterDown
		}
		out, err := n.Propose(ctx, b)
		if err == nil {
			// Propose returned after this node's Apply of the command,
			// and every other member's (cluster.Options.ApplyEverywhere).
			if own, ok := m.takeMine(c.ID); ok {
				out = own
			}
			var r metaResult
			if err := json.Unmarshal(out, &r); err != nil {
				return metaResult{}, fmt.Errorf("cluster: metadata result: %w", err)
			}
			return r, r.Err.err()
		}
		if errors.Is(err, cluster.ErrClosed) || ctx.Err() != nil {
			s.log.Warn().Err(err).Str("op", c.Op).Msg("definition change not committed")
			return metaResult{}, errClusterDown
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// maxMine bounds meta.mine (results of proposals that gave up before
// their Apply are never taken).
const maxMine = 4096

func (m *meta) putMine(id string, out []byte) {
	m.mineMu.Lock()
	defer m.mineMu.Unlock()
	if len(m.mine) >= maxMine {
		clear(m.mine)
	}
	m.mine[id] = out
}

func (m *meta) takeMine(id string) ([]byte, bool) {
	m.mineMu.Lock()
	defer m.mineMu.Unlock()
	out, ok := m.mine[id]
	delete(m.mine, id)
	return out, ok
}

// errClusterDown: the metadata group did not commit a change in time.
var errClusterDown = amqp.Errorf(amqp.InternalError, 0, 0, "cluster metadata unavailable: no quorum of nodes answered in time")

// Apply implements cluster.StateMachine.
func (m *meta) Apply(index uint64, b []byte) []byte {
	var c metaCmd
	if err := json.Unmarshal(b, &c); err != nil {
		out, _ := json.Marshal(metaResult{Err: &metaErr{Code: amqp.InternalError, Text: "undecodable metadata command"}})
		return out
	}
	if c.ID != "" {
		if res, ok := m.recent[c.ID]; ok {
			return res
		}
	}
	res := m.apply(index, &c)
	out, _ := json.Marshal(res)
	if strings.HasPrefix(c.ID, m.idBase) {
		m.putMine(c.ID, out)
	}
	if c.ID != "" {
		m.recent[c.ID] = out
		m.order = append(m.order, c.ID)
		if len(m.order) > maxRecent {
			delete(m.recent, m.order[0])
			m.order = slices.Delete(m.order, 0, 1)
		}
	}
	return out
}

func (c *metaCmd) actor() Actor { return Actor{User: c.User, System: c.System} }

func (m *meta) apply(index uint64, c *metaCmd) metaResult {
	s := m.s
	switch c.Op {
	case opAdmin:
		return metaResult{Err: encodeErr(s.applyAdmin(c.Admin))}
	case opNodeStarted:
		if c.Admin != nil {
			s.applyAdmin(c.Admin)
		}
		m.setFeatures(c.Node, c.Features)
		m.nodeStarted(c.Node, strings.HasPrefix(c.ID, m.idBase))
		return metaResult{}
	case opNodeForget: // cluster_forget.go
		return m.applyNodeForget(c.Node)
	}
	v := s.vhost(c.VHost)
	if v == nil {
		return metaResult{Err: encodeErr(&NotFoundError{Kind: "vhost", Name: c.VHost})}
	}
	switch c.Op {
	case opQueueDeclare:
		q := c.Queue
		decl := queue.Decl{VHost: v.name, Name: q.Name, Durable: q.Durable, Exclusive: q.Exclusive, AutoDelete: q.AutoDelete, Args: persist.DecodeArgs(q.Args)}
		if q.Exclusive {
			decl.Owner = m.ownerConn(q.Owner)
		}
		_, err := v.openQueue(c.actor(), decl, &replica{home: q.Home, inc: index, members: q.Members, lead: q.Lead, owner: q.Owner})
		return metaResult{Err: encodeErr(err)}
	case opQueueDelete:
		n, err := v.applyQueueDelete(c.Name, c.Inc)
		return metaResult{N: n, Err: encodeErr(err)}
	case opExchangeDeclare:
		x := c.Exchange
		kind, _ := exchange.ParseKind(x.Kind)
		return metaResult{Err: encodeErr(v.declareExchange(c.actor(), exchange.Decl{
			Name: x.Name, Kind: kind, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: persist.DecodeArgs(x.Args),
		}))}
	case opExchangeDelete:
		return metaResult{Err: encodeErr(v.deleteExchange(c.Name, c.IfUnused))}
	case opBind:
		return metaResult{Err: encodeErr(v.changeBinding(c.Binding.Source, c.Binding.binding(), true))}
	case opUnbind:
		return metaResult{Err: encodeErr(v.unbind(c.Binding.Source, c.Binding.binding(), 0, false))}
	case opPolicySet:
		return metaResult{Err: encodeErr(s.setPolicy(v, *c.Policy))}
	case opPolicyDelete:
		return metaResult{Err: encodeErr(s.deletePolicy(v, c.Name))}
	case opQuorumAdd, opQuorumRemove:
		n, err := m.applyMembers(v, c)
		return metaResult{N: n, Err: encodeErr(err)}
	}
	return metaResult{Err: &metaErr{Code: amqp.InternalError, Text: "unknown metadata command " + c.Op}}
}

// nodeStarted: node (re)started, so its non-durable queues are gone, as
// RabbitMQ deletes a node's transient queues when the node goes down.
// On this node, it also tells that the log is applied up to the
// process's start (ours: proposed by this process, not a node.started of
// this node's earlier runs replayed from the log).
func (m *meta) nodeStarted(node string, ours bool) {
	for _, v := range m.s.vhostList() {
		for _, name := range v.transientOf(node) {
			v.applyQueueDelete(name, 0)
		}
	}
	if ours {
		m.startedMu.Lock()
		select {
		case <-m.started:
		default:
			close(m.started)
		}
		m.startedMu.Unlock()
	}
}

// transientOf lists, sorted, the non-durable and the exclusive
// replicated queues homed on node.
func (v *vhost) transientOf(node string) []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []string
	for name, r := range v.replicas {
		if q := v.queues[name]; q != nil && r.home == node && (!q.Decl().Durable || q.Decl().Exclusive) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// vhostList is every vhost, sorted by name.
func (s *Server) vhostList() []*vhost {
	s.vhostsMu.RLock()
	defer s.vhostsMu.RUnlock()
	out := make([]*vhost, 0, len(s.vhosts))
	for _, v := range s.vhosts {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *vhost) int { return strings.Compare(a.name, b.name) })
	return out
}

// applyQueueDelete deletes the replicated queue name (of incarnation inc
// when not 0), whatever holds it; a missing one is deleted already.
func (v *vhost) applyQueueDelete(name string, inc uint64) (int, error) {
	v.mu.RLock()
	q, r := v.queues[name], v.replicas[name]
	v.mu.RUnlock()
	if q == nil || r == nil || (inc != 0 && r.inc != inc) {
		return 0, nil
	}
	n, err := v.deleteQueue(q, false, false)
	if err == nil && v.srv.meta.isSelf(r.home) {
		v.srv.meta.forgetIncarnation(qkey{v.name, name})
	}
	return n, err
}

// newReplica makes the queue of a replicated declaration: the real one on
// its home (reopened from the store at a restart), a stand-in elsewhere.
// v.mu is held.
func (m *meta) newReplica(v *vhost, typ queue.Type, d queue.Decl, l queue.Limits, r *replica) (queue.Queue, error) {
	if typ == queue.Type(m.s.quorum) {
		return m.newQuorumReplica(v, d, l, r)
	}
	if !m.isSelf(r.home) {
		rq := newRemoteQueue(v, d, r.home)
		if typ == queue.Type(m.s.streams) {
			rq.typ = m.s.remote.streamType
		}
		return rq, nil
	}
	k := qkey{v.name, d.Name}
	if st, ok := m.stash[k]; ok {
		switch {
		case st.inc == r.inc:
			delete(m.stash, k)
			rt, ok := typ.(recoverer)
			if ok {
				d.ID = st.rec.ID
				q, n, err := rt.Recover(d, l, v.hooks)
				if err == nil {
					m.incs[k] = r.inc
					if rq, ok := q.(interface{ Recovered() }); ok {
						rq.Recovered()
					}
					m.s.log.Info().Str("vhost", v.name).Str("queue", d.Name).Int("messages", n).Msg("queue recovered at its declaration")
					return q, nil
				}
				m.s.log.Warn().Err(err).Str("queue", d.Name).Msg("recovering a stored queue failed")
			}
		case st.inc > r.inc:
			// An older incarnation, replayed: a ghost until the log
			// deletes it again.
			q := newRemoteQueue(v, d, r.home)
			q.ghost = true
			return q, nil
		default:
			// The stored queue is older than this declaration: gone.
			delete(m.stash, k)
			m.dropStored(v, typ, st, l)
		}
	}
	q, err := typ.New(d, l, v.hooks)
	if err == nil {
		m.incs[k] = r.inc
		m.saveIncarnations()
	}
	return q, err
}

// dropStored deletes a stored queue no declaration names any more.
func (m *meta) dropStored(v *vhost, typ queue.Type, st stashed, l queue.Limits) {
	rt, ok := typ.(recoverer)
	if !ok {
		return
	}
	d := queue.Decl{VHost: st.rec.VHost, Name: st.rec.Name, Durable: true, AutoDelete: st.rec.AutoDelete, Args: persist.DecodeArgs(st.rec.Args), ID: st.rec.ID}
	q, _, err := rt.Recover(d, l, queue.Hooks{})
	if err == nil {
		q.Delete(false, false)
	}
}

func (m *meta) forgetIncarnation(k qkey) {
	delete(m.incs, k)
	m.saveIncarnations()
}

func (m *meta) saveIncarnations() {
	out := map[string]uint64{}
	for k, inc := range m.incs {
		out[k.vhost+"\x00"+k.name] = inc
	}
	b, _ := json.Marshal(out)
	if err := m.s.store.SaveBlob(incarnationsBlob, b); err != nil {
		m.s.log.Error().Err(err).Msg("saving queue incarnations failed")
	}
}

// stashQueues keeps the stored queues aside for their declarations
// (recoverDefinitions in cluster mode).
func (m *meta) stashQueues(recs []persist.QueueRecord) {
	incs := map[string]uint64{}
	if b, err := m.s.store.LoadBlob(incarnationsBlob); err == nil {
		json.Unmarshal(b, &incs)
	}
	for _, r := range recs {
		m.stash[qkey{r.VHost, r.Name}] = stashed{rec: r, inc: incs[r.VHost+"\x00"+r.Name]}
	}
}

// metaSnapshot is the whole definitions state.
type metaSnapshot struct {
	Recent []recentResult `json:"recent,omitempty"`
	Admin  *adminState    `json:"admin,omitempty"`
	VHosts []vhostState   `json:"vhosts"`
	// Features by node (cluster_features.go); earlier builds' lack it.
	Features map[string][]string `json:"features,omitempty"`
}

type recentResult struct {
	ID  string `json:"id"`
	Res []byte `json:"res"`
}

type vhostState struct {
	Name      string         `json:"name"`
	Exchanges []metaExchange `json:"exchanges,omitempty"`
	Queues    []metaQueue    `json:"queues,omitempty"`
	Bindings  []metaBinding  `json:"bindings,omitempty"`
	Policies  []Policy       `json:"policies,omitempty"`
}

// Snapshot implements cluster.StateMachine.
func (m *meta) Snapshot() ([]byte, error) {
	var snap metaSnapshot
	for _, id := range m.order {
		snap.Recent = append(snap.Recent, recentResult{id, m.recent[id]})
	}
	snap.Features = m.featuresSnapshot()
	a, err := m.s.adminSnapshot()
	if err != nil {
		return nil, err
	}
	snap.Admin = a
	for _, v := range m.s.vhostList() {
		snap.VHosts = append(snap.VHosts, v.replicatedState())
	}
	return json.Marshal(snap)
}

// replicatedState is v's replicated definitions, sorted.
func (v *vhost) replicatedState() vhostState {
	v.mu.RLock()
	defer v.mu.RUnlock()
	st := vhostState{Name: v.name}
	for _, e := range v.exchanges {
		if isDefaultExchange(e.Name) {
			continue
		}
		st.Exchanges = append(st.Exchanges, metaExchange{Name: e.Name, Kind: e.Kind.String(), Durable: e.Durable, AutoDelete: e.AutoDelete, Internal: e.Internal, Args: persist.EncodeArgs(e.Args)})
		_ = e
	}
	slices.SortFunc(st.Exchanges, func(a, b metaExchange) int { return strings.Compare(a.Name, b.Name) })
	for name, r := range v.replicas {
		q := v.queues[name]
		if q == nil {
			continue
		}
		d := q.Decl()
		mq := metaQueue{Name: name, Durable: d.Durable, AutoDelete: d.AutoDelete, Args: persist.EncodeArgs(d.Args), Home: r.home, Inc: r.inc,
			Members: r.members, Lead: r.lead}
		if d.Exclusive {
			mq.Exclusive, mq.Owner = true, r.owner
		}
		st.Queues = append(st.Queues, mq)
	}
	slices.SortFunc(st.Queues, func(a, b metaQueue) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range v.exchanges {
		for _, b := range e.Bindings() {
			if v.localDest(b.Dest) {
				continue
			}
			st.Bindings = append(st.Bindings, *newMetaBinding(e.Name, b))
		}
	}
	slices.SortStableFunc(st.Bindings, func(a, b metaBinding) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		if c := strings.Compare(a.Dest, b.Dest); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, p := range v.policies {
		st.Policies = append(st.Policies, p.Policy)
	}
	slices.SortFunc(st.Policies, func(a, b Policy) int { return strings.Compare(a.Name, b.Name) })
	return st
}

// localDest reports whether d is a queue of this node only: an exclusive
// queue declared outside the metadata group (before this node joined a
// cluster). v.mu is held.
func (v *vhost) localDest(d binding.Destination) bool {
	if d.Kind != binding.Queue {
		return false
	}
	q := v.queues[d.Name]
	return q != nil && q.Decl().Exclusive && v.replicas[d.Name] == nil
}

func isDefaultExchange(name string) bool {
	switch name {
	case "", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match", traceExchange:
		return true
	}
	return false
}

// Restore implements cluster.StateMachine: the replicated state becomes
// the snapshot's. Real queues homed here that the snapshot has with the
// same incarnation are kept with their messages.
func (m *meta) Restore(b []byte) error {
	var snap metaSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return fmt.Errorf("decode metadata snapshot: %w", err)
	}
	m.recent = map[string][]byte{}
	m.order = m.order[:0]
	for _, r := range snap.Recent {
		m.recent[r.ID] = r.Res
		m.order = append(m.order, r.ID)
	}
	if snap.Admin != nil {
		if err := m.s.restoreAdmin(snap.Admin); err != nil {
			return err
		}
	}
	for n, fs := range snap.Features {
		m.setFeatures(n, fs)
	}
	for _, st := range snap.VHosts {
		v := m.s.vhost(st.Name)
		if v == nil {
			continue
		}
		m.restoreVHost(v, st)
	}
	return nil
}

func (m *meta) restoreVHost(v *vhost, st vhostState) {
	want := map[string]metaQueue{}
	for _, q := range st.Queues {
		want[q.Name] = q
	}
	// Queues the snapshot does not have as they are here go.
	v.mu.RLock()
	var drop []queue.Queue
	for name, r := range v.replicas {
		q := v.queues[name]
		if w, ok := want[name]; q != nil && (!ok || w.Inc != r.inc || w.Home != r.home) {
			drop = append(drop, q)
		}
	}
	v.mu.RUnlock()
	for _, q := range drop {
		v.deleteQueue(q, false, false)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// Exchanges and bindings: rebuilt.
	for _, e := range v.exchanges {
		if !isDefaultExchange(e.Name) {
			delete(v.exchanges, e.Name)
			if e.Kind == exchange.Headers {
				v.headersExchanges--
			}
			continue
		}
		for _, b := range e.Bindings() {
			if !v.localDest(b.Dest) {
				e.Unbind(b)
			}
		}
	}
	for _, x := range st.Exchanges {
		kind, ok := exchange.ParseKind(x.Kind)
		if !ok {
			continue
		}
		v.addExchange(exchange.Decl{Name: x.Name, Kind: kind, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: persist.DecodeArgs(x.Args)})
	}
	v.policies = nil
	for _, p := range st.Policies {
		if e, err := compilePolicy(p, false); err == nil {
			v.policies = append(v.policies, e)
		}
	}
	sortPolicies(v.policies)
	for _, w := range st.Queues {
		if r := v.replicas[w.Name]; r != nil && v.queues[w.Name] != nil {
			if len(w.Members) > 0 && !slices.Equal(r.members, w.Members) {
				// Kept, with the members the snapshot has (a change this
				// node missed); the consumers of the object replaced move
				// to the new one.
				m.setMembers(v, w.Name, r, w.Members)
			}
			continue // kept
		}
		if q := v.queues[w.Name]; q != nil {
			m.s.log.Warn().Str("queue", w.Name).Msg("a local exclusive queue has the name of a replicated one: the replicated one is not visible here")
			continue
		}
		d := queue.Decl{VHost: v.name, Name: w.Name, Durable: w.Durable, AutoDelete: w.AutoDelete, Args: persist.DecodeArgs(w.Args)}
		if w.Exclusive {
			d.Exclusive, d.Owner = true, m.ownerConn(w.Owner)
		}
		typ, _, err := m.s.types.Check(&d)
		if typ == nil {
			m.s.log.Warn().Err(err).Str("queue", w.Name).Msg("replicated queue of an unknown type")
			continue
		}
		limits, err := v.effectiveLimits(w.Name, d.Args)
		if err != nil {
			limits, _ = queue.ParseArgs(nil)
		}
		r := &replica{home: w.Home, inc: w.Inc, members: w.Members, lead: w.Lead, owner: w.Owner}
		q, err := m.newReplica(v, typ, d, limits, r)
		if err != nil {
			m.s.log.Warn().Err(err).Str("queue", w.Name).Msg("restoring a replicated queue failed")
			continue
		}
		v.queues[w.Name] = q
		v.replicas[w.Name] = r
	}
	for _, b := range st.Bindings {
		if e := v.exchanges[b.Source]; e != nil {
			e.Bind(b.binding())
		}
	}
}
