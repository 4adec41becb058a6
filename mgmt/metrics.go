package mgmt

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
)

// collector exposes broker state to Prometheus, computed at scrape time from
// the admin API: node-wide figures only, whose count does not grow with the
// broker's objects (RabbitMQ's Prometheus plugin's default for /metrics);
// per-queue figures are queueCollector's, at /metrics/per-object. Names follow RabbitMQ's Prometheus plugin where it has the
// same metric (rabbitmq_connections, rabbitmq_queue_messages_ready, ...), so
// its dashboards apply; Warren's own store figures are warren_store_*.
type collector struct {
	b           *server.Server
	sm          *sampler
	msgCounters []msgCounterDesc
	fsyncHist   *prometheus.Desc

	connections, channels, queues, consumers, exchanges *prometheus.Desc

	messagesReady, messagesUnacked, messages           *prometheus.Desc
	storeCommits, storeBatches, storeFailed            *prometheus.Desc
	storeMessages, storeEntries, storeSettled          *prometheus.Desc
	storeFsyncSeconds, storeFsyncMax, storePending     *prometheus.Desc
	storeMessagesPerCommit, storeDangling, buildInfo   *prometheus.Desc
	memAlarm, diskAlarm, memLimit, diskLimit, diskFree *prometheus.Desc
	connOpened, connClosed, chanOpened, chanClosed     *prometheus.Desc
}

