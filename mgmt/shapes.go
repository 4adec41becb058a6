package mgmt

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
)

// The JSON objects below carry RabbitMQ 3.10's field names for the same
// objects (checked against captured RabbitMQ output in shapes_test.go).
// Fields RabbitMQ fills from its statistics database (rates, message_stats,
// garbage collection, reductions) are left out rather than faked.

var sprintf = fmt.Sprintf

const (
	protocolName = "AMQP 0-9-1"
	stateRunning = "running"
	stateDown    = "down" // a queue whose home node is down
)

// table is a JSON object holding AMQP field-table values.
type table = map[string]any

type exchangeJSON struct {
	Name       string `json:"name"`
	VHost      string `json:"vhost"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	Arguments  table  `json:"arguments"`
	// Single-exchange GET only.
	Incoming *[]any `json:"incoming,omitempty"`
	Outgoing *[]any `json:"outgoing,omitempty"`
}

func toExchange(e server.ExchangeInfo) exchangeJSON {
	return exchangeJSON{
		Name: e.Name, VHost: e.VHost, Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete,
		Internal: e.Internal, Arguments: tableJSON(e.Args),
	}
}

type ownerJSON struct {
	Name     string `json:"name"`
	PeerHost string `json:"peer_host"`
	PeerPort int    `json:"peer_port"`
}

type queueJSON struct {
	Name                      string            `json:"name"`
	VHost                     string            `json:"vhost"`
	Durable                   bool              `json:"durable"`
	AutoDelete                bool              `json:"auto_delete"`
	Exclusive                 bool              `json:"exclusive"`
	Arguments                 table             `json:"arguments"`
	Node                      string            `json:"node"`
	State                     string            `json:"state"`
	Type                      string            `json:"type"`
	Messages                  int               `json:"messages"`
	MessagesDetails           detailsJSON       `json:"messages_details"`
	MessagesReady             int               `json:"messages_ready"`
	MessagesReadyDetails      detailsJSON       `json:"messages_ready_details"`
	MessagesUnacknowledged    int               `json:"messages_unacknowledged"`
	MessagesUnackedDetails    detailsJSON       `json:"messages_unacknowledged_details"`
	*pagedQueueJSON                             // not for streams
	*streamQueueJSON                            // streams only (streams.go)
	Consumers                 int               `json:"consumers"`
	Memory                    int64             `json:"memory"`
	Policy                    *string           `json:"policy"`
	OperatorPolicy            *string           `json:"operator_policy"`
	EffectivePolicyDefinition table             `json:"effective_policy_definition"`
	OwnerPidDetails           *ownerJSON        `json:"owner_pid_details,omitempty"`
	MessageStats              *messageStatsJSON `json:"message_stats,omitempty"`
	// Single-queue GET only.
	ConsumerDetails *[]consumerJSON `json:"consumer_details,omitempty"`
	Deliveries      *[]any          `json:"deliveries,omitempty"`
	Incoming        *[]any          `json:"incoming,omitempty"`
}

// pagedQueueJSON holds the fields of a queue that pages messages out (a
// classic queue, and the quorum stand-in); RabbitMQ 3.10 shows none of
// them for a stream.
type pagedQueueJSON struct {
	MessagesRAM          int     `json:"messages_ram"`
	MessagesReadyRAM     int     `json:"messages_ready_ram"`
	MessageBytesReady    int64   `json:"message_bytes_ready"`
	MessagesPagedOut     int     `json:"messages_paged_out"`
	MessageBytesPagedOut int64   `json:"message_bytes_paged_out"`
	ExclusiveConsumerTag *string `json:"exclusive_consumer_tag"`
}

func toQueue(node string, q server.QueueInfo, owner *server.ConnectionInfo) queueJSON {
	j := queueJSON{
		Name: q.Name, VHost: q.VHost, Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive,
		Arguments: tableJSON(q.Args), Node: node, State: stateRunning, Type: cmp.Or(q.Type, "classic"),
		Messages: q.Ready + q.Unacked, MessagesReady: q.Ready, MessagesUnacknowledged: q.Unacked,
		Consumers: q.Consumers, Memory: q.Memory, EffectivePolicyDefinition: table{},
	}
	if q.Type == "stream" {
		j.streamQueueJSON = &streamQueueJSON{Leader: node, Members: []string{node}, Online: []string{node}}
	} else {
		if q.Members != nil {
			// A replicated quorum queue: RabbitMQ's node is its leader.
			j.streamQueueJSON = &streamQueueJSON{Leader: q.Leader, Members: q.Members, Online: q.Online}
			j.Node = q.Leader
		}
		j.pagedQueueJSON = &pagedQueueJSON{
			MessagesRAM: q.ReadyInMemory + q.Unacked, MessagesReadyRAM: q.ReadyInMemory, MessageBytesReady: q.ReadyBytes,
			MessagesPagedOut: q.Ready - q.ReadyInMemory, MessageBytesPagedOut: q.ReadyBytes - q.ReadyInMemoryBytes,
		}
		if q.ExclusiveConsumer != "" {
			tag := q.ExclusiveConsumer
			j.ExclusiveConsumerTag = &tag
		}
	}
	if q.Policy != "" {
		name := q.Policy
		j.Policy, j.EffectivePolicyDefinition = &name, tableJSON(q.PolicyDefinition)
	}
	if owner != nil {
		j.OwnerPidDetails = &ownerJSON{Name: owner.Name, PeerHost: owner.PeerHost, PeerPort: owner.PeerPort}
	}
	return j
}

type bindingJSON struct {
	Source          string `json:"source"`
	VHost           string `json:"vhost"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
	Arguments       table  `json:"arguments"`
	PropertiesKey   string `json:"properties_key"`
}

