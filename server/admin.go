package server

// This file is the broker's admin API, for the management HTTP layer (package
// mgmt) and anything else that inspects or drives a running broker. It has
// two halves:
//
//   - Snapshots (Overview, Queues, Exchanges, Bindings, Connections, Channels,
//     Consumers): copies of broker state taken under the locks that guard it,
//     never holding a vhost lock while calling into a queue (queue hooks take
//     the vhost lock themselves).
//
//   - Actions: calls of the vhost's domain API (domain.go), the one the
//     AMQP method handlers call too, so validation, reply texts and durable
//     store writes are exactly those of AMQP. Deleting and purging a queue
//     work on exclusive queues too, as RabbitMQ's management plugin does;
//     the rest (declarations, bindings, publish, get) run as a user through
//     an AdminSession (admin_session.go), with that user's permissions.
//
// Data races: a conn's negotiated identity is published once (conn.info)
// and its channel table is read under conn.chanMu; a channel's state under
// its own mutex. See connView and Channels.

import (
	"cmp"
	"crypto/tls"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/raftstore"
)

// processStarted approximates the node's start for Overview.Uptime: the node
// is the process, as RabbitMQ's node is its Erlang VM.
var processStarted = time.Now()

// Version is the broker version reported to clients and the admin API.
func Version() string {
	v, _ := serverProperties()["version"].(string)
	return v
}

