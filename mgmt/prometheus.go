package mgmt

import (
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/warrenmq/warren/internal/buildinfo"
	"github.com/warrenmq/warren/server"
)

// Prometheus metrics as RabbitMQ's rabbitmq_prometheus plugin (3.10)
// serves them, at its three endpoints:
//
//   - /metrics: aggregated. Every family of the plugin's core collector
//     summed over the node's objects (no label names a queue, channel or
//     connection), the totals, the rabbitmq_global_* counters, the alarms,
//     the Go and process collectors and Warren's own warren_* figures.
//   - /metrics/per-object: the same families with one series per object
//     (labels vhost and queue; channel; connection), for at most
//     Options.PerObjectMetricsLimit objects of each kind
//     (warren_metrics_per_object_truncated says when some were left out).
//   - /metrics/detailed?family=F&vhost=V: only the families asked for
//     (repeatable; unknown names are ignored, as RabbitMQ ignores them),
//     per object, prefixed rabbitmq_detailed_ (the cluster families
//     vhost_status, exchange_bindings and exchange_names: rabbitmq_cluster_);
//     vhost (repeatable) keeps the queue families to those vhosts. Without
//     family, only the identity is served.
//
// Every endpoint ends with rabbitmq_build_info and rabbitmq_identity_info,
// which the stock dashboards join every query on. Family and metric names,
// help texts, types and label names follow the plugin's
// prometheus_rabbitmq_core_metrics_collector; a metric whose figure Warren
// does not have is left out rather than faked (docs/metrics.md lists them).
// Where Warren keeps a counter per queue or per vhost rather than per
// channel, the per-object series carry the labels Warren has.

// promEndpoint is which of the three endpoints a scrape is.
type promEndpoint int

const (
	promAggregated promEndpoint = iota
	promPerObject
	promDetailed
)

func (e promEndpoint) String() string {
	return [...]string{"aggregated", "per-object", "detailed"}[e]
}

// promFamily is one of the core collector's metric families.
type promFamily struct {
	name    string
	cluster bool // detailed only, rabbitmq_cluster_ prefix
	emit    func(e *promScrape)
}

// promFamilies are the families Warren serves, in RabbitMQ's order.
// queue_consumer_count is skipped when queue_metrics is also collected (it
// is a subset of it), as RabbitMQ skips it.
var promFamilies = []promFamily{
	{name: "connection_churn_metrics", emit: (*promScrape).churn},
	{name: "node_coarse_metrics", emit: (*promScrape).nodeCoarse},
	{name: "node_metrics", emit: (*promScrape).node},
	{name: "node_persister_metrics", emit: (*promScrape).persister},
	{name: "queue_coarse_metrics", emit: (*promScrape).queueCoarse},
	{name: "queue_consumer_count", emit: (*promScrape).queueConsumerCount},
	{name: "queue_metrics", emit: (*promScrape).queueMetrics},
	{name: "channel_metrics", emit: (*promScrape).channelMetrics},
	{name: "channel_exchange_metrics", emit: (*promScrape).channelExchange},
	{name: "channel_queue_metrics", emit: (*promScrape).channelQueue},
	{name: "connection_metrics", emit: (*promScrape).connectionMetrics},
	{name: "channel_queue_exchange_metrics", emit: (*promScrape).channelQueueExchange},
	{name: "vhost_status", cluster: true, emit: (*promScrape).vhostStatus},
	{name: "exchange_bindings", cluster: true, emit: (*promScrape).exchangeBindings},
	{name: "exchange_names", cluster: true, emit: (*promScrape).exchangeNames},
}

// PromFamilyNames lists the family names /metrics/detailed takes.
func PromFamilyNames() []string {
	out := make([]string, len(promFamilies))
	for i, f := range promFamilies {
		out[i] = f.name
	}
	return out
}

// promCollector is an unchecked prometheus.Collector (Describe sends
// nothing) that renders one scrape of an endpoint.
type promCollector struct {
	s        *Server
	endpoint promEndpoint
	families map[string]bool // detailed: the families asked for
	vhosts   map[string]bool // detailed: nil for every vhost
}