func toBinding(b server.BindingInfo) bindingJSON {
	return bindingJSON{
		Source: b.Source, VHost: b.VHost, Destination: b.Destination, DestinationType: b.DestinationType,
		RoutingKey: b.RoutingKey, Arguments: tableJSON(b.Args), PropertiesKey: propertiesKey(b.RoutingKey, b.Args),
	}
}

// propertiesKey identifies a binding among those between the same source
// and destination, in RabbitMQ's form: the routing key quoted (with "~"
// escaped), then "~" and a hash of the arguments when there are any. The
// hash is Warren's own (RabbitMQ's hashes Erlang terms); clients treat the
// key as opaque.
func propertiesKey(key string, args map[string]any) string {
	q := strings.ReplaceAll(url.QueryEscape(key), "~", "%7E")
	if len(args) == 0 {
		if key == "" {
			return "~"
		}
		return q
	}
	enc, _ := encodeTable(args)
	sum := sha256.Sum256(enc)
	return q + "~" + base64.RawURLEncoding.EncodeToString(sum[:4])
}

type connectionJSON struct {
	Name                   string  `json:"name"`
	Node                   string  `json:"node"`
	VHost                  string  `json:"vhost"`
	User                   string  `json:"user"`
	UserWhoPerformedAction string  `json:"user_who_performed_action"`
	State                  string  `json:"state"`
	Type                   string  `json:"type"`
	Protocol               string  `json:"protocol"`
	Host                   string  `json:"host"`
	Port                   int     `json:"port"`
	PeerHost               string  `json:"peer_host"`
	PeerPort               int     `json:"peer_port"`
	SSL                    bool    `json:"ssl"`
	SSLProtocol            *string `json:"ssl_protocol"`      // null without TLS, as RabbitMQ sends
	SSLCipher              *string `json:"ssl_cipher"`        // null without TLS
	PeerCertSubject        *string `json:"peer_cert_subject"` // null without a client certificate
	Channels               int     `json:"channels"`
	ChannelMax             int     `json:"channel_max"`
	FrameMax               int     `json:"frame_max"`
	Timeout                int     `json:"timeout"`
	ClientProperties       table   `json:"client_properties"`
	// Socket counters (reads and writes for RabbitMQ's packet counts), and
	// the byte rates over the last StatsInterval.
	RecvOct        uint64      `json:"recv_oct"`
	RecvOctDetails detailsJSON `json:"recv_oct_details"`
	RecvCnt        uint64      `json:"recv_cnt"`
	SendOct        uint64      `json:"send_oct"`
	SendOctDetails detailsJSON `json:"send_oct_details"`
	SendCnt        uint64      `json:"send_cnt"`
	SendPend       int         `json:"send_pend"`
}