// NodeName is the node's name: its --node-name in a cluster, else
// RabbitMQ's name@host form.
func (s *Server) NodeName() string {
	if s.cfg.Cluster.Listen != "" && s.cfg.Cluster.NodeName != "" {
		return s.cfg.Cluster.NodeName
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return "warren@" + h
}

// ClusterName is the cluster_name server property.
func (s *Server) ClusterName() string {
	v, _ := serverProperties()["cluster_name"].(string)
	return v
}

// ListenAddr is the AMQP listener's address, or the configured one before
// Listen.
func (s *Server) ListenAddr() string {
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Listen
}

// DataDir is the directory of the durable store.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// MaxConnections is the configured cap on client connections (0: none).
func (s *Server) MaxConnections() int { return s.cfg.MaxConnections }

// FrameMax is the configured largest frame.
func (s *Server) FrameMax() uint32 { return s.cfg.FrameMax }

// StoreStats returns the durable store's write-path counters (commits,
// fsync time, pending ops).
func (s *Server) StoreStats() persist.Stats { return s.store.Stats() }

// RaftStoreStats returns the Raft log's write-path counters (group
// commits, segment rolls, zero-filled spares); ok is false while no Raft
// store is open (a single node with no quorum queue yet).
func (s *Server) RaftStoreStats() (st raftstore.Stats, ok bool) {
	rs := s.raft
	if rs == nil && s.quorum != nil {
		rs = s.quorum.Store()
	}
	if rs == nil {
		return st, false
	}
	return rs.Stats(), true
}

// AlarmStatus is the state of the resource alarms.
type AlarmStatus struct {
	Memory        bool   // memory use is above MemoryLimit
	Disk          bool   // free disk space is below DiskFreeLimit
	MemoryLimit   uint64 // the memory high watermark, bytes (0: none)
	DiskFreeLimit uint64 // bytes
}

// Alarms reports the resource alarms (publishers are blocked while one is
// raised).
func (s *Server) Alarms() AlarmStatus {
	s.alarms.mu.Lock()
	defer s.alarms.mu.Unlock()
	return AlarmStatus{Memory: s.alarms.memory, Disk: s.alarms.disk, MemoryLimit: s.alarms.memLimit, DiskFreeLimit: s.cfg.DiskFreeLimit}
}

// Users lists the user names, sorted.
func (s *Server) Users() []string {
	var names []string
	for _, u := range s.auth.Users() {
		names = append(names, u.Name)
	}
	return names
}

// Authenticate reports whether user exists with password pass.
func (s *Server) Authenticate(user, pass string) bool {
	_, ok := s.auth.Authenticate(user, pass)
	return ok
}

// PasswordHash returns user's stored password hash in RabbitMQ's form
// (base64 of a 4-byte salt followed by the digest of salt and password),
// as the management API shows it and RabbitMQ imports it.
func (s *Server) PasswordHash(user string) (string, bool) {
	u, ok := s.auth.User(user)
	if !ok {
		return "", false
	}
	return auth.EncodeHash(u.PasswordHash), true
}

// VHostNames lists the vhosts, sorted.
func (s *Server) VHostNames() []string {
	s.vhostsMu.RLock()
	defer s.vhostsMu.RUnlock()
	names := make([]string, 0, len(s.vhosts))
	for n := range s.vhosts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// adminVHost returns the named vhost or a 404 error.
func (s *Server) adminVHost(name string) (*vhost, error) {
	if v := s.vhost(name); v != nil {
		return v, nil
	}
	return nil, replyError(&NotFoundError{Kind: "vhost", Name: name})
}

// vhostsFor returns the named vhost, or every vhost sorted by name when name
// is "".
func (s *Server) vhostsFor(name string) ([]*vhost, error) {
	if name != "" {
		v, err := s.adminVHost(name)
		if err != nil {
			return nil, err
		}
		return []*vhost{v}, nil
	}
	var out []*vhost
	for _, n := range s.VHostNames() {
		if v := s.vhost(n); v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// ExchangeInfo describes one exchange.
type ExchangeInfo struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
	Bindings   int // bindings with this exchange as the source
}

func exchangeInfo(vhost string, e *exchange.Exchange) ExchangeInfo {
	return ExchangeInfo{
		VHost: vhost, Name: e.Name, Type: e.Kind.String(), Durable: e.Durable,
		AutoDelete: e.AutoDelete, Internal: e.Internal, Args: e.Args, Bindings: e.BindingCount(),
	}
}

// Exchanges lists the exchanges of vhost ("" for all), sorted by vhost and
// name.
func (s *Server) Exchanges(vhost string) ([]ExchangeInfo, error) {
	vs, err := s.vhostsFor(vhost)
	if err != nil {
		return nil, err
	}
	var out []ExchangeInfo
	for _, v := range vs {
		v.mu.RLock()
		for _, e := range v.exchanges {
			out = append(out, exchangeInfo(v.name, e))
		}
		v.mu.RUnlock()
	}
	slices.SortFunc(out, func(a, b ExchangeInfo) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// Exchange describes one exchange, or returns a 404 *amqp.Error.
func (s *Server) Exchange(vhost, name string) (ExchangeInfo, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return ExchangeInfo{}, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.exchanges[name]
	if e == nil {
		return ExchangeInfo{}, notFoundExchange(name, vhost)
	}
	return exchangeInfo(v.name, e), nil
}

// QueueInfo describes one queue.
type QueueInfo struct {
	VHost      string
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       map[string]any
	Type       string // the x-queue-type: classic, quorum, stream
	// Owner is the name of the connection owning an exclusive queue ("" if
	// none or unknown).
	Owner      string
	Ready      int
	ReadyBytes int64
	Unacked    int
	Consumers  int
	// ExclusiveConsumer is the tag of the queue's exclusive consumer, if any.
	ExclusiveConsumer string
	// Policy is the name of the policy applied to the queue ("" for none)
	// and PolicyDefinition its definition.
	Policy           string
	PolicyDefinition map[string]any
	// ReadyInMemory and ReadyInMemoryBytes are the ready messages held in
	// memory: a queue keeps a window of about Config.QueueWindow of them
	// and leaves the rest in the store (persistent messages of a durable
	// queue) or its spill files (the others).
	ReadyInMemory      int
	ReadyInMemoryBytes int64
	// Memory estimates the bytes the queue holds in memory: the ready
	// messages in memory plus a fixed per-message and per-queue overhead.
	// Unacknowledged bodies are shared with the channels holding them and
	// not counted.
	Memory int64
	// Leader, Members and Online: a replicated quorum queue's leader (""
	// none known), its replicas' nodes and those of them running, as this
	// node knows them.
	Leader  string
	Members []string
	Online  []string
}

// Estimated overheads behind QueueInfo.Memory.
const (
	queueOverhead   = 2048 // the queue, its maps and timers
	messageOverhead = 160  // Entry, Message header and backlog slot
)

// queueList returns v's queues, sorted by name.
func (v *vhost) queueList() []queue.Queue {
	v.mu.RLock()
	qs := make([]queue.Queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	v.mu.RUnlock()
	slices.SortFunc(qs, func(a, b queue.Queue) int { return cmp.Compare(a.Decl().Name, b.Decl().Name) })
	return qs
}

// queueMemory is QueueInfo.Memory.
func queueMemory(inMem int, inMemBytes int64) int64 {
	return queueOverhead + inMemBytes + int64(inMem)*messageOverhead
}

// queueInfo snapshots q. It takes q's lock, so the caller must hold no vhost
// lock (q's hooks may take it).
func (s *Server) queueInfo(v *vhost, q queue.Queue, owners map[uint64]string, excl map[queue.Queue]string) QueueInfo {
	st := q.Stats()
	d := q.Decl()
	qi := QueueInfo{
		VHost: v.name, Name: d.Name, Durable: d.Durable, Exclusive: d.Exclusive, AutoDelete: d.AutoDelete,
		Args: d.Args, Ready: st.Ready, ReadyBytes: st.ReadyBytes, Unacked: st.Unacked, Consumers: st.Consumers,
		ExclusiveConsumer: excl[q], ReadyInMemory: st.InMemory, ReadyInMemoryBytes: st.InMemoryBytes,
		Memory: queueMemory(st.InMemory, st.InMemoryBytes), Type: q.Type().Info().Name,
	}
	if d.Exclusive {
		qi.Owner = owners[d.Owner]
	}
	s.replicaInfo(v, q, &qi)
	v.mu.RLock()
	if p := v.queuePolicy(d.Name); p != nil {
		qi.Policy, qi.PolicyDefinition = p.Name, p.Definition
	}
	v.mu.RUnlock()
	return qi
}

// Queues lists the queues of vhost ("" for all), sorted by vhost and name.
func (s *Server) Queues(vhost string) ([]QueueInfo, error) {
	vs, err := s.vhostsFor(vhost)
	if err != nil {
		return nil, err
	}
	owners, excl := s.ownerNames(), s.exclusiveConsumers()
	var out []QueueInfo
	for _, v := range vs {
		for _, q := range v.queueList() {
			out = append(out, s.queueInfo(v, q, owners, excl))
		}
	}
	return out, nil
}

// Queue describes one queue, or returns a 404 *amqp.Error.
func (s *Server) Queue(vhost, name string) (QueueInfo, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return QueueInfo{}, err
	}
	q := v.lookupQueue(name)
	if q == nil {
		return QueueInfo{}, notFoundQueue(name, vhost)
	}
	return s.queueInfo(v, q, s.ownerNames(), s.exclusiveConsumers()), nil
}

func (v *vhost) lookupQueue(name string) queue.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name]
}

// BindingInfo describes one binding. Source "" is the default exchange,
// whose implicit bindings (one per queue, keyed by the queue name) are
// listed as RabbitMQ lists them.
type BindingInfo struct {
	VHost           string
	Source          string
	Destination     string
	DestinationType string // "queue" or "exchange"
	RoutingKey      string
	Args            map[string]any
}

// Bindings lists the bindings of vhost ("" for all): first the default
// exchange's implicit ones, then the others sorted by source, destination
// type, destination and key, as RabbitMQ orders them.
func (s *Server) Bindings(vhost string) ([]BindingInfo, error) {
	vs, err := s.vhostsFor(vhost)
	if err != nil {
		return nil, err
	}
	var out []BindingInfo
	for _, v := range vs {
		out = append(out, v.bindings()...)
	}
	return out, nil
}

func (v *vhost) bindings() []BindingInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var implicit, explicit []BindingInfo
	for name := range v.queues {
		implicit = append(implicit, BindingInfo{VHost: v.name, Destination: name, DestinationType: "queue", RoutingKey: name})
	}
	for name, e := range v.exchanges {
		if name == "" {
			continue
		}
		for _, b := range e.Bindings() {
			explicit = append(explicit, BindingInfo{
				VHost: v.name, Source: name, Destination: b.Dest.Name, DestinationType: b.Dest.Kind.String(),
				RoutingKey: b.Key, Args: b.Args,
			})
		}
	}
	slices.SortFunc(implicit, func(a, b BindingInfo) int { return cmp.Compare(a.Destination, b.Destination) })
	slices.SortStableFunc(explicit, func(a, b BindingInfo) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.DestinationType, b.DestinationType),
			cmp.Compare(a.Destination, b.Destination), cmp.Compare(a.RoutingKey, b.RoutingKey))
	})
	return append(implicit, explicit...)
}

