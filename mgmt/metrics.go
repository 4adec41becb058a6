package mgmt

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/server"
)

// collector exposes what /metrics carries beside the RabbitMQ families of
// prometheus.go: rabbitmq_prometheus's alarm collector (rabbitmq_alarms_*)
// and Warren's own figures, warren_* (the store's write path, the
// exchange count, the build).
type collector struct {
	b         *server.Server
	fsyncHist *prometheus.Desc

	exchanges                                        *prometheus.Desc
	storeCommits, storeBatches, storeFailed          *prometheus.Desc
	storeMessages, storeEntries, storeSettled        *prometheus.Desc
	storeFsyncSeconds, storeFsyncMax, storePending   *prometheus.Desc
	storeMessagesPerCommit, storeDangling, buildInfo *prometheus.Desc
	memAlarm, diskAlarm, fdAlarm                     *prometheus.Desc

	raftSyncs, raftAppends, raftEntries, raftBytes, raftSyncSeconds *prometheus.Desc
	raftSegments, raftZeroFilled, raftRolls, raftRollsUnprepared    *prometheus.Desc
	raftRollSeconds, raftCopied                                     *prometheus.Desc
}

func newCollector(b *server.Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &collector{
		b:                      b,
		fsyncHist:              d("warren_store_fsync_duration_seconds", "Store transaction commits (one fsync each) by duration"),
		exchanges:              d("warren_exchanges", "Exchanges, the predeclared ones included"),
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
		memAlarm:               d("rabbitmq_alarms_memory_used_watermark", "is 1 if VM memory watermark alarm is in effect"),
		diskAlarm:              d("rabbitmq_alarms_free_disk_space_watermark", "is 1 if free disk space watermark alarm is in effect"),
		fdAlarm:                d("rabbitmq_alarms_file_descriptor_limit", "is 1 if file descriptor limit alarm is in effect"),

		raftSyncs:           d("warren_raft_log_syncs_total", "Group commits of the Raft log made durable (one fdatasync each, for every group of the node)"),
		raftAppends:         d("warren_raft_log_appends_total", "Raft log appends written (one per group per batch raft hands the store)"),
		raftEntries:         d("warren_raft_log_entries_total", "Raft log entries written"),
		raftBytes:           d("warren_raft_log_written_bytes_total", "Bytes written to the Raft log"),
		raftSyncSeconds:     d("warren_raft_log_sync_seconds_total", "Time spent in the Raft log's fdatasync"),
		raftSegments:        d("warren_raft_log_segments", "Raft log segments on disk"),
		raftZeroFilled:      d("warren_raft_log_zero_filled_segments_total", "Spare Raft log segments made by zero-filling (the others are reclaimed segments, reused)"),
		raftRolls:           d("warren_raft_log_rolls_total", "Switches of the Raft log to a new segment"),
		raftRollsUnprepared: d("warren_raft_log_rolls_unprepared_total", "Switches of the Raft log to a new segment that found no spare ready"),
		raftRollSeconds:     d("warren_raft_log_roll_seconds_total", "Time the Raft log's committer spent switching segments"),
		raftCopied:          d("warren_raft_log_copied_entries_total", "Live Raft log entries copied to the log's head so that the oldest segment can go"),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.exchanges, c.storeCommits, c.storeBatches, c.storeFailed, c.storeMessages, c.storeEntries, c.storeSettled,
		c.storeFsyncSeconds, c.storeFsyncMax, c.storePending, c.storeMessagesPerCommit, c.storeDangling, c.buildInfo,
		c.memAlarm, c.diskAlarm, c.fdAlarm, c.fsyncHist,
		c.raftSyncs, c.raftAppends, c.raftEntries, c.raftBytes, c.raftSyncSeconds, c.raftSegments,
		c.raftZeroFilled, c.raftRolls, c.raftRollsUnprepared, c.raftRollSeconds, c.raftCopied,
	} {
		ch <- d
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
	untyped := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.UntypedValue, v)
	}
	gauge(c.buildInfo, 1, server.Version())
	al := c.b.Alarms()
	untyped(c.memAlarm, b2f(al.Memory))
	untyped(c.diskAlarm, b2f(al.Disk))
	untyped(c.fdAlarm, 0) // Warren raises no descriptor alarm
	o := c.b.Overview()
	st := o.StoreStats
	gauge(c.exchanges, float64(o.Exchanges))
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
	if rs, ok := c.b.RaftStoreStats(); ok {
		counter(c.raftSyncs, float64(rs.Syncs))
		counter(c.raftAppends, float64(rs.Appends))
		counter(c.raftEntries, float64(rs.Entries))
		counter(c.raftBytes, float64(rs.Bytes))
		counter(c.raftSyncSeconds, rs.SyncTime.Seconds())
		gauge(c.raftSegments, float64(rs.Segments))
		counter(c.raftZeroFilled, float64(rs.ZeroFilled))
		counter(c.raftRolls, float64(rs.Rolls))
		counter(c.raftRollsUnprepared, float64(rs.RollsUnprepared))
		counter(c.raftRollSeconds, rs.RollTime.Seconds())
		counter(c.raftCopied, float64(rs.Copied))
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