func toConnection(node string, c server.ConnectionInfo) connectionJSON {
	caps := table{}
	for k, v := range c.ClientCaps {
		caps[k] = v
	}
	// RabbitMQ shows the client's properties as the client sent them.
	props := tableJSON(c.ClientProperties)
	if _, ok := props["capabilities"]; !ok && len(caps) > 0 {
		props["capabilities"] = caps
	}
	j := connectionJSON{
		Name: c.Name, Node: node, VHost: c.VHost, User: c.User, UserWhoPerformedAction: c.User,
		State: stateRunning, Type: "network", Protocol: protocolName, Host: c.Host, Port: c.Port,
		PeerHost: c.PeerHost, PeerPort: c.PeerPort, Channels: c.Channels, ChannelMax: int(c.ChannelMax),
		FrameMax: int(c.FrameMax), Timeout: int(c.Heartbeat / time.Second), ClientProperties: props,
		SSL: c.TLS, RecvOct: c.RecvOct, RecvCnt: c.RecvCnt, SendOct: c.SendOct, SendCnt: c.SendCnt, SendPend: c.SendPend,
	}
	if c.TLS {
		proto, cipher := c.TLSProtocol, c.TLSCipher
		j.SSLProtocol, j.SSLCipher = &proto, &cipher
		if c.PeerCertSubject != "" {
			subject := c.PeerCertSubject
			j.PeerCertSubject = &subject
		}
	}
	return j
}

type connDetailsJSON struct {
	Name     string `json:"name"`
	PeerHost string `json:"peer_host"`
	PeerPort int    `json:"peer_port"`
}

type channelJSON struct {
	Name                   string          `json:"name"`
	Node                   string          `json:"node"`
	Number                 int             `json:"number"`
	User                   string          `json:"user"`
	UserWhoPerformedAction string          `json:"user_who_performed_action"`
	VHost                  string          `json:"vhost"`
	State                  string          `json:"state"`
	ConnectionDetails      connDetailsJSON `json:"connection_details"`
	ConsumerCount          int             `json:"consumer_count"`
	MessagesUnacknowledged int             `json:"messages_unacknowledged"`
	PrefetchCount          int             `json:"prefetch_count"`
	GlobalPrefetchCount    int             `json:"global_prefetch_count"`
	Confirm                bool            `json:"confirm"`
	Transactional          bool            `json:"transactional"`
}

func channelName(conn string, n uint16) string { return sprintf("%s (%d)", conn, n) }

func toChannel(node string, c server.ChannelInfo, conn server.ConnectionInfo) channelJSON {
	return channelJSON{
		Name: channelName(c.Connection, c.Number), Node: node, Number: int(c.Number), User: c.User,
		UserWhoPerformedAction: c.User, VHost: c.VHost, State: stateRunning,
		ConnectionDetails: connDetailsJSON{Name: c.Connection, PeerHost: conn.PeerHost, PeerPort: conn.PeerPort},
		ConsumerCount:     c.Consumers, MessagesUnacknowledged: c.Unacked,
		PrefetchCount: c.Prefetch, GlobalPrefetchCount: c.GlobalPrefetch,
		Confirm: c.Confirm, Transactional: c.Transactional,
	}
}

type chanDetailsJSON struct {
	Name           string `json:"name"`
	ConnectionName string `json:"connection_name"`
	Node           string `json:"node"`
	Number         int    `json:"number"`
	PeerHost       string `json:"peer_host"`
	PeerPort       int    `json:"peer_port"`
	User           string `json:"user"`
}

type queueRefJSON struct {
	Name  string `json:"name"`
	VHost string `json:"vhost"`
}

type consumerJSON struct {
	ConsumerTag    string          `json:"consumer_tag"`
	Queue          queueRefJSON    `json:"queue"`
	ChannelDetails chanDetailsJSON `json:"channel_details"`
	AckRequired    bool            `json:"ack_required"`
	Exclusive      bool            `json:"exclusive"`
	PrefetchCount  int             `json:"prefetch_count"`
	Arguments      table           `json:"arguments"`
	Active         bool            `json:"active"`
	ActivityStatus string          `json:"activity_status"`
}