// ConnectionInfo describes one client connection.
type ConnectionInfo struct {
	Name     string // "peer -> local", RabbitMQ's connection name
	ID       uint64
	PeerHost string
	PeerPort int
	Host     string // the broker's side
	Port     int
	// User, VHost, FrameMax, ChannelMax and ClientCaps are known once the
	// connection is open (see Negotiated).
	User       string
	VHost      string
	FrameMax   uint32
	ChannelMax uint16
	Heartbeat  time.Duration
	// Negotiated is false while the handshake is still running.
	Negotiated bool
	// ClientCaps are the capabilities the client announced.
	ClientCaps map[string]bool
	// ClientProperties is connection.start-ok's client-properties table as
	// the client sent it (product, version, connection_name, capabilities
	// ...); shared and read-only.
	ClientProperties amqp.Table
	// Channels counts the open channels.
	Channels int
	// TLS is set for an amqps connection, with the negotiated protocol
	// ("tlsv1.3", RabbitMQ's spelling) and cipher suite, and the client
	// certificate's subject if it sent one.
	TLS             bool
	TLSProtocol     string
	TLSCipher       string
	PeerCertSubject string
	// RecvOct and SendOct count the bytes read from and written to the
	// socket since it was accepted (TLS: the plaintext); RecvCnt and
	// SendCnt the reads and writes that moved any. SendPend is what waits
	// in the outbound buffer.
	RecvOct, SendOct uint64
	RecvCnt, SendCnt uint64
	SendPend         int
}