// Describe implements prometheus.Collector: nothing, so that the metrics
// may vary from scrape to scrape.
func (c *promCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *promCollector) Collect(ch chan<- prometheus.Metric) {
	e := &promScrape{c: c, ch: ch, prefix: "rabbitmq_", perObject: c.endpoint != promAggregated, descs: map[string]*prometheus.Desc{}}
	wanted := func(f promFamily) bool {
		if c.endpoint == promDetailed {
			return c.families[f.name]
		}
		return !f.cluster
	}
	haveQueueMetrics := false
	for _, f := range promFamilies {
		if f.name == "queue_metrics" && wanted(f) {
			haveQueueMetrics = true
		}
	}
	for _, f := range promFamilies {
		if !wanted(f) || (f.name == "queue_consumer_count" && haveQueueMetrics) {
			continue
		}
		switch {
		case c.endpoint != promDetailed:
			e.prefix = "rabbitmq_"
		case f.cluster:
			e.prefix = "rabbitmq_cluster_"
		default:
			e.prefix = "rabbitmq_detailed_"
		}
		f.emit(e)
	}
	e.prefix = "rabbitmq_"
	if c.endpoint != promDetailed {
		e.totals()
		e.global()
		e.streams()
	}
	// Always on per-object; on detailed only when some were left out, so
	// that a scrape of the identity alone stays RabbitMQ's.
	if c.endpoint == promPerObject || e.truncated {
		e.gauge("warren_metrics_per_object_truncated", "1 when objects were left out of this scrape (more than the per-object limit of a kind)", nil, b2f(e.truncated))
	}
	e.identity()
}

// promScrape is the state of one Collect: the broker's lists, read once
// each and only when a family needs them.
type promScrape struct {
	c         *promCollector
	ch        chan<- prometheus.Metric
	prefix    string
	perObject bool
	truncated bool
	descs     map[string]*prometheus.Desc

	overview *server.Overview
	queues   []server.QueueInfo
	qstats   map[[2]string]server.QueueMessageStats
	channels []server.ChannelInfo
	conns    []server.ConnectionInfo
}

