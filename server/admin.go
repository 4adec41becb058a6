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
//   - Actions. Deleting and purging a queue and closing a connection call the
//     vhost and queue directly, as RabbitMQ's management plugin does (they
//     work on exclusive queues too). Everything whose logic lives in channel
//     methods (queue.declare, exchange.declare/delete, bindings, basic.publish,
//     basic.get and its settlement) runs through an AdminSession: a real AMQP
//     connection to this broker over an in-memory pipe, served by the same
//     conn and channel code as a network client, so validation, reply texts
//     and durable store writes are exactly those of AMQP. RabbitMQ's
//     management plugin uses an internal ("direct") AMQP connection the same
//     way. Admin connections are left out of the connection listings.
//
// Data races: a conn's negotiated identity is published once (conn.info)
// and its channel table is read under conn.chanMu; a channel's state under
// its own mutex. See connView and Channels.

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// processStarted approximates the node's start for Overview.Uptime: the node
// is the process, as RabbitMQ's node is its Erlang VM.
var processStarted = time.Now()

// Version is the broker version reported to clients and the admin API.
func Version() string {
	v, _ := serverProperties()["version"].(string)
	return v
}

// NodeName is the node's name, in RabbitMQ's name@host form.
func (s *Server) NodeName() string {
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

// FrameMax is the configured largest frame.
func (s *Server) FrameMax() uint32 { return s.cfg.FrameMax }

// StoreStats returns the durable store's write-path counters (commits,
// fsync time, pending ops).
func (s *Server) StoreStats() persist.Stats { return s.store.Stats() }

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

// Users lists the configured user names, sorted.
func (s *Server) Users() []string {
	names := make([]string, 0, len(s.cfg.Users))
	for u := range s.cfg.Users {
		names = append(names, u)
	}
	slices.Sort(names)
	return names
}

// Authenticate reports whether user exists with password pass.
func (s *Server) Authenticate(user, pass string) bool {
	want, ok := s.cfg.Users[user]
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(pass)) == 1
}

// PasswordHash returns user's password in RabbitMQ's
// rabbit_password_hashing_sha256 form (base64 of a random 4-byte salt
// followed by SHA-256 of salt and password), as the management API shows it
// and RabbitMQ imports it.
func (s *Server) PasswordHash(user string) (string, bool) {
	pass, ok := s.cfg.Users[user]
	if !ok {
		return "", false
	}
	var salt [4]byte
	rand.Read(salt[:])
	sum := sha256.Sum256(append(salt[:], pass...))
	return base64.StdEncoding.EncodeToString(append(salt[:], sum[:]...)), true
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
	return nil, amqp.Errorf(amqp.NotFound, 0, 0, "no vhost '%s'", name)
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
	// ReadyInMemory and ReadyInMemoryBytes estimate the ready messages held
	// in memory: a durable queue keeps a window of Config.QueueWindow of
	// them and leaves the rest in the store (its transient messages, always
	// in memory, are not told apart). The bytes assume average sizes.
	ReadyInMemory      int
	ReadyInMemoryBytes int64
	// Memory estimates the bytes the queue holds in memory: the ready
	// messages in memory plus a fixed per-message and per-queue overhead.
	// Unacknowledged bodies are shared with the channels holding them and
	// not counted.
	Memory int64
}

// Estimated overheads behind QueueInfo.Memory.
const (
	queueOverhead   = 2048 // the queue, its maps and timers
	messageOverhead = 160  // Entry, Message header and backlog slot
)