// connView is a snapshot of c for the admin API: what the handshake
// published (conn.info) and the channel table under chanMu.
func (s *Server) connView(c *conn) ConnectionInfo {
	ci := ConnectionInfo{Name: connName(c), ID: c.id}
	ci.PeerHost, ci.PeerPort = splitAddr(c.nc.RemoteAddr())
	ci.Host, ci.Port = splitAddr(c.nc.LocalAddr())
	if info := c.info.Load(); info != nil {
		ci.Negotiated = true
		ci.User, ci.VHost = info.User, info.VHost
		ci.FrameMax, ci.ChannelMax, ci.Heartbeat = info.FrameMax, info.ChannelMax, info.Heartbeat
		ci.ClientProperties = info.ClientProps
		ci.ClientCaps = map[string]bool{
			"consumer_cancel_notify":       info.Caps.consumerCancelNotify,
			"connection.blocked":           info.Caps.connectionBlocked,
			"authentication_failure_close": info.Caps.authFailureClose,
		}
	}
	c.chanMu.Lock()
	ci.Channels = len(c.channels)
	c.chanMu.Unlock()
	ci.RecvOct, ci.RecvCnt = c.fr.BytesRead(), c.fr.Reads()
	ci.SendOct, ci.SendCnt = c.out.sent.Load(), c.out.writes.Load()
	ci.SendPend = c.out.pendingBytes()
	if tc, ok := c.nc.(*tls.Conn); ok {
		ci.TLS = true
		if st := tc.ConnectionState(); st.HandshakeComplete {
			ci.TLSProtocol = strings.ToLower(strings.ReplaceAll(tls.VersionName(st.Version), " ", "v"))
			ci.TLSCipher = tls.CipherSuiteName(st.CipherSuite)
			if len(st.PeerCertificates) > 0 {
				ci.PeerCertSubject = st.PeerCertificates[0].Subject.String()
			}
		}
	}
	return ci
}