// metric sends one sample of name (prefixed unless it starts with
// "warren_"), labels given as name, value pairs.
func (e *promScrape) metric(t prometheus.ValueType, name, help string, labels []string, v float64) {
	if len(name) < 7 || name[:7] != "warren_" {
		name = e.prefix + name
	}
	d := e.descs[name]
	if d == nil {
		var names []string
		for i := 0; i < len(labels); i += 2 {
			names = append(names, labels[i])
		}
		d = prometheus.NewDesc(name, help, names, nil)
		e.descs[name] = d
	}
	var values []string
	for i := 1; i < len(labels); i += 2 {
		values = append(values, labels[i])
	}
	m, err := prometheus.NewConstMetric(d, t, v, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}

func (e *promScrape) gauge(name, help string, labels []string, v float64) {
	e.metric(prometheus.GaugeValue, name, help, labels, v)
}

func (e *promScrape) counter(name, help string, labels []string, v float64) {
	e.metric(prometheus.CounterValue, name, help, labels, v)
}

func (e *promScrape) untyped(name, help string, labels []string, v float64) {
	e.metric(prometheus.UntypedValue, name, help, labels, v)
}

func (e *promScrape) limit() int { return e.c.s.opts.PerObjectMetricsLimit }

func (e *promScrape) ov() *server.Overview {
	if e.overview == nil {
		o := e.c.s.broker.Overview()
		e.overview = &o
	}
	return e.overview
}

// queueList is the queues of the vhosts asked for, at most limit of them
// when per object.
func (e *promScrape) queueList() []server.QueueInfo {
	if e.queues == nil {
		qs, _ := e.c.s.broker.Queues("")
		if e.c.vhosts != nil {
			qs = slices.DeleteFunc(qs, func(q server.QueueInfo) bool { return !e.c.vhosts[q.VHost] })
		}
		if e.perObject && len(qs) > e.limit() {
			qs, e.truncated = qs[:e.limit()], true
		}
		e.queues = append([]server.QueueInfo{}, qs...)
	}
	return e.queues
}

func (e *promScrape) queueStats() map[[2]string]server.QueueMessageStats {
	if e.qstats == nil {
		_, qs := e.c.s.broker.MessageStats()
		e.qstats = make(map[[2]string]server.QueueMessageStats, len(qs))
		for _, q := range qs {
			e.qstats[[2]string{q.VHost, q.Name}] = q
		}
	}
	return e.qstats
}

func (e *promScrape) channelList() []server.ChannelInfo {
	if e.channels == nil {
		cs := e.c.s.broker.Channels()
		if e.perObject && len(cs) > e.limit() {
			cs, e.truncated = cs[:e.limit()], true
		}
		e.channels = append([]server.ChannelInfo{}, cs...)
	}
	return e.channels
}

func (e *promScrape) connList() []server.ConnectionInfo {
	if e.conns == nil {
		cs := e.c.s.broker.Connections()
		if e.perObject && len(cs) > e.limit() {
			cs, e.truncated = cs[:e.limit()], true
		}
		e.conns = append([]server.ConnectionInfo{}, cs...)
	}
	return e.conns
}

func (e *promScrape) churn() {
	ch := e.ov().Churn
	e.counter("connections_opened_total", "Total number of connections opened", nil, float64(ch.ConnectionsOpened))
	e.counter("connections_closed_total", "Total number of connections closed or terminated", nil, float64(ch.ConnectionsClosed))
	e.counter("channels_opened_total", "Total number of channels opened", nil, float64(ch.ChannelsOpened))
	e.counter("channels_closed_total", "Total number of channels closed", nil, float64(ch.ChannelsClosed))
	e.counter("queues_declared_total", "Total number of queues declared", nil, float64(ch.QueuesDeclared))
	e.counter("queues_created_total", "Total number of queues created", nil, float64(ch.QueuesCreated))
	e.counter("queues_deleted_total", "Total number of queues deleted", nil, float64(ch.QueuesDeleted))
}

// openFDs and maxFDs read the process's descriptors (0 when unknown).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

func maxFDs() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return rl.Cur
}

func (e *promScrape) nodeCoarse() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.gauge("process_open_fds", "Open file descriptors", nil, float64(openFDs()))
	e.gauge("process_open_tcp_sockets", "Open TCP sockets", nil, float64(e.ov().Connections))
	e.gauge("process_resident_memory_bytes", "Memory used in bytes", nil, float64(residentMemory(ms.Sys)))
	e.gauge("disk_space_available_bytes", "Disk space available in bytes", nil, float64(diskFree(e.c.s.broker.DataDir())))
}

func (e *promScrape) node() {
	al := e.c.s.broker.Alarms()
	fds := maxFDs()
	e.gauge("process_max_fds", "Open file descriptors limit", nil, float64(fds))
	sockets := float64(fds)
	if n := e.c.s.broker.MaxConnections(); n > 0 && uint64(n) < fds {
		sockets = float64(n)
	}
	e.gauge("process_max_tcp_sockets", "Open TCP sockets limit", nil, sockets)
	e.gauge("resident_memory_limit_bytes", "Memory high watermark in bytes", nil, float64(al.MemoryLimit))
	e.gauge("disk_space_available_limit_bytes", "Free disk space low watermark in bytes", nil, float64(al.DiskFreeLimit))
	e.gauge("erlang_uptime_seconds", "Node uptime", nil, e.ov().Uptime.Seconds())
}

func (e *promScrape) persister() {
	st := e.ov().StoreStats
	e.counter("io_sync_ops_total", "Total number of I/O sync operations", nil, float64(st.Commits))
	e.counter("io_sync_time_seconds_total", "Total I/O sync time", nil, st.FsyncTotal.Seconds())
	e.counter("msg_store_write_total", "Total number of Message Store write operations", nil, float64(st.Messages))
}