func toConsumer(node string, c server.ConsumerInfo) consumerJSON {
	return consumerJSON{
		ConsumerTag: c.Tag, Queue: queueRefJSON{Name: c.Queue, VHost: c.VHost},
		ChannelDetails: chanDetailsJSON{
			Name: channelName(c.Connection, c.Channel), ConnectionName: c.Connection, Node: node,
			Number: int(c.Channel), PeerHost: c.PeerHost, PeerPort: c.PeerPort, User: c.User,
		},
		AckRequired: c.AckRequired, Exclusive: c.Exclusive, PrefetchCount: c.Prefetch,
		Arguments: table{}, Active: true, ActivityStatus: "up",
	}
}

type vhostMetaJSON struct {
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

type vhostJSON struct {
	Name                   string            `json:"name"`
	Description            string            `json:"description"`
	Tags                   []string          `json:"tags"`
	Metadata               vhostMetaJSON     `json:"metadata"`
	DefaultQueueType       string            `json:"default_queue_type"`
	Tracing                bool              `json:"tracing"`
	ClusterState           map[string]string `json:"cluster_state"`
	Messages               int               `json:"messages"`
	MessagesReady          int               `json:"messages_ready"`
	MessagesUnacknowledged int               `json:"messages_unacknowledged"`
	MessageStats           *messageStatsJSON `json:"message_stats,omitempty"`
	// The bytes of the vhost's connections, closed ones included; left
	// out, as RabbitMQ does, while the vhost has had none.
	*vhostOctJSON
}

type vhostOctJSON struct {
	RecvOct        uint64      `json:"recv_oct"`
	RecvOctDetails detailsJSON `json:"recv_oct_details"`
	SendOct        uint64      `json:"send_oct"`
	SendOctDetails detailsJSON `json:"send_oct_details"`
}

func toVHost(node string, v server.VHostInfo, rec auth.VHost) vhostJSON {
	tags := rec.Tags
	if tags == nil {
		tags = []string{}
	}
	dqt := rec.DefaultQueueType
	if dqt == "" {
		dqt = "undefined"
	}
	return vhostJSON{
		Name: v.Name, Description: rec.Description, Tags: tags, Metadata: vhostMetaJSON{Description: rec.Description, Tags: tags},
		DefaultQueueType: dqt, Tracing: v.Tracing, ClusterState: map[string]string{node: stateRunning},
		Messages: v.Messages, MessagesReady: v.Ready, MessagesUnacknowledged: v.Unacked,
	}
}

type userJSON struct {
	Name             string   `json:"name"`
	PasswordHash     string   `json:"password_hash"`
	HashingAlgorithm string   `json:"hashing_algorithm"`
	Tags             []string `json:"tags"`
	Limits           table    `json:"limits"`
}

type whoamiJSON struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

type permissionJSON struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

type objectTotalsJSON struct {
	Channels    int `json:"channels"`
	Connections int `json:"connections"`
	Consumers   int `json:"consumers"`
	Exchanges   int `json:"exchanges"`
	Queues      int `json:"queues"`
}

type queueTotalsJSON struct {
	Messages               int         `json:"messages"`
	MessagesDetails        detailsJSON `json:"messages_details"`
	MessagesReady          int         `json:"messages_ready"`
	MessagesReadyDetails   detailsJSON `json:"messages_ready_details"`
	MessagesUnacknowledged int         `json:"messages_unacknowledged"`
	MessagesUnackedDetails detailsJSON `json:"messages_unacknowledged_details"`
}

type listenerJSON struct {
	Node      string `json:"node"`
	Protocol  string `json:"protocol"`
	IPAddress string `json:"ip_address"`
	Port      int    `json:"port"`
}

type contextJSON struct {
	Node        string `json:"node"`
	Description string `json:"description"`
	Path        string `json:"path"`
	Port        string `json:"port"`
}

// nodeContextJSON is a context as /api/nodes shows it (without the node).
type nodeContextJSON struct {
	Description string `json:"description"`
	Path        string `json:"path"`
	Port        string `json:"port"`
}

type exchangeTypeJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
}