func connName(c *conn) string {
	return c.nc.RemoteAddr().String() + " -> " + c.nc.LocalAddr().String()
}

func splitAddr(a net.Addr) (string, int) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// clientConns returns the client connections,
// sorted by id.
func (s *Server) clientConns() []*conn {
	s.connsMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.connsMu.Unlock()
	slices.SortFunc(cs, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	return cs
}

// ownerNames maps connection ids to connection names, for exclusive queues.
func (s *Server) ownerNames() map[uint64]string {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	m := make(map[uint64]string, len(s.conns))
	for c := range s.conns {
		m[c.id] = connName(c)
	}
	return m
}

// Connections lists the client connections, oldest first.
func (s *Server) Connections() []ConnectionInfo {
	cs := s.clientConns()
	out := make([]ConnectionInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, s.connView(c))
	}
	return out
}

// findConn returns the client connection called name.
func (s *Server) findConn(name string) (*conn, error) {
	for _, c := range s.clientConns() {
		if connName(c) == name {
			return c, nil
		}
	}
	return nil, replyError(&NotFoundError{Kind: "connection", Name: name})
}

// Connection describes the connection called name, or returns a 404
// *amqp.Error.
func (s *Server) Connection(name string) (ConnectionInfo, error) {
	c, err := s.findConn(name)
	if err != nil {
		return ConnectionInfo{}, err
	}
	return s.connView(c), nil
}

// CloseConnection closes the connection called name with 320
// CONNECTION_FORCED and reason, as a broker shutdown does.
func (s *Server) CloseConnection(name, reason string) error {
	c, err := s.findConn(name)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "Closed via management plugin"
	}
	c.forceClose(reason)
	return nil
}

// ChannelInfo describes one channel. Only channels with consumers are
// visible (see connView).
type ChannelInfo struct {
	Connection     string
	Number         uint16
	User           string
	VHost          string
	Consumers      int
	Unacked        int
	Prefetch       int // for consumers started later
	GlobalPrefetch int
	Confirm        bool // in confirm mode (confirm.select)
	Transactional  bool // in tx mode (tx.select)
}

// ConsumerInfo describes one consumer.
type ConsumerInfo struct {
	VHost       string
	Queue       string
	Tag         string
	Connection  string
	Channel     uint16
	PeerHost    string
	PeerPort    int
	User        string
	AckRequired bool
	Exclusive   bool
	Prefetch    int
}

// consumerSnapshot lists c's consumers. Registration happens after the
// handshake and under consMu, so c.user and c.vhost are safe to read here.
func consumerSnapshot(c *conn) []*consumer {
	c.consMu.Lock()
	defer c.consMu.Unlock()
	ks := make([]*consumer, 0, len(c.consumers))
	for k := range c.consumers {
		ks = append(ks, k)
	}
	return ks
}