// queueLabels are a queue's labels per object, none aggregated.
func (e *promScrape) queueLabels(q server.QueueInfo) []string {
	if !e.perObject {
		return nil
	}
	return []string{"vhost", q.VHost, "queue", q.Name}
}

// eachQueue calls f per queue (per object) or once with the sums.
func (e *promScrape) eachQueue(f func(labels []string, q server.QueueInfo)) {
	qs := e.queueList()
	if e.perObject {
		for _, q := range qs {
			f(e.queueLabels(q), q)
		}
		return
	}
	var sum server.QueueInfo
	for _, q := range qs {
		sum.Ready += q.Ready
		sum.Unacked += q.Unacked
		sum.Consumers += q.Consumers
		sum.ReadyBytes += q.ReadyBytes
		sum.ReadyInMemory += q.ReadyInMemory
		sum.ReadyInMemoryBytes += q.ReadyInMemoryBytes
		sum.Memory += q.Memory
	}
	f(nil, sum)
}

func (e *promScrape) queueCoarse() {
	e.eachQueue(func(l []string, q server.QueueInfo) {
		e.gauge("queue_messages_ready", "Messages ready to be delivered to consumers", l, float64(q.Ready))
		e.gauge("queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged", l, float64(q.Unacked))
		e.gauge("queue_messages", "Sum of ready and unacknowledged messages - total queue depth", l, float64(q.Ready+q.Unacked))
	})
}

func (e *promScrape) queueConsumerCount() {
	e.eachQueue(func(l []string, q server.QueueInfo) {
		e.gauge("queue_consumers", "Consumers on a queue", l, float64(q.Consumers))
	})
}

func (e *promScrape) queueMetrics() {
	e.eachQueue(func(l []string, q server.QueueInfo) {
		e.gauge("queue_consumers", "Consumers on a queue", l, float64(q.Consumers))
		e.gauge("queue_process_memory_bytes", "Memory in bytes used by the Erlang queue process", l, float64(q.Memory))
		e.gauge("queue_messages_ram", "Ready and unacknowledged messages stored in memory", l, float64(q.ReadyInMemory+q.Unacked))
		e.gauge("queue_messages_ready_ram", "Ready messages stored in memory", l, float64(q.ReadyInMemory))
		e.gauge("queue_messages_unacked_ram", "Unacknowledged messages stored in memory", l, float64(q.Unacked))
		e.gauge("queue_messages_ready_bytes", "Size in bytes of ready messages", l, float64(q.ReadyBytes))
		e.gauge("queue_messages_paged_out", "Messages paged out to disk", l, float64(q.Ready-q.ReadyInMemory))
		e.gauge("queue_messages_paged_out_bytes", "Size in bytes of messages paged out to disk", l, float64(q.ReadyBytes-q.ReadyInMemoryBytes))
	})
}

// eachChannel calls f per channel (per object) or once with the sums.
func (e *promScrape) eachChannel(f func(labels []string, c server.ChannelInfo)) {
	cs := e.channelList()
	if e.perObject {
		for _, c := range cs {
			f([]string{"channel", channelName(c.Connection, c.Number)}, c)
		}
		return
	}
	var sum server.ChannelInfo
	for _, c := range cs {
		sum.Consumers += c.Consumers
		sum.Unacked += c.Unacked
		sum.Prefetch += c.Prefetch
		sum.GlobalPrefetch += c.GlobalPrefetch
	}
	f(nil, sum)
}

func (e *promScrape) channelMetrics() {
	e.eachChannel(func(l []string, c server.ChannelInfo) {
		e.gauge("channel_consumers", "Consumers on a channel", l, float64(c.Consumers))
		e.gauge("channel_messages_unacked", "Delivered but not yet acknowledged messages", l, float64(c.Unacked))
		e.gauge("consumer_prefetch", "Limit of unacknowledged messages for each consumer", l, float64(c.Prefetch))
		e.gauge("channel_prefetch", "Total limit of unacknowledged messages for all consumers on a channel", l, float64(c.GlobalPrefetch))
	})
}