var exchangeTypes = []exchangeTypeJSON{
	{"direct", "AMQP direct exchange, as per the AMQP specification", true},
	{"fanout", "AMQP fanout exchange, as per the AMQP specification", true},
	{"headers", "AMQP headers exchange, as per the AMQP specification", true},
	{"topic", "AMQP topic exchange, as per the AMQP specification", true},
}

type overviewJSON struct {
	ManagementVersion string             `json:"management_version"`
	RatesMode         string             `json:"rates_mode"`
	ExchangeTypes     []exchangeTypeJSON `json:"exchange_types"`
	ProductVersion    string             `json:"product_version"`
	ProductName       string             `json:"product_name"`
	RabbitMQVersion   string             `json:"rabbitmq_version"`
	ClusterName       string             `json:"cluster_name"`
	Node              string             `json:"node"`
	DisableStats      bool               `json:"disable_stats"`
	ObjectTotals      objectTotalsJSON   `json:"object_totals"`
	QueueTotals       queueTotalsJSON    `json:"queue_totals"`
	Listeners         []listenerJSON     `json:"listeners"`
	Contexts          []contextJSON      `json:"contexts"`
	MessageStats      *messageStatsJSON  `json:"message_stats,omitempty"`
	// How long samples are kept, in seconds (the history keeps ten
	// minutes of everything it keeps).
	SampleRetentionPolicies map[string][]int `json:"sample_retention_policies"`
}

type nodeJSON struct {
	Name           string             `json:"name"`
	Type           string             `json:"type"`
	Running        bool               `json:"running"`
	Uptime         int64              `json:"uptime"` // milliseconds
	OSPid          string             `json:"os_pid"`
	Processors     int                `json:"processors"`
	MemUsed        uint64             `json:"mem_used"`
	MemLimit       uint64             `json:"mem_limit"`
	MemAlarm       bool               `json:"mem_alarm"`
	DiskFree       uint64             `json:"disk_free"`
	DiskFreeLimit  uint64             `json:"disk_free_limit"`
	DiskFreeAlarm  bool               `json:"disk_free_alarm"`
	FDUsed         int                `json:"fd_used"`
	FDTotal        uint64             `json:"fd_total"`
	ProcUsed       int                `json:"proc_used"`
	ProcTotal      int                `json:"proc_total"`
	SocketsUsed    int                `json:"sockets_used"`
	SocketsTotal   uint64             `json:"sockets_total"`
	RunQueue       int                `json:"run_queue"`
	RatesMode      string             `json:"rates_mode"`
	DBDir          string             `json:"db_dir"`
	Partitions     []string           `json:"partitions"`
	ExchangeTypes  []exchangeTypeJSON `json:"exchange_types"`
	AuthMechanisms []exchangeTypeJSON `json:"auth_mechanisms"`
	Contexts       []nodeContextJSON  `json:"contexts"`
	IOSyncCount    uint64             `json:"io_sync_count"`
	IOSyncAvgTime  float64            `json:"io_sync_avg_time"` // milliseconds
	MsgStoreWrite  uint64             `json:"msg_store_write_count"`
}

// MarshalJSON writes a node that does not run as RabbitMQ lists a
// stopped one: its name, type and running only.
func (n nodeJSON) MarshalJSON() ([]byte, error) {
	if !n.Running {
		return json.Marshal(struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			Running bool   `json:"running"`
		}{n.Name, n.Type, false})
	}
	type plain nodeJSON
	return json.Marshal(plain(n))
}

// procTotal is RabbitMQ's default Erlang process limit, shown as
// proc_total (goroutines have none).
const procTotal = 1048576

var authMechanisms = []exchangeTypeJSON{
	{"PLAIN", "SASL PLAIN authentication mechanism", true},
	{"AMQPLAIN", "QPid AMQPLAIN mechanism", true},
}