// queueList returns v's queues, sorted by name.
func (v *vhost) queueList() []*queue.Queue {
	v.mu.RLock()
	qs := make([]*queue.Queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	v.mu.RUnlock()
	slices.SortFunc(qs, func(a, b *queue.Queue) int { return cmp.Compare(a.Name, b.Name) })
	return qs
}

// inMemory estimates how many of a queue's ready messages, and how many
// of their bytes, are in memory (see backlogFor for which queues page).
func (s *Server) inMemory(q *queue.Queue, st queue.Stats) (int, int64) {
	if q.ID == 0 || q.Limits().MaxPriority > 0 || st.Ready <= s.cfg.QueueWindow {
		return st.Ready, st.ReadyBytes
	}
	n := s.cfg.QueueWindow
	return n, st.ReadyBytes / int64(st.Ready) * int64(n)
}

// queueMemory is QueueInfo.Memory.
func queueMemory(inMem int, inMemBytes int64) int64 {
	return queueOverhead + inMemBytes + int64(inMem)*messageOverhead
}

// queueInfo snapshots q. It takes q's lock, so the caller must hold no vhost
// lock (q's hooks may take it).
func (s *Server) queueInfo(v *vhost, q *queue.Queue, owners map[uint64]string, excl map[*queue.Queue]string) QueueInfo {
	st := q.Stats()
	inMem, inMemBytes := s.inMemory(q, st)
	qi := QueueInfo{
		VHost: v.name, Name: q.Name, Durable: q.Durable, Exclusive: q.Exclusive, AutoDelete: q.AutoDelete,
		Args: q.Args, Ready: st.Ready, ReadyBytes: st.ReadyBytes, Unacked: st.Unacked, Consumers: st.Consumers,
		ExclusiveConsumer: excl[q], ReadyInMemory: inMem, ReadyInMemoryBytes: inMemBytes,
		Memory: queueMemory(inMem, inMemBytes),
	}
	if q.Exclusive {
		qi.Owner = owners[q.Owner]
	}
	v.mu.RLock()
	if p := v.queuePolicy(q.Name); p != nil {
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

func (v *vhost) lookupQueue(name string) *queue.Queue {
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
	// Channels counts the open channels.
	Channels int
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
		ci.ClientCaps = map[string]bool{
			"consumer_cancel_notify":       info.Caps.consumerCancelNotify,
			"connection.blocked":           info.Caps.connectionBlocked,
			"authentication_failure_close": info.Caps.authFailureClose,
		}
	}
	c.chanMu.Lock()
	ci.Channels = len(c.channels)
	c.chanMu.Unlock()
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

// clientConns returns the network connections (admin sessions excluded),
// sorted by id.
func (s *Server) clientConns() []*conn {
	s.connsMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		if _, admin := c.nc.(*adminPipe); !admin {
			cs = append(cs, c)
		}
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
	return nil, amqp.Errorf(amqp.NotFound, 0, 0, "no connection '%s'", name)
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
			if k.q == nil || (vhost != "" && c.vhost.name != vhost) {
				continue // k.q is nil for a direct reply-to consumer
			}
			out = append(out, ConsumerInfo{
				VHost: c.vhost.name, Queue: k.q.Name, Tag: k.tag, Connection: name, Channel: k.ch.id,
				PeerHost: host, PeerPort: port, User: c.user,
				AckRequired: !k.noAck, Exclusive: k.exclusive, Prefetch: int(k.prefetch),
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
func (s *Server) exclusiveConsumers() map[*queue.Queue]string {
	m := map[*queue.Queue]string{}
	for _, c := range s.clientConns() {
		for _, k := range consumerSnapshot(c) {
			if k.exclusive && k.q != nil {
				m[k.q] = k.tag
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
				Prefetch: int(ch.prefetch), GlobalPrefetch: int(ch.globalPrefetch),
			}
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
}

// VHosts lists the vhosts with their totals.
func (s *Server) VHosts() []VHostInfo {
	vs, _ := s.vhostsFor("")
	out := make([]VHostInfo, 0, len(vs))
	for _, v := range vs {
		vi := VHostInfo{Name: v.name}
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

	Messages    int
	Ready       int
	Unacked     int
	ReadyBytes  int64
	QueueMemory int64 // sum of QueueInfo.Memory
	StoreStats  persist.Stats
	VHostCount  int
	UserCount   int
}

// Overview summarizes the node.
func (s *Server) Overview() Overview {
	o := Overview{
		Node: s.NodeName(), ClusterName: s.ClusterName(), Version: Version(),
		Uptime: time.Since(processStarted), Listen: s.ListenAddr(),
		UserCount: len(s.cfg.Users), StoreStats: s.store.Stats(),
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
			o.QueueMemory += queueMemory(s.inMemory(q, st))
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
// management plugin allows. It returns how many messages were ready.
func (s *Server) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) (int, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return 0, err
	}
	q := v.lookupQueue(name)
	if q == nil {
		return 0, notFoundQueue(name, vhost)
	}
	n, err := v.deleteQueue(q, ifUnused, ifEmpty)
	switch {
	case errors.Is(err, queue.ErrInUse):
		return 0, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "queue '%s' in vhost '%s' in use", name, vhost)
	case errors.Is(err, queue.ErrNotEmpty):
		return 0, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "queue '%s' in vhost '%s' not empty", name, vhost)
	}
	return n, err
}

// PurgeQueue drops a queue's ready messages (and their store entries) and
// returns how many there were.
func (s *Server) PurgeQueue(vhost, name string) (int, error) {
	v, err := s.adminVHost(vhost)
	if err != nil {
		return 0, err
	}
	q := v.lookupQueue(name)
	if q == nil {
		return 0, notFoundQueue(name, vhost)
	}
	return q.Purge(), nil
}

// adminTimeout bounds one AdminSession operation.
const adminTimeout = 30 * time.Second

// adminAddr names the ends of an admin session's pipe.
type adminAddr string

func (a adminAddr) Network() string { return "pipe" }
func (a adminAddr) String() string  { return string(a) }

// adminPipe is the broker's end of an admin session; its type marks the
// connection as internal.
type adminPipe struct {
	net.Conn
	peer adminAddr
}

func (p *adminPipe) RemoteAddr() net.Addr { return p.peer }
func (p *adminPipe) LocalAddr() net.Addr  { return adminAddr("warren") }

// AdminSession is an internal AMQP connection to this broker, logged in as
// a configured user on one vhost, through which the admin API runs actions
// whose logic lives in channel methods. It is not safe for concurrent use;
// Close it when done.
type AdminSession struct {
	srv      *Server
	nc       net.Conn
	fr       *amqp.FrameReader
	frameMax uint32
	vhost    string
	ch       uint16 // open channel, 0 when none
	lastCh   uint16
	confirm  bool // the open channel is in confirm mode
	dead     error
	buf      []byte
}

// OpenAdmin opens an admin session as user (who must be configured) on
// vhost.
func (s *Server) OpenAdmin(user, vhost string) (*AdminSession, error) {
	pass, ok := s.cfg.Users[user]
	if !ok {
		return nil, amqp.Errorf(amqp.AccessRefused, 0, 0, "no user '%s'", user)
	}
	if _, err := s.adminVHost(vhost); err != nil {
		return nil, err
	}
	client, srv := net.Pipe()
	s.startConn(&adminPipe{Conn: srv, peer: adminAddr("management/" + user)})
	a := &AdminSession{srv: s, nc: client, fr: amqp.NewFrameReader(client, 64<<10), vhost: vhost}
	if err := a.handshake(user, pass, vhost); err != nil {
		client.Close()
		return nil, err
	}
	return a, nil
}

// Close closes the session's connection; unsettled messages it got return
// to their queues.
func (a *AdminSession) Close() error {
	if a.dead == nil {
		a.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if a.send(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "OK"}) == nil {
			for {
				m, ch, err := a.readMethod()
				if err != nil {
					break
				}
				if _, ok := m.(*amqp.ConnectionCloseOk); ok && ch == 0 {
					break
				}
			}
		}
		a.dead = net.ErrClosed
	}
	return a.nc.Close()
}

func (a *AdminSession) handshake(user, pass, vhost string) error {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	if _, err := a.nc.Write(amqp.ProtocolHeader); err != nil {
		return fmt.Errorf("admin session: %w", err)
	}
	if _, err := expectAdmin[*amqp.ConnectionStart](a); err != nil {
		return err
	}
	err := a.send(0, &amqp.ConnectionStartOk{
		ClientProperties: amqp.Table{
			"product":         "Warren management",
			"connection_name": "management",
			"capabilities":    amqp.Table{"consumer_cancel_notify": true, "authentication_failure_close": true},
		},
		Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + pass, Locale: "en_US",
	})
	if err != nil {
		return err
	}
	tune, err := expectAdmin[*amqp.ConnectionTune](a)
	if err != nil {
		return err
	}
	a.frameMax = tune.FrameMax
	a.fr.SetMaxFrameSize(tune.FrameMax + amqp.FrameOverhead)
	if err := a.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax}); err != nil {
		return err
	}
	if err := a.send(0, &amqp.ConnectionOpen{VirtualHost: vhost}); err != nil {
		return err
	}
	_, err = expectAdmin[*amqp.ConnectionOpenOk](a)
	return err
}

// expectAdmin reads the next method on channel 0, which must be an M; a
// connection.close becomes its *amqp.Error.
func expectAdmin[M amqp.Method](a *AdminSession) (M, error) {
	var zero M
	m, _, err := a.readMethod()
	if err != nil {
		return zero, err
	}
	if want, ok := m.(M); ok {
		return want, nil
	}
	if cl, ok := m.(*amqp.ConnectionClose); ok {
		return zero, a.closedBy(0, cl.ReplyCode, cl.ReplyText, cl.ReplyClassID, cl.ReplyMethodID)
	}
	return zero, fmt.Errorf("admin session: unexpected %s", m.Name())
}

// send writes one method frame.
func (a *AdminSession) send(ch uint16, m amqp.Method) error {
	if a.dead != nil {
		return a.dead
	}
	buf, err := amqp.AppendMethodFrame(a.buf[:0], ch, m)
	if err != nil {
		return err
	}
	a.buf = buf
	if _, err := a.nc.Write(buf); err != nil {
		a.dead = err
		return fmt.Errorf("admin session: %w", err)
	}
	return nil
}

// readMethod reads frames up to the next method, skipping heartbeats.
func (a *AdminSession) readMethod() (amqp.Method, uint16, error) {
	if a.dead != nil {
		return nil, 0, a.dead
	}
	for {
		f, err := a.fr.ReadFrame()
		if err != nil {
			a.dead = err
			if errors.Is(err, io.EOF) {
				return nil, 0, fmt.Errorf("admin session: connection closed by the broker")
			}
			return nil, 0, fmt.Errorf("admin session: %w", err)
		}
		switch f.Type {
		case amqp.FrameHeartbeat:
			continue
		case amqp.FrameMethod:
			m, err := amqp.DecodeMethod(f.Payload)
			if err != nil {
				a.dead = err
				return nil, 0, err
			}
			return m, f.Channel, nil
		}
		a.dead = fmt.Errorf("admin session: unexpected frame type %d", f.Type)
		return nil, 0, a.dead
	}
}

// readContent reads the header and body frames that follow a content
// method.
func (a *AdminSession) readContent() (props, body []byte, err error) {
	f, err := a.fr.ReadFrame()
	if err != nil {
		a.dead = err
		return nil, nil, err
	}
	if f.Type != amqp.FrameHeader {
		a.dead = fmt.Errorf("admin session: expected a content header, got frame type %d", f.Type)
		return nil, nil, a.dead
	}
	h, err := amqp.DecodeContentHeader(f.Payload)
	if err != nil {
		a.dead = err
		return nil, nil, err
	}
	props = append([]byte(nil), h.RawProps...)
	body = make([]byte, 0, min(h.BodySize, 64<<20))
	for uint64(len(body)) < h.BodySize {
		f, err := a.fr.ReadFrame()
		if err != nil {
			a.dead = err
			return nil, nil, err
		}
		if f.Type != amqp.FrameBody {
			a.dead = fmt.Errorf("admin session: expected a content body, got frame type %d", f.Type)
			return nil, nil, a.dead
		}
		body = append(body, f.Payload...)
	}
	return props, body, nil
}

// closedBy turns a channel.close or connection.close from the broker into
// an *amqp.Error, answering it with close-ok.
func (a *AdminSession) closedBy(ch, code uint16, text string, classID, methodID uint16) *amqp.Error {
	if ch == 0 {
		a.send(0, &amqp.ConnectionCloseOk{})
		a.dead = net.ErrClosed
	} else {
		a.send(ch, &amqp.ChannelCloseOk{})
		a.ch, a.confirm = 0, false
	}
	text = strings.TrimPrefix(text, amqp.ReplyText(code)+" - ")
	return &amqp.Error{Code: code, Text: text, ClassID: classID, MethodID: methodID}
}

// channel opens a channel if none is open.
func (a *AdminSession) channel() (uint16, error) {
	if a.ch != 0 {
		return a.ch, nil
	}
	a.lastCh++
	if a.lastCh == 0 {
		a.lastCh = 1
	}
	if err := a.send(a.lastCh, &amqp.ChannelOpen{}); err != nil {
		return 0, err
	}
	a.ch = a.lastCh
	if _, err := a.await(); err != nil {
		return 0, err
	}
	return a.ch, nil
}

// await reads up to the next method on the open channel. A channel.close
// or connection.close becomes an *amqp.Error.
func (a *AdminSession) await() (amqp.Method, error) {
	for {
		m, ch, err := a.readMethod()
		if err != nil {
			return nil, err
		}
		switch m := m.(type) {
		case *amqp.ConnectionClose:
			return nil, a.closedBy(0, m.ReplyCode, m.ReplyText, m.ReplyClassID, m.ReplyMethodID)
		case *amqp.ChannelClose:
			if ch == a.ch {
				return nil, a.closedBy(ch, m.ReplyCode, m.ReplyText, m.ReplyClassID, m.ReplyMethodID)
			}
			continue
		}
		if ch == a.ch {
			return m, nil
		}
	}
}

// call sends a synchronous method on the session's channel and returns the
// reply.
func (a *AdminSession) call(m amqp.Method) (amqp.Method, error) {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	ch, err := a.channel()
	if err != nil {
		return nil, err
	}
	if err := a.send(ch, m); err != nil {
		return nil, err
	}
	return a.await()
}

// QueueDecl is a queue declaration from the admin API.
type QueueDecl struct {
	Name       string
	Durable    bool
	AutoDelete bool
	Args       map[string]any
}

// DeclareQueue runs queue.declare: RabbitMQ's argument checks and
// equivalence rules apply, and a durable queue is stored.
func (a *AdminSession) DeclareQueue(d QueueDecl) error {
	_, err := a.call(&amqp.QueueDeclare{Queue: d.Name, Durable: d.Durable, AutoDelete: d.AutoDelete, Arguments: amqp.Table(d.Args)})
	return err
}

// ExchangeDecl is an exchange declaration from the admin API.
type ExchangeDecl struct {
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
}

// DeclareExchange runs exchange.declare.
func (a *AdminSession) DeclareExchange(d ExchangeDecl) error {
	_, err := a.call(&amqp.ExchangeDeclare{
		Exchange: d.Name, Type: d.Type, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal,
		Arguments: amqp.Table(d.Args),
	})
	return err
}

// DeleteExchange runs exchange.delete; unlike AMQP, a missing exchange is a
// 404 error.
func (a *AdminSession) DeleteExchange(name string, ifUnused bool) error {
	if _, err := a.srv.Exchange(a.vhost, name); err != nil {
		return err
	}
	_, err := a.call(&amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused})
	return err
}

// Bind adds a binding with queue.bind or exchange.bind.
func (a *AdminSession) Bind(b BindingInfo) error {
	var err error
	if b.DestinationType == "exchange" {
		_, err = a.call(&amqp.ExchangeBind{Destination: b.Destination, Source: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	} else {
		_, err = a.call(&amqp.QueueBind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	}
	return err
}

// Unbind removes a binding with queue.unbind or exchange.unbind (a missing
// binding is not an error, as in AMQP).
func (a *AdminSession) Unbind(b BindingInfo) error {
	var err error
	if b.DestinationType == "exchange" {
		_, err = a.call(&amqp.ExchangeUnbind{Destination: b.Destination, Source: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	} else {
		_, err = a.call(&amqp.QueueUnbind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: amqp.Table(b.Args)})
	}
	return err
}

// Publish publishes one message, mandatory and confirmed, and reports
// whether any queue took it. It returns once the broker confirmed it
// (after the fsync for a persistent message in a durable queue).
func (a *AdminSession) Publish(exchange, key string, props amqp.Properties, body []byte) (routed bool, err error) {
	a.nc.SetDeadline(time.Now().Add(adminTimeout))
	raw, err := props.Append(nil)
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "bad properties: %v", err)
	}
	if !a.confirm {
		if _, err := a.call(&amqp.ConfirmSelect{}); err != nil {
			return false, err
		}
		a.confirm = true
	}
	ch := a.ch
	buf, err := amqp.AppendMethodFrame(a.buf[:0], ch, &amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: true})
	if err != nil {
		return false, amqp.Errorf(amqp.PreconditionFailed, 0, 0, "%v", err)
	}
	buf = amqp.AppendHeaderFrame(buf, ch, 60, uint64(len(body)), raw)
	buf = amqp.AppendBodyFrames(buf, ch, body, a.frameMax)
	a.buf = buf[:0]
	if _, err := a.nc.Write(buf); err != nil {
		a.dead = err
		return false, fmt.Errorf("admin session: %w", err)
	}
	routed = true
	for {
		m, err := a.await()
		if err != nil {
			return false, err
		}
		switch m := m.(type) {
		case *amqp.BasicReturn:
			if _, _, err := a.readContent(); err != nil {
				return false, err
			}
			routed = false
		case *amqp.BasicAck:
			return routed, nil
		case *amqp.BasicNack:
			return false, amqp.Errorf(amqp.InternalError, 0, 0, "message %d nacked by the broker", m.DeliveryTag)
		}
	}
}

// AckMode says what Get does with the messages it took, by RabbitMQ's
// names.
type AckMode string

// Ack modes of Get.
const (
	AckRequeueTrue     AckMode = "ack_requeue_true"     // return them, marked redelivered
	AckRequeueFalse    AckMode = "ack_requeue_false"    // acknowledge them
	RejectRequeueTrue  AckMode = "reject_requeue_true"  // reject with requeue
	RejectRequeueFalse AckMode = "reject_requeue_false" // reject: dead-letter or drop
)

// ParseAckMode checks a RabbitMQ ackmode name.
func ParseAckMode(s string) (AckMode, bool) {
	switch m := AckMode(s); m {
	case AckRequeueTrue, AckRequeueFalse, RejectRequeueTrue, RejectRequeueFalse:
		return m, true
	}
	return "", false
}

// GotMessage is one message taken by Get.
type GotMessage struct {
	Exchange     string
	RoutingKey   string
	Redelivered  bool
	MessageCount int // messages left ready after this one was taken
	Props        []byte
	Body         []byte
}

// Get takes up to count messages from queue with basic.get, then settles
// them all by mode, as RabbitMQ's management "get messages" does.
func (a *AdminSession) Get(queueName string, count int, mode AckMode) ([]GotMessage, error) {
	var out []GotMessage
	var last uint64
	for range count {
		m, err := a.call(&amqp.BasicGet{Queue: queueName})
		if err != nil {
			return nil, err
		}
		ok, isOk := m.(*amqp.BasicGetOk)
		if !isOk {
			break // basic.get-empty
		}
		props, body, err := a.readContent()
		if err != nil {
			return nil, err
		}
		last = ok.DeliveryTag
		out = append(out, GotMessage{
			Exchange: ok.Exchange, RoutingKey: ok.RoutingKey, Redelivered: ok.Redelivered,
			MessageCount: int(ok.MessageCount), Props: props, Body: body,
		})
	}
	if last == 0 {
		return out, nil
	}
	var settle amqp.Method
	switch mode {
	case AckRequeueFalse:
		settle = &amqp.BasicAck{DeliveryTag: last, Multiple: true}
	case RejectRequeueFalse:
		settle = &amqp.BasicNack{DeliveryTag: last, Multiple: true}
	default:
		settle = &amqp.BasicNack{DeliveryTag: last, Multiple: true, Requeue: true}
	}
	if err := a.send(a.ch, settle); err != nil {
		return nil, err
	}
	// Settlements have no reply; a round trip makes sure this one was
	// handled before the caller goes on.
	if _, err := a.call(&amqp.BasicQos{}); err != nil {
		return nil, err
	}
	return out, nil
}

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