func newCollector(b *server.Server, sm *sampler) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &collector{
		b:                      b,
		sm:                     sm,
		msgCounters:            newMessageCounterDescs(),
		fsyncHist:              d("warren_store_fsync_duration_seconds", "Store transaction commits (one fsync each) by duration"),
		connections:            d("rabbitmq_connections", "Client connections open"),
		channels:               d("rabbitmq_channels", "Channels with consumers (other channels are not visible to the admin API yet)"),
		queues:                 d("rabbitmq_queues", "Queues"),
		consumers:              d("rabbitmq_consumers", "Consumers"),
		exchanges:              d("warren_exchanges", "Exchanges, the predeclared ones included"),
		messages:               d("rabbitmq_queue_messages", "Messages ready and unacknowledged, all queues"),
		messagesReady:          d("rabbitmq_queue_messages_ready", "Messages ready for delivery, all queues"),
		messagesUnacked:        d("rabbitmq_queue_messages_unacked", "Messages delivered and not yet acknowledged, all queues"),
		storeCommits:           d("warren_store_commits_total", "Store transactions committed (one fsync each)"),
		storeBatches:           d("warren_store_batches_total", "Batches taken by the store's committer"),
		storeFailed:            d("warren_store_failed_transactions_total", "Store transactions that failed"),
		storeMessages:          d("warren_store_messages_total", "Message bodies written to the store"),
		storeEntries:           d("warren_store_entries_total", "Queue entries written to the store"),
		storeSettled:           d("warren_store_settled_total", "Queue entries removed from the store"),
		storeFsyncSeconds:      d("warren_store_fsync_seconds_total", "Time spent committing store transactions"),
		storeFsyncMax:          d("warren_store_fsync_max_seconds", "Longest store transaction commit"),
		storePending:           d("warren_store_pending_ops", "Store operations waiting for the next batch"),
		storeMessagesPerCommit: d("warren_store_messages_per_commit", "Messages per store commit (group-commit efficiency)"),
		storeDangling:          d("warren_store_dangling_entries_total", "Entries found without a body at recovery (corruption)"),
		buildInfo:              d("warren_build_info", "Broker version", "version"),
		memAlarm:               d("rabbitmq_alarms_memory_used_watermark", "1 while the memory alarm is raised (publishers blocked)"),
		diskAlarm:              d("rabbitmq_alarms_free_disk_space_watermark", "1 while the disk alarm is raised (publishers blocked)"),
		memLimit:               d("rabbitmq_resident_memory_limit_bytes", "Memory high watermark"),
		diskLimit:              d("rabbitmq_disk_space_available_limit_bytes", "Free disk space below which publishers are blocked"),
		diskFree:               d("rabbitmq_disk_space_available_bytes", "Free disk space under the data directory"),
		connOpened:             d("rabbitmq_connections_opened_total", "Client connections opened"),
		connClosed:             d("rabbitmq_connections_closed_total", "Client connections closed"),
		chanOpened:             d("rabbitmq_channels_opened_total", "Channels opened"),
		chanClosed:             d("rabbitmq_channels_closed_total", "Channels closed"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.connections, c.channels, c.queues, c.consumers, c.exchanges, c.messages, c.messagesReady, c.messagesUnacked,
		c.storeCommits, c.storeBatches, c.storeFailed, c.storeMessages, c.storeEntries, c.storeSettled,
		c.storeFsyncSeconds, c.storeFsyncMax, c.storePending, c.storeMessagesPerCommit, c.storeDangling, c.buildInfo,
		c.memAlarm, c.diskAlarm, c.memLimit, c.diskLimit, c.diskFree, c.fsyncHist,
		c.connOpened, c.connClosed, c.chanOpened, c.chanClosed,
	} {
		ch <- d
	}
	for _, m := range c.msgCounters {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	o := c.b.Overview()
	gauge(c.connections, float64(o.Connections))
	gauge(c.channels, float64(o.Channels))
	gauge(c.queues, float64(o.Queues))
	gauge(c.consumers, float64(o.Consumers))
	gauge(c.exchanges, float64(o.Exchanges))
	gauge(c.messages, float64(o.Messages))
	gauge(c.messagesReady, float64(o.Ready))
	gauge(c.messagesUnacked, float64(o.Unacked))
	gauge(c.buildInfo, 1, server.Version())
	counter(c.connOpened, float64(o.Churn.ConnectionsOpened))
	counter(c.connClosed, float64(o.Churn.ConnectionsClosed))
	counter(c.chanOpened, float64(o.Churn.ChannelsOpened))
	counter(c.chanClosed, float64(o.Churn.ChannelsClosed))
	al := c.b.Alarms()
	gauge(c.memAlarm, b2f(al.Memory))
	gauge(c.diskAlarm, b2f(al.Disk))
	gauge(c.memLimit, float64(al.MemoryLimit))
	gauge(c.diskLimit, float64(al.DiskFreeLimit))
	gauge(c.diskFree, float64(diskFree(c.b.DataDir())))
	st := o.StoreStats
	counter(c.storeCommits, float64(st.Commits))
	counter(c.storeBatches, float64(st.Batches))
	counter(c.storeFailed, float64(st.FailedTxns))
	counter(c.storeMessages, float64(st.Messages))
	counter(c.storeEntries, float64(st.Entries))
	counter(c.storeSettled, float64(st.Settled))
	counter(c.storeFsyncSeconds, st.FsyncTotal.Seconds())
	gauge(c.storeFsyncMax, st.FsyncMax.Seconds())
	gauge(c.storePending, float64(st.Pending))
	gauge(c.storeMessagesPerCommit, st.MessagesPerCommit())
	counter(c.storeDangling, float64(st.DanglingEntries))
	ch <- fsyncHistogram(c.fsyncHist, st)
	node := c.sm.read().node
	for _, m := range c.msgCounters {
		counter(m.desc, float64(m.value(node)))
	}
}

// msgCounterDesc is one of the node's message counters, named as
// RabbitMQ's Prometheus plugin names its global counters.
type msgCounterDesc struct {
	desc  *prometheus.Desc
	value func(counts) uint64
}

func newMessageCounterDescs() []msgCounterDesc {
	one := func(i int) func(counts) uint64 { return func(c counts) uint64 { return c[i] } }
	m := func(name, help string, v func(counts) uint64) msgCounterDesc {
		return msgCounterDesc{prometheus.NewDesc(name, help, nil, nil), v}
	}
	return []msgCounterDesc{
		m("rabbitmq_global_messages_received_total", "Messages published", one(cPublish)),
		m("rabbitmq_global_messages_confirmed_total", "Messages confirmed to publishers", one(cConfirm)),
		m("rabbitmq_global_messages_routed_total", "Messages routed to at least one queue",
			func(c counts) uint64 { return c[cPublish] - c[cReturnUnroutable] - c[cDropUnroutable] }),
		m("rabbitmq_global_messages_unroutable_returned_total", "Mandatory messages returned as unroutable", one(cReturnUnroutable)),
		m("rabbitmq_global_messages_unroutable_dropped_total", "Unroutable messages dropped", one(cDropUnroutable)),
		m("rabbitmq_global_messages_delivered_total", "Messages delivered to consumers or taken by basic.get",
			func(c counts) uint64 { return c[cDeliver] + c[cDeliverNoAck] + c[cGet] + c[cGetNoAck] }),
		m("rabbitmq_global_messages_delivered_consume_manual_ack_total", "Messages delivered to consumers that ack", one(cDeliver)),
		m("rabbitmq_global_messages_delivered_consume_auto_ack_total", "Messages delivered to no-ack consumers", one(cDeliverNoAck)),
		m("rabbitmq_global_messages_delivered_get_manual_ack_total", "Messages taken by basic.get with ack", one(cGet)),
		m("rabbitmq_global_messages_delivered_get_auto_ack_total", "Messages taken by basic.get without ack", one(cGetNoAck)),
		m("rabbitmq_global_messages_get_empty_total", "basic.get that found no message", one(cGetEmpty)),
		m("rabbitmq_global_messages_redelivered_total", "Redelivered messages delivered or taken", one(cRedeliver)),
		m("rabbitmq_global_messages_acknowledged_total", "Messages acknowledged", one(cAck)),
	}
}

// fsyncHistogram turns the store's commit-duration counts into a
// Prometheus histogram (cumulative buckets, in seconds).
func fsyncHistogram(d *prometheus.Desc, st persist.Stats) prometheus.Metric {
	buckets := map[float64]uint64{}
	var cum uint64
	for i, b := range persist.FsyncBounds() {
		cum += st.Fsync.Counts[i]
		buckets[b.Seconds()] = cum
	}
	total := cum + st.Fsync.Counts[len(st.Fsync.Counts)-1]
	return prometheus.MustNewConstHistogram(d, total, st.FsyncTotal.Seconds(), buckets)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// queueCollector exposes per-queue figures (/metrics/per-object), for at
// most limit queues: a scrape's size is bounded whatever the number of
// queues, and warren_metrics_per_object_truncated says when some were left
// out.
type queueCollector struct {
	b     *server.Server
	limit int

	ready, unacked, consumers, readyBytes, memory, truncated *prometheus.Desc
}

func newQueueCollector(b *server.Server, limit int) *queueCollector {
	q := []string{"vhost", "queue"}
	return &queueCollector{
		b: b, limit: limit,
		ready:      prometheus.NewDesc("rabbitmq_detailed_queue_messages_ready", "Messages ready for delivery", q, nil),
		unacked:    prometheus.NewDesc("rabbitmq_detailed_queue_messages_unacked", "Messages delivered and not yet acknowledged", q, nil),
		consumers:  prometheus.NewDesc("rabbitmq_detailed_queue_consumers", "Consumers on the queue", q, nil),
		readyBytes: prometheus.NewDesc("rabbitmq_detailed_queue_messages_ready_bytes", "Body bytes of the ready messages", q, nil),
		memory:     prometheus.NewDesc("rabbitmq_detailed_queue_process_memory_bytes", "Estimated memory held by the queue", q, nil),
		truncated:  prometheus.NewDesc("warren_metrics_per_object_truncated", "1 when queues were left out of this scrape (more than the per-object limit)", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.unacked, c.consumers, c.readyBytes, c.memory, c.truncated} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	qs, err := c.b.Queues("")
	if err != nil {
		return
	}
	gauge(c.truncated, b2f(len(qs) > c.limit))
	for _, q := range qs[:min(len(qs), c.limit)] {
		gauge(c.ready, float64(q.Ready), q.VHost, q.Name)
		gauge(c.unacked, float64(q.Unacked), q.VHost, q.Name)
		gauge(c.consumers, float64(q.Consumers), q.VHost, q.Name)
		gauge(c.readyBytes, float64(q.ReadyBytes), q.VHost, q.Name)
		gauge(c.memory, float64(q.Memory), q.VHost, q.Name)
	}
}