// nodeCounts are the node's message counters, deleted queues' and vhosts'
// counts included (the sampler carries them over).
func (e *promScrape) nodeCounts() counts { return e.c.s.sampler.read().node }

// channelExchange is channel_exchange_metrics. Warren counts publishes
// per vhost, not per channel and exchange, so every endpoint has the
// node's totals.
func (e *promScrape) channelExchange() {
	n := e.nodeCounts()
	e.counter("channel_messages_published_total", "Total number of messages published into an exchange on a channel", nil, float64(n[cPublish]))
	e.counter("channel_messages_confirmed_total", "Total number of messages published into an exchange and confirmed on the channel", nil, float64(n[cConfirm]))
	e.counter("channel_messages_unroutable_returned_total", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", nil, float64(n[cReturnUnroutable]))
	e.counter("channel_messages_unroutable_dropped_total", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", nil, float64(n[cDropUnroutable]))
}

// channelQueue is channel_queue_metrics: Warren counts deliveries per
// queue, so per object the series are per queue (vhost, queue; no
// channel label); aggregated they are the node's totals.
func (e *promScrape) channelQueue() {
	emit := func(l []string, c counts) {
		e.counter("channel_get_ack_total", "Total number of messages fetched with basic.get in manual acknowledgement mode", l, float64(c[cGet]))
		e.counter("channel_get_total", "Total number of messages fetched with basic.get in automatic acknowledgement mode", l, float64(c[cGetNoAck]))
		e.counter("channel_messages_delivered_ack_total", "Total number of messages delivered to consumers in manual acknowledgement mode", l, float64(c[cDeliver]))
		e.counter("channel_messages_delivered_total", "Total number of messages delivered to consumers in automatic acknowledgement mode", l, float64(c[cDeliverNoAck]))
		e.counter("channel_messages_redelivered_total", "Total number of messages redelivered to consumers", l, float64(c[cRedeliver]))
		e.counter("channel_messages_acked_total", "Total number of messages acknowledged by consumers", l, float64(c[cAck]))
		e.counter("channel_get_empty_total", "Total number of times basic.get operations fetched no message", l, float64(c[cGetEmpty]))
	}
	if !e.perObject {
		emit(nil, e.nodeCounts())
		return
	}
	st := e.queueStats()
	for _, q := range e.queueList() {
		var c counts
		c.addQueue(st[[2]string{q.VHost, q.Name}].Stats)
		emit(e.queueLabels(q), c)
	}
}

func (e *promScrape) connectionMetrics() {
	cs := e.connList()
	if !e.perObject {
		n := 0
		for _, c := range cs {
			n += c.Channels
		}
		e.gauge("connection_channels", "Channels on a connection", nil, float64(n))
		return
	}
	for _, c := range cs {
		e.gauge("connection_channels", "Channels on a connection", []string{"connection", c.Name}, float64(c.Channels))
	}
}

// channelQueueExchange is channel_queue_exchange_metrics: messages routed
// into each queue (per object: queue_vhost, queue; aggregated: the sum
// over the queues that exist).
func (e *promScrape) channelQueueExchange() {
	const help = "Total number of messages published to queues"
	st := e.queueStats()
	if !e.perObject {
		var n uint64
		for _, q := range e.queueList() {
			n += st[[2]string{q.VHost, q.Name}].Stats.Publish
		}
		e.counter("queue_messages_published_total", help, nil, float64(n))
		return
	}
	for _, q := range e.queueList() {
		e.counter("queue_messages_published_total", help, []string{"queue_vhost", q.VHost, "queue", q.Name},
			float64(st[[2]string{q.VHost, q.Name}].Stats.Publish))
	}
}

func (e *promScrape) vhostStatus() {
	for _, v := range e.c.s.broker.VHostNames() {
		e.gauge("vhost_status", "Whether a given vhost is running", []string{"vhost", v}, 1)
	}
}

// eachExchange calls f for the exchanges RabbitMQ lists in its cluster
// families: not internal ones, not the default exchange.
func (e *promScrape) eachExchange(f func(x server.ExchangeInfo)) {
	for _, v := range e.c.s.broker.VHostNames() {
		xs, _ := e.c.s.broker.Exchanges(v)
		for _, x := range xs {
			if x.Name != "" && !x.Internal {
				f(x)
			}
		}
	}
}

func (e *promScrape) exchangeBindings() {
	e.eachExchange(func(x server.ExchangeInfo) {
		e.gauge("exchange_bindings", "Number of bindings for an exchange. This value is cluster-wide.",
			[]string{"vhost", x.VHost, "exchange", x.Name, "type", x.Type}, float64(x.Bindings))
	})
}

func (e *promScrape) exchangeNames() {
	e.eachExchange(func(x server.ExchangeInfo) {
		e.gauge("exchange_name", "Enumerates exchanges without any additional info. This value is cluster-wide. A cheaper alternative to `exchange_bindings`",
			[]string{"vhost", x.VHost, "exchange", x.Name, "type", x.Type}, 1)
	})
}

// totals are the plugin's object counts.
func (e *promScrape) totals() {
	o := e.ov()
	e.gauge("connections", "Connections currently open", nil, float64(o.Connections))
	e.gauge("channels", "Channels currently open", nil, float64(o.Channels))
	e.gauge("consumers", "Consumers currently connected", nil, float64(o.Consumers))
	e.gauge("queues", "Queues available", nil, float64(o.Queues))
}

// global is the plugin's rabbitmq_global_* counters. RabbitMQ labels them
// protocol="amqp091" (and the delivery ones queue_type); Warren speaks one
// protocol and leaves the labels out.
func (e *promScrape) global() {
	n := e.nodeCounts()
	for _, m := range globalCounters {
		e.counter(m.name, m.help, nil, float64(m.value(n)))
	}
	e.gauge("global_consumers", "Current number of consumers", nil, float64(e.ov().Consumers))
	e.gauge("global_publishers", "Current number of publishers", nil, float64(e.ov().Publishers))
}

// identity is rabbitmq_build_info and rabbitmq_identity_info.
func (e *promScrape) identity() {
	bi := buildinfo.Read()
	e.untyped("build_info", "RabbitMQ & Erlang/OTP version info", []string{
		"rabbitmq_version", server.Version(),
		"prometheus_plugin_version", bi.Version,
		"prometheus_client_version", clientGolangVersion(),
		// Warren runs on Go, not Erlang/OTP: the runtime's version
		// stands where the dashboards show Erlang's.
		"erlang_version", bi.GoVersion,
		"product_name", "Warren",
		"product_version", bi.Version,
	}, 1)
	o := e.ov()
	e.untyped("identity_info", "RabbitMQ node & cluster identity info", []string{
		"rabbitmq_node", o.Node,
		"rabbitmq_cluster", o.ClusterName,
		"rabbitmq_cluster_permanent_id", e.c.s.broker.ClusterPermanentID(),
		// RabbitMQ 3.13's label, which the current dashboards filter on.
		"rabbitmq_endpoint", e.c.endpoint.String(),
	}, 1)
}

// clientGolangVersion is the version of the Prometheus client library
// built in.
func clientGolangVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/prometheus/client_golang" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// globalCounter is one of the node's message counters, named as
// RabbitMQ's global counters collector names them.
type globalCounter struct {
	name, help string
	value      func(counts) uint64
}

var globalCounters = func() []globalCounter {
	one := func(i int) func(counts) uint64 { return func(c counts) uint64 { return c[i] } }
	return []globalCounter{
		{"global_messages_received_total", "Total number of messages received from publishers", one(cPublish)},
		// Warren counts a confirm-mode publish when it is received; each
		// gets its basic.ack or basic.nack, so the two counters are one.
		{"global_messages_received_confirm_total", "Total number of messages received from publishers expecting confirmations", one(cConfirm)},
		{"global_messages_confirmed_total", "Total number of messages confirmed to publishers", one(cConfirm)},
		{"global_messages_routed_total", "Total number of messages routed to queues or streams",
			func(c counts) uint64 { return c[cPublish] - c[cReturnUnroutable] - c[cDropUnroutable] }},
		{"global_messages_unroutable_returned_total", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", one(cReturnUnroutable)},
		{"global_messages_unroutable_dropped_total", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", one(cDropUnroutable)},
		{"global_messages_delivered_total", "Total number of messages delivered to consumers",
			func(c counts) uint64 { return c[cDeliver] + c[cDeliverNoAck] + c[cGet] + c[cGetNoAck] }},
		{"global_messages_delivered_consume_manual_ack_total", "Total number of messages delivered to consumers using basic.consume with manual acknowledgment", one(cDeliver)},
		{"global_messages_delivered_consume_auto_ack_total", "Total number of messages delivered to consumers using basic.consume with automatic acknowledgment", one(cDeliverNoAck)},
		{"global_messages_delivered_get_manual_ack_total", "Total number of messages delivered to consumers using basic.get with manual acknowledgment", one(cGet)},
		{"global_messages_delivered_get_auto_ack_total", "Total number of messages delivered to consumers using basic.get with automatic acknowledgment", one(cGetNoAck)},
		{"global_messages_get_empty_total", "Total number of times basic.get operations fetched no message", one(cGetEmpty)},
		{"global_messages_redelivered_total", "Total number of messages redelivered to consumers", one(cRedeliver)},
		{"global_messages_acknowledged_total", "Total number of messages acknowledged by consumers", one(cAck)},
	}
}()

// promHandlers are the three endpoints' handlers.
type promHandlers struct {
	aggregated, perObject http.Handler
}

// newPromHandlers registers the aggregated endpoint's collectors (the
// RabbitMQ families, Warren's own, Go's and the process's) and the
// per-object one's.
func (s *Server) newPromHandlers() promHandlers {
	agg := prometheus.NewRegistry()
	agg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&promCollector{s: s, endpoint: promAggregated},
		newCollector(s.broker),
	)
	per := prometheus.NewRegistry()
	per.MustRegister(&promCollector{s: s, endpoint: promPerObject})
	return promHandlers{
		aggregated: promhttp.HandlerFor(agg, promhttp.HandlerOpts{}),
		perObject:  promhttp.HandlerFor(per, promhttp.HandlerOpts{}),
	}
}

// serveDetailed serves /metrics/detailed for the query's family and vhost
// parameters: a registry per scrape, since what it holds depends on them.
func (s *Server) serveDetailed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := &promCollector{s: s, endpoint: promDetailed, families: map[string]bool{}}
	for _, f := range q["family"] {
		c.families[f] = true
	}
	if vs, ok := q["vhost"]; ok {
		c.vhosts = map[string]bool{}
		known := s.broker.VHostNames()
		for _, v := range vs {
			if slices.Contains(known, v) {
				c.vhosts[v] = true
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// servePrometheus answers the Prometheus paths; it reports false for any
// other path. Authentication is the caller's.
func (s *Server) servePrometheus(w http.ResponseWriter, r *http.Request, path string, pool chan struct{}) bool {
	var h http.Handler
	switch path {
	case "/metrics":
		h = s.prom.aggregated
		pool = s.scrapes
	case "/metrics/per-object":
		h = s.prom.perObject
	case "/metrics/detailed":
		h = http.HandlerFunc(s.serveDetailed)
	default:
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return true
	}
	s.serveMetrics(w, r, h, pool)
	return true
}

// PrometheusHandler is the Prometheus listener's handler, as
// rabbitmq_prometheus's listener on 15692 is: /metrics, /metrics/per-object
// and /metrics/detailed, without authentication; /metrics/NAME for another
// NAME is 404 "Unknown Registry", anything else 404. Its scrapes take the
// unauthenticated scrapes' turns, so that they cannot starve the
// management API.
func (s *Server) PrometheusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.EscapedPath()
		if s.servePrometheus(w, r, path, s.scrapes) {
			return
		}
		if len(path) > len("/metrics/") && path[:len("/metrics/")] == "/metrics/" {
			http.Error(w, "Unknown Registry", http.StatusNotFound)
			return
		}
		http.NotFound(w, r)
	})
}