// Consumers lists the consumers of vhost ("" for all), sorted by queue,
// then connection, channel and tag.
func (s *Server) Consumers(vhost string) ([]ConsumerInfo, error) {
	if vhost != "" {
		if _, err := s.adminVHost(vhost); err != nil {
			return nil, err
		}
	}
	var out []ConsumerInfo
	for _, c := range s.clientConns() {
		ks := consumerSnapshot(c)
		if len(ks) == 0 {
			continue
		}
		name := connName(c)
		host, port := splitAddr(c.nc.RemoteAddr())
		for _, k := range ks {
			q := k.queue()
			if q.Type() == s.replies || (vhost != "" && c.vhost.name != vhost) {
				continue // RabbitMQ lists no direct reply-to consumers
			}
			out = append(out, ConsumerInfo{
				VHost: c.vhost.name, Queue: q.Decl().Name, Tag: k.tag, Connection: name, Channel: k.ch.id,
				PeerHost: host, PeerPort: port, User: c.user,
				AckRequired: !k.noAck, Exclusive: k.exclusive, Prefetch: int(k.credit.Limit()),
			})
		}
	}
	slices.SortFunc(out, func(a, b ConsumerInfo) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Connection, b.Connection),
			cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Tag, b.Tag))
	})
	return out, nil
}

// exclusiveConsumers maps queues to the tag of their exclusive consumer.
func (s *Server) exclusiveConsumers() map[queue.Queue]string {
	m := map[queue.Queue]string{}
	for _, c := range s.clientConns() {
		for _, k := range consumerSnapshot(c) {
			if q := k.queue(); k.exclusive && q != nil {
				m[q] = k.tag
			}
		}
	}
	return m
}

// Channels lists the channels that have consumers, sorted by connection and
// number.
func (s *Server) Channels() []ChannelInfo {
	var out []ChannelInfo
	for _, c := range s.clientConns() {
		info := c.info.Load()
		if info == nil {
			continue
		}
		c.chanMu.Lock()
		chans := make([]*channel, 0, len(c.channels))
		for _, ch := range c.channels {
			chans = append(chans, ch)
		}
		c.chanMu.Unlock()
		for _, ch := range chans {
			ch.mu.Lock()
			ci := ChannelInfo{
				Connection: connName(c), Number: ch.id, User: info.User, VHost: info.VHost,
				Consumers: len(ch.consumers), Unacked: ch.unacked.Len(),
				Confirm: ch.confirmMode.Load(), Transactional: ch.txMode.Load(),
			}
			pre, global := ch.credit.Prefetch()
			ci.Prefetch, ci.GlobalPrefetch = int(pre), int(global)
			closed := ch.closed
			ch.mu.Unlock()
			if !closed {
				out = append(out, ci)
			}
		}
	}
	slices.SortFunc(out, func(a, b ChannelInfo) int {
		return cmp.Or(cmp.Compare(a.Connection, b.Connection), cmp.Compare(a.Number, b.Number))
	})
	return out
}

// VHostInfo describes one vhost with its message totals.
type VHostInfo struct {
	Name       string
	Messages   int
	Ready      int
	Unacked    int
	Queues     int
	ReadyBytes int64
	Tracing    bool // the firehose is on
}

// VHosts lists the vhosts with their totals.
func (s *Server) VHosts() []VHostInfo {
	vs, _ := s.vhostsFor("")
	out := make([]VHostInfo, 0, len(vs))
	for _, v := range vs {
		vi := VHostInfo{Name: v.name, Tracing: v.tracingOn()}
		for _, q := range v.queueList() {
			st := q.Stats()
			vi.Queues++
			vi.Ready += st.Ready
			vi.Unacked += st.Unacked
			vi.ReadyBytes += st.ReadyBytes
		}
		vi.Messages = vi.Ready + vi.Unacked
		out = append(out, vi)
	}
	return out
}