// nodeInfo describes this process as a RabbitMQ node.
func (s *Server) nodeInfo() nodeJSON {
	o := s.broker.Overview()
	al := s.broker.Alarms()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := nodeJSON{
		Name: o.Node, Type: "disc", Running: true, Uptime: o.Uptime.Milliseconds(),
		OSPid: sprintf("%d", os.Getpid()), Processors: runtime.NumCPU(), MemUsed: residentMemory(ms.Sys),
		ProcUsed: runtime.NumGoroutine(), ProcTotal: procTotal, SocketsUsed: len(s.broker.Connections()), RatesMode: "basic", DBDir: s.broker.DataDir(), Partitions: []string{},
		ExchangeTypes: exchangeTypes, AuthMechanisms: authMechanisms,
		IOSyncCount: o.StoreStats.Commits, MsgStoreWrite: o.StoreStats.Messages,
		MemLimit: al.MemoryLimit, MemAlarm: al.Memory, DiskFreeLimit: al.DiskFreeLimit, DiskFreeAlarm: al.Disk,
		DiskFree: diskFree(s.broker.DataDir()),
	}
	for _, c := range s.contexts(o.Node) {
		n.Contexts = append(n.Contexts, nodeContextJSON{Description: c.Description, Path: c.Path, Port: c.Port})
	}
	if o.StoreStats.Commits > 0 {
		n.IOSyncAvgTime = float64(o.StoreStats.FsyncTotal) / float64(o.StoreStats.Commits) / float64(time.Millisecond)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		n.FDUsed = len(ents)
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		n.FDTotal = rl.Cur
		// RabbitMQ keeps about a tenth of its descriptors for files.
		n.SocketsTotal = rl.Cur * 9 / 10
	}
	return n
}

// diskFree is the space available to the broker under dir (0 if unknown).
func diskFree(dir string) uint64 {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return st.Bavail * uint64(st.Bsize)
}

// residentMemory reads the process's resident set from /proc, falling back
// to the Go runtime's view.
func residentMemory(fallback uint64) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return fallback
	}
	var size, rss uint64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return fallback
	}
	return rss * uint64(os.Getpagesize())
}

func (s *Server) contexts(node string) []contextJSON {
	_, port := splitHostPort(s.addrString())
	return []contextJSON{{Node: node, Description: "Warren Management", Path: "/", Port: port}}
}

func (s *Server) addrString() string {
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.opts.Listen
}

func (s *Server) overview() overviewJSON {
	o := s.broker.Overview()
	view, rates := s.stats()
	amqpHost, amqpPort := splitHostPort(o.Listen)
	httpHost, httpPort := splitHostPort(s.addrString())
	return overviewJSON{
		ManagementVersion: server.Version(), RatesMode: "basic", ExchangeTypes: exchangeTypes,
		ProductVersion: server.Version(), ProductName: "Warren", RabbitMQVersion: server.Version(),
		ClusterName: o.ClusterName, Node: o.Node,
		ObjectTotals: objectTotalsJSON{
			Channels: o.Channels, Connections: o.Connections, Consumers: o.Consumers, Exchanges: o.Exchanges, Queues: o.Queues,
		},
		QueueTotals: queueTotalsJSON{Messages: o.Messages, MessagesReady: o.Ready, MessagesUnacknowledged: o.Unacked},
		Listeners: []listenerJSON{
			{Node: o.Node, Protocol: "amqp", IPAddress: amqpHost, Port: atoi(amqpPort)},
			{Node: o.Node, Protocol: "http", IPAddress: httpHost, Port: atoi(httpPort)},
		},
		Contexts:                s.contexts(o.Node),
		MessageStats:            messageStats(view.node, rates.node, allCounters),
		SampleRetentionPolicies: map[string][]int{"global": {s.histAge()}, "basic": {s.histAge()}, "detailed": {s.histAge()}},
	}
}

// Names and vhosts of list items, read without encoding them (paging.go,
// authz.go).

func (j queueJSON) itemName() string      { return j.Name }
func (j queueJSON) itemVHost() string     { return j.VHost }
func (j exchangeJSON) itemName() string   { return j.Name }
func (j exchangeJSON) itemVHost() string  { return j.VHost }
func (j bindingJSON) itemVHost() string   { return j.VHost }
func (j vhostJSON) itemName() string      { return j.Name }
func (j connectionJSON) itemName() string { return j.Name }
func (j channelJSON) itemName() string    { return j.Name }
func (j userJSON) itemName() string       { return j.Name }