// Overview is the node-wide summary behind /api/overview.
type Overview struct {
	Node        string
	ClusterName string
	Version     string
	Uptime      time.Duration
	Listen      string

	Connections int
	Channels    int // channels with consumers (see connView)
	Queues      int
	Exchanges   int
	Consumers   int
	// Publishers are the open channels that have published (RabbitMQ's
	// publishers: a channel becomes one at its first basic.publish).
	Publishers int

	Messages    int
	Ready       int
	Unacked     int
	ReadyBytes  int64
	QueueMemory int64 // sum of QueueInfo.Memory
	StoreStats  persist.Stats
	VHostCount  int
	UserCount   int
	Churn       Churn
}

// Overview summarizes the node.
func (s *Server) Overview() Overview {
	o := Overview{
		Node: s.NodeName(), ClusterName: s.ClusterName(), Version: Version(),
		Uptime: time.Since(processStarted), Listen: s.ListenAddr(),
		UserCount: len(s.auth.Users()), StoreStats: s.store.Stats(), Churn: s.churn.load(),
		Publishers: int(s.publishers.Load()),
	}
	vs, _ := s.vhostsFor("")
	o.VHostCount = len(vs)
	for _, v := range vs {
		v.mu.RLock()
		o.Exchanges += len(v.exchanges)
		v.mu.RUnlock()
		for _, q := range v.queueList() {
			st := q.Stats()
			o.Queues++
			o.Ready += st.Ready
			o.Unacked += st.Unacked
			o.ReadyBytes += st.ReadyBytes
			o.Consumers += st.Consumers
			o.QueueMemory += queueMemory(st.InMemory, st.InMemoryBytes)
		}
	}
	o.Messages = o.Ready + o.Unacked
	for _, c := range s.Connections() {
		o.Connections++
		o.Channels += c.Channels
	}
	return o
}

// DeleteQueue deletes a queue as queue.delete does (bindings, store record
// and consumers included), but also for exclusive queues, as RabbitMQ's
// management plugin allows. It returns how many messages were ready. The
// caller checked the permissions.
func (s *Server) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) (int, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return 0, err
	}
	n, err := v.DeleteQueue(Actor{System: true}, QueueDelete{Name: name, IfUnused: ifUnused, IfEmpty: ifEmpty, AnyOwner: true})
	return n, adminError(err)
}

// PurgeQueue drops a queue's ready messages (and their store entries) and
// returns how many there were; exclusive queues too. The caller checked
// the permissions.
func (s *Server) PurgeQueue(vhost, name string) (int, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return 0, err
	}
	n, err := v.PurgeQueue(Actor{System: true}, QueuePurge{Name: name, AnyOwner: true})
	return n, adminError(err)
}

// adminTimeout bounds how long an AdminSession publish waits for its
// confirm.
const adminTimeout = 30 * time.Second

// QueueBindings lists the bindings whose destination is queue name in vhost,
// the default exchange's implicit one first.
func (s *Server) QueueBindings(vhost, name string) ([]BindingInfo, error) {
	if _, err := s.Queue(vhost, name); err != nil {
		return nil, err
	}
	all, err := s.Bindings(vhost)
	if err != nil {
		return nil, err
	}
	var out []BindingInfo
	for _, b := range all {
		if b.DestinationType == "queue" && b.Destination == name {
			out = append(out, b)
		}
	}
	return out, nil
}

// sameBinding reports whether two bindings are the same binding, as the
// binding package compares them (arguments as tables).
func sameBinding(a, b BindingInfo) bool {
	if a.Source != b.Source || a.Destination != b.Destination || a.DestinationType != b.DestinationType || a.RoutingKey != b.RoutingKey {
		return false
	}
	m := binding.NewDirect()
	m.Add(binding.Binding{Key: a.RoutingKey, Args: a.Args})
	return m.Remove(binding.Binding{Key: b.RoutingKey, Args: b.Args})
}

// HasBinding reports whether b exists.
func (s *Server) HasBinding(b BindingInfo) bool {
	all, err := s.Bindings(b.VHost)
	if err != nil {
		return false
	}
	for _, x := range all {
		if sameBinding(x, b) {
			return true
		}
	}
	return false
}
