package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Config is everything a run needs; see parseFlags for the meaning.
type Config struct {
	URL             string        `json:"-"`
	ConsumerURL     string        `json:"-"`
	Producers       int           `json:"producers"`
	Consumers       int           `json:"consumers"`
	Queues          int           `json:"queues"`
	QueuePrefix     string        `json:"queue_prefix"`
	Size            int           `json:"size"`
	Rate            float64       `json:"rate"`
	Persistent      bool          `json:"persistent"`
	Confirm         int           `json:"confirm"`
	AutoAck         bool          `json:"auto_ack"`
	Prefetch        int           `json:"prefetch"`
	MultiAckEvery   int           `json:"multi_ack_every"`
	ExchangeType    string        `json:"exchange_type"`
	Exchange        string        `json:"exchange"`
	RoutingKey      string        `json:"routing_key,omitempty"`
	TopicBindings   int           `json:"topic_bindings,omitempty"`
	FanoutQueues    int           `json:"fanout_queues,omitempty"`
	Duration        time.Duration `json:"-"`
	Count           int64         `json:"count"`
	DurableQueues   bool          `json:"durable_queues"`
	ConnectionsOnly int           `json:"connections_only,omitempty"`
	Predeclared     bool          `json:"predeclared"`
	Keep            bool          `json:"keep,omitempty"`
	JSONFile        string        `json:"-"`
	CPUProfile      string        `json:"-"`
	ConfirmTrace    string        `json:"-"`
	BrokerPID       int           `json:"broker_pid,omitempty"`
	DrainTimeout    time.Duration `json:"-"`
	ConsumerDelay   time.Duration `json:"-"`
	Quiet           bool          `json:"-"`
	MaxInflight     int64         `json:"max_inflight,omitempty"`

	QueueType             string     `json:"queue_type,omitempty"`
	QueueArgs             argList    `json:"-"`
	ConsumeArgs           argList    `json:"-"`
	QueueArgsJSON         amqp.Table `json:"queue_args,omitempty"`
	ConsumeArgsJSON       amqp.Table `json:"consume_args,omitempty"`
	StreamOffset          string     `json:"stream_offset,omitempty"`
	ConsumersAfterPublish bool       `json:"consumers_after_publish,omitempty"`

	// Partitioned streams and consumer groups (groups.go).
	Partitions    int           `json:"partitions,omitempty"`
	PartitionKeys int           `json:"partition_keys,omitempty"`
	Groups        int           `json:"groups,omitempty"`
	Members       int           `json:"members,omitempty"`
	StaticGroups  bool          `json:"static_groups,omitempty"`
	ConsumeFor    time.Duration `json:"-"`

	// LeanConsumer: consumers speak AMQP with Warren's codec (lean.go).
	LeanConsumer bool `json:"lean_consumer,omitempty"`
	// LeanPublisher: producers speak AMQP with Warren's codec (leanpub.go).
	LeanPublisher bool `json:"lean_publisher,omitempty"`
}

func (c *Config) validate() error {
	if c.Size < minBodySize {
		return fmt.Errorf("--size must be at least %d", minBodySize)
	}
	switch c.ExchangeType {
	case "direct", "fanout", "topic", "headers":
	default:
		return fmt.Errorf("--exchange-type %q: want direct, fanout, topic or headers", c.ExchangeType)
	}
	if c.FanoutQueues > 0 {
		if c.ExchangeType != "fanout" {
			return errors.New("--fanout-queues needs --exchange-type fanout")
		}
		c.Queues = c.FanoutQueues
	}
	if c.Exchange == "" && (c.ExchangeType != "direct" || c.RoutingKey != "") {
		c.Exchange = c.QueuePrefix + "." + c.ExchangeType
	}
	if c.Producers < 0 || c.Consumers < 0 || c.Queues < 1 || c.Confirm < 0 || c.Prefetch < 0 || c.Rate < 0 {
		return errors.New("negative counts, or --queues < 1")
	}
	if c.Producers > 1<<16 || c.Queues > 1<<20 {
		return errors.New("too many producers or queues")
	}
	if c.MultiAckEvery < 1 {
		c.MultiAckEvery = 1
	}
	if c.Duration <= 0 && c.Count <= 0 && c.Producers > 0 && c.ConnectionsOnly == 0 {
		return errors.New("unbounded run: set --duration and/or --count")
	}
	if c.ConnectionsOnly > 0 && c.Duration <= 0 {
		return errors.New("--connections-only needs --duration")
	}
	if c.Count > 1<<32-1 {
		return errors.New("--count too large")
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.ExchangeType == "topic" && c.TopicBindings <= 0 {
		c.TopicBindings = c.Queues
	}
	return c.validateQueueType()
}

// Summary is the final JSON report.
type Summary struct {
	Broker    string  `json:"broker"`
	Config    Config  `json:"config"`
	DurationS float64 `json:"duration_s"`
	ElapsedS  float64 `json:"elapsed_s"`
	Sent      int64   `json:"sent"`
	Confirmed int64   `json:"confirmed"`
	Nacked    int64   `json:"nacked"`
	Received  int64   `json:"received"`
	Expected  *int64  `json:"expected,omitempty"`
	Lost      *int64  `json:"lost,omitempty"`
	// DrainTimedOut: consumers had not received everything expected when
	// --drain-timeout ran out; Lost then counts undrained messages too.
	DrainTimedOut bool  `json:"drain_timed_out,omitempty"`
	Duplicates    int64 `json:"duplicates"`
	OutOfOrder    int64 `json:"out_of_order"`
	BadBodies     int64 `json:"bad_bodies,omitempty"`
	// StreamOffsetRegressions counts stream deliveries whose x-stream-offset
	// header was not above the previous one of that consumer and queue;
	// StreamOffsetMissing those without the header.
	StreamOffsetRegressions int64 `json:"stream_offset_regressions,omitempty"`
	StreamOffsetMissing     int64 `json:"stream_offset_missing,omitempty"`
	// SendRate is sent / publishing time; ReceiveRate is received / (last
	// delivery - first delivery), i.e. the drain rate when consumers start late.
	SendRate    float64 `json:"send_rate"`
	ReceiveRate float64 `json:"receive_rate"`
	// ConfirmRate is confirmed / (last confirm - start of publishing).
	ConfirmRate float64 `json:"confirm_rate,omitempty"`
	LatencyMs   struct {
		P50  float64 `json:"p50"`
		P95  float64 `json:"p95"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p99_9"`
		Max  float64 `json:"max"`
	} `json:"latency_ms"`
	// ConfirmLatencyMs is from basic.publish to its basic.ack (--confirm).
	ConfirmLatencyMs struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	} `json:"confirm_latency_ms"`
	BrokerCPUSeconds   *float64 `json:"broker_cpu_seconds,omitempty"`
	BrokerCPUUsPerMsg  *float64 `json:"broker_cpu_us_per_msg,omitempty"`
	BrokerCPUUsPerDlv  *float64 `json:"broker_cpu_us_per_delivery,omitempty"`
	BrokerRSSKB        *int64   `json:"broker_rss_kb,omitempty"`
	BrokerRSSStartKB   *int64   `json:"broker_rss_start_kb,omitempty"`
	ClientCPUSeconds   float64  `json:"client_cpu_seconds"`
	ConnectionsOpened  int      `json:"connections_opened,omitempty"`
	ConnectionsFailed  int      `json:"connections_failed,omitempty"`
	RSSDeltaKB         *int64   `json:"rss_delta_kb,omitempty"`
	KBPerConnection    *float64 `json:"kb_per_connection,omitempty"`
	Errors             []string `json:"errors,omitempty"`
	ConsumersCancelled int64    `json:"consumers_cancelled,omitempty"`
	// Groups is the per-group report of --groups.
	Groups []GroupSummary `json:"groups,omitempty"`
}

// route is where one message goes: its routing key (and headers) and the
// index of the queue that should get it (-1: every queue, -2: unknown).
type route struct {
	key     string
	headers amqp.Table
	queue   int
}

type producerState struct {
	id        uint32
	routes    []route
	sent      atomic.Int64
	confirmed bitset // written by the confirm listener only; read after it ends
	// sentAt[seq % len] is when seq was published (--confirm bounds the
	// outstanding ones); confirmLat is read after the listener ends.
	sentAt     []atomic.Int64
	confirmLat histogram
	// trace holds every confirm (--confirm-trace), appended by the
	// confirm listener, read after it ends.
	trace []confirmAt
}

// confirmAt is one confirm of --confirm-trace: when its publish was sent
// (Unix ns) and how long its confirm took.
type confirmAt struct{ sent, took int64 }

// confirmedAt records a confirm that arrived now for a publish sent at
// (Unix ns).
func (ps *producerState) confirmedAt(at, now int64, trace bool) {
	ps.confirmLat.record(now - at)
	if trace {
		ps.trace = append(ps.trace, confirmAt{at, now - at})
	}
}

type consumerState struct {
	mu       sync.Mutex
	interval histogram
	total    histogram
	trackers map[uint64]*seqTracker // owned by the consumer goroutine
	bad      int64
	// Stream offsets: the last x-stream-offset per queue, and the checks
	// on them (owned by the consumer goroutine).
	lastOffset       map[[2]int]int64 // by (queue, partition)
	offsetRegressed  int64
	offsetMissing    int64
	partitionMissing int64 // partitioned stream deliveries without x-stream-partition
}

type runner struct {
	cfg     Config
	out     io.Writer
	queues  []string
	readers [][]int // per queue: the consumers that subscribe to it

	producers []*producerState
	consumers []*consumerState

	sent, confirmed, nacked, received atomic.Int64
	fanout                            int64 // deliveries per message, for --max-inflight
	firstRecv, lastRecv               atomic.Int64
	lastConfirm                       atomic.Int64 // Unix ns
	cancelled                         atomic.Int64

	errMu  sync.Mutex
	errors []string
}

func (r *runner) fail(format string, a ...any) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errors) < 50 {
		r.errors = append(r.errors, fmt.Sprintf(format, a...))
	}
}

func (r *runner) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errors) == 0 {
		return nil
	}
	return fmt.Errorf("%s (and %d more)", r.errors[0], len(r.errors)-1)
}

func dial(u string) (*amqp.Connection, error) {
	c, _, err := dialNet(u)
	return c, err
}

// dialNet also returns the TCP connection, so that a connection whose
// graceful close hangs can be cut.
func dialNet(u string) (*amqp.Connection, net.Conn, error) {
	var nc net.Conn
	c, err := amqp.DialConfig(u, amqp.Config{
		Heartbeat: 30 * time.Second,
		Locale:    "en_US",
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := net.DialTimeout(network, addr, 10*time.Second)
			if err != nil {
				return nil, err
			}
			nc = conn
			// amqp091's default dial sets a deadline for the handshake
			// and clears it after; do the same.
			if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				return nil, err
			}
			return conn, nil
		},
	})
	return c, nc, err
}

// closeWithin closes conn gracefully, or cuts the socket after d.
func closeWithin(c *amqp.Connection, nc net.Conn, d time.Duration) (graceful bool) {
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		if nc != nil {
			nc.Close()
		}
		<-done
		return false
	}
}

// Run performs one load run and returns its summary (nil only when setup
// failed before anything was measured).
func Run(ctx context.Context, cfg Config, out io.Writer) (*Summary, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, out: out}
	for i := 0; i < cfg.Queues; i++ {
		r.queues = append(r.queues, fmt.Sprintf("%s-%d", cfg.QueuePrefix, i))
	}
	r.readers = make([][]int, cfg.Queues)
	for i := 0; i < cfg.Consumers; i++ {
		for _, q := range r.consumerQueues(i) {
			r.readers[q] = append(r.readers[q], i)
		}
	}
	sum := &Summary{Config: cfg, DurationS: cfg.Duration.Seconds()}
	if pu, err := url.Parse(cfg.URL); err == nil {
		sum.Broker = pu.Host
	}
	if cfg.ConnectionsOnly > 0 {
		r.connectionsOnly(ctx, sum)
		return sum, r.firstErr()
	}
	r.buildRoutes()
	r.fanout = 1
	if cfg.ExchangeType == "fanout" || (cfg.ExchangeType == "direct" && cfg.RoutingKey != "") {
		r.fanout = int64(cfg.Queues)
	}
	if cfg.Groups > 0 {
		r.fanout *= int64(cfg.Groups) // every group gets everything
	} else if cfg.QueueType == "stream" && len(r.readers[0]) > 1 {
		r.fanout *= int64(len(r.readers[0])) // every reader of a stream gets everything
	}

	if !cfg.Predeclared {
		if err := r.declare(); err != nil {
			return nil, fmt.Errorf("declare: %w", err)
		}
		if !cfg.Keep {
			defer func() {
				if err := r.teardown(); err != nil {
					r.fail("teardown: %v", err)
					sum.Errors = append(sum.Errors, fmt.Sprintf("teardown: %v", err))
				}
			}()
		}
	}

	bs := startBrokerStats(cfg.BrokerPID)
	client0 := selfCPUSeconds()
	start := time.Now()

	// Consumers first (unless delayed), so that latency is not measured
	// against an empty subscription.
	stopConsumers := make(chan struct{})
	var cwg sync.WaitGroup
	var consumerMu sync.Mutex // guards r.consumers against the reporter
	startConsumers := func() {
		ready := make(chan struct{}, cfg.Consumers)
		for i := 0; i < cfg.Consumers; i++ {
			cs := &consumerState{trackers: map[uint64]*seqTracker{}}
			consumerMu.Lock()
			r.consumers = append(r.consumers, cs)
			consumerMu.Unlock()
			qs := r.consumerQueues(i)
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				if cfg.LeanConsumer {
					r.consumeLean(cs, i, qs, ready, stopConsumers)
				} else {
					r.consume(cs, i, qs, ready, stopConsumers)
				}
			}()
		}
		for i := 0; i < cfg.Consumers; i++ {
			select {
			case <-ready:
			case <-time.After(30 * time.Second):
				r.fail("consumer did not start within 30 s")
				return
			}
		}
	}
	var consumersStarted atomic.Bool
	consumerStartAt := time.Now()
	var delayedStart chan struct{}
	if cfg.ConsumersAfterPublish {
		// started below, once the producers are done
	} else if cfg.ConsumerDelay <= 0 {
		startConsumers()
		consumersStarted.Store(true)
	} else {
		delayedStart = make(chan struct{})
		go func() {
			defer close(delayedStart)
			select {
			case <-time.After(cfg.ConsumerDelay):
			case <-ctx.Done():
				return
			}
			consumerMu.Lock()
			consumerStartAt = time.Now()
			consumerMu.Unlock()
			startConsumers()
			consumersStarted.Store(true)
		}()
	}

	// Reporter.
	stopReport := make(chan struct{})
	reportDone := make(chan struct{})
	go func() {
		defer close(reportDone)
		r.report(start, stopReport, &consumerMu)
	}()

	pubStart := time.Now()
	pubCtx, pubCancel := context.WithCancel(ctx)
	if cfg.Duration > 0 {
		pubCtx, pubCancel = context.WithTimeout(ctx, cfg.Duration)
	}
	var pwg sync.WaitGroup
	pubEnds := make([]time.Time, cfg.Producers)
	for _, ps := range r.producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			if cfg.LeanPublisher {
				r.produceLean(ctx, pubCtx, ps, &pubEnds[ps.id])
			} else {
				r.produce(ctx, pubCtx, ps, &pubEnds[ps.id])
			}
		}()
	}
	pwg.Wait()
	pubCancel()
	pubEnd := pubStart
	for _, t := range pubEnds {
		if t.After(pubEnd) {
			pubEnd = t
		}
	}
	if cfg.ConsumersAfterPublish && ctx.Err() == nil {
		consumerMu.Lock()
		consumerStartAt = time.Now()
		consumerMu.Unlock()
		startConsumers()
		consumersStarted.Store(true)
	}

	// Drain: wait for consumers to get everything expected.
	if delayedStart != nil {
		<-delayedStart
	}
	expected, known := r.expected()
	if cfg.ConsumeFor > 0 {
		// Lagging readers: they read for --consume-for, whatever is left.
		known = false
		consumerMu.Lock()
		until := consumerStartAt.Add(cfg.ConsumeFor)
		consumerMu.Unlock()
		for time.Now().Before(until) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if cfg.Consumers > 0 && consumersStarted.Load() {
		base := pubEnd
		consumerMu.Lock()
		if consumerStartAt.After(base) {
			base = consumerStartAt
		}
		consumerMu.Unlock()
		deadline := base.Add(cfg.DrainTimeout)
		lastN, lastChange := int64(-1), time.Now()
		drained := false
		for cfg.ConsumeFor == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			n := r.received.Load()
			if known && n >= expected {
				drained = true
				break
			}
			if n != lastN {
				lastN, lastChange = n, time.Now()
			} else if !known && time.Since(lastChange) > time.Second {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		sum.DrainTimedOut = known && !drained
	}
	end := time.Now()
	bs.stop()
	clientCPU := selfCPUSeconds() - client0
	close(stopConsumers)
	cwg.Wait()
	close(stopReport)
	<-reportDone

	// Summary.
	sum.ElapsedS = end.Sub(start).Seconds()
	sum.Sent = r.sent.Load()
	sum.Confirmed = r.confirmed.Load()
	sum.Nacked = r.nacked.Load()
	sum.Received = r.received.Load()
	sum.ClientCPUSeconds = clientCPU
	sum.ConsumersCancelled = r.cancelled.Load()
	if d := pubEnd.Sub(pubStart).Seconds(); d > 0 {
		sum.SendRate = float64(sum.Sent) / d
	}
	if l := r.lastConfirm.Load(); l > pubStart.UnixNano() && sum.Confirmed > 0 {
		sum.ConfirmRate = float64(sum.Confirmed) / (float64(l-pubStart.UnixNano()) / 1e9)
	}
	if f, l := r.firstRecv.Load(), r.lastRecv.Load(); l > f && sum.Received > 1 {
		sum.ReceiveRate = float64(sum.Received-1) / (float64(l-f) / 1e9)
	}
	var all histogram
	if cfg.Groups > 0 {
		sum.Groups = r.groupSummaries() // before the merge below changes the trackers
	}
	merged := map[uint64]*bitset{}
	for _, cs := range r.consumers {
		cs.mu.Lock()
		all.merge(&cs.total)
		cs.mu.Unlock()
		sum.BadBodies += cs.bad
		sum.StreamOffsetRegressions += cs.offsetRegressed
		sum.StreamOffsetMissing += cs.offsetMissing + cs.partitionMissing
		for k, t := range cs.trackers {
			sum.Duplicates += t.duplicates
			if !r.interleaved() {
				sum.OutOfOrder += t.outOfOrder
			}
			if m, ok := merged[k]; ok {
				sum.Duplicates += m.orCount(&t.seen)
			} else {
				merged[k] = &t.seen
			}
		}
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	sum.LatencyMs.P50 = ms(all.percentile(50))
	sum.LatencyMs.P95 = ms(all.percentile(95))
	sum.LatencyMs.P99 = ms(all.percentile(99))
	sum.LatencyMs.P999 = ms(all.percentile(99.9))
	sum.LatencyMs.Max = ms(all.max)
	var conf histogram
	for _, ps := range r.producers {
		conf.merge(&ps.confirmLat)
	}
	sum.ConfirmLatencyMs.P50 = ms(conf.percentile(50))
	sum.ConfirmLatencyMs.P99 = ms(conf.percentile(99))
	sum.ConfirmLatencyMs.Max = ms(conf.max)
	if cfg.ConfirmTrace != "" {
		if err := r.writeConfirmTrace(cfg.ConfirmTrace); err != nil {
			fmt.Fprintln(os.Stderr, "warren-perf: --confirm-trace:", err)
		}
	}
	if known && cfg.Consumers > 0 && consumersStarted.Load() {
		lost := r.countLost(merged)
		sum.Expected = &expected
		sum.Lost = &lost
	}
	if known && cfg.Groups > 0 && consumersStarted.Load() {
		for g := range sum.Groups {
			lost := r.countLostIn(merged, func(tq int) bool { return tq/cfg.Queues == g })
			sum.Groups[g].Lost = &lost
		}
	}
	bs.fill(sum)
	if sum.BrokerCPUSeconds != nil {
		if sum.Sent > 0 {
			v := *sum.BrokerCPUSeconds * 1e6 / float64(sum.Sent)
			sum.BrokerCPUUsPerMsg = &v
		}
		if sum.Received > 0 {
			v := *sum.BrokerCPUSeconds * 1e6 / float64(sum.Received)
			sum.BrokerCPUUsPerDlv = &v
		}
	}
	if !cfg.Quiet {
		lostS := "n/a"
		if sum.Lost != nil {
			lostS = strconv.FormatInt(*sum.Lost, 10)
		}
		fmt.Fprintf(out, "done: sent %d confirmed %d nacked %d received %d lost %s dup %d ooo %d | send %.0f/s recv %.0f/s | p50 %.2f p99 %.2f p99.9 %.2f max %.2f ms\n",
			sum.Sent, sum.Confirmed, sum.Nacked, sum.Received, lostS, sum.Duplicates, sum.OutOfOrder,
			sum.SendRate, sum.ReceiveRate, sum.LatencyMs.P50, sum.LatencyMs.P99, sum.LatencyMs.P999, sum.LatencyMs.Max)
	}
	r.errMu.Lock()
	sum.Errors = append(sum.Errors, r.errors...)
	r.errMu.Unlock()
	if sum.StreamOffsetRegressions > 0 || sum.StreamOffsetMissing > 0 {
		r.fail("stream deliveries: %d x-stream-offset headers not rising (per partition), %d without x-stream-offset or x-stream-partition", sum.StreamOffsetRegressions, sum.StreamOffsetMissing)
	}
	if sum.Lost != nil && *sum.Lost > 0 {
		if sum.DrainTimedOut {
			r.fail("%d messages not received within the drain timeout", *sum.Lost)
		} else {
			r.fail("%d messages lost", *sum.Lost)
		}
	}
	return sum, r.firstErr()
}

// consumerQueues is the queues consumer i subscribes to.
func (r *runner) consumerQueues(i int) []int {
	if r.cfg.Groups > 0 {
		return r.memberQueues(i)
	}
	var qs []int
	for q := i % r.cfg.Queues; q < r.cfg.Queues; q += r.cfg.Consumers {
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		qs = []int{i % r.cfg.Queues}
	}
	return qs
}

// trackQueue is the queue index under which consumer c records what it
// got from queue q: q itself, where consumers of a queue compete for its
// messages; for streams, where each reader gets every message, one index
// per (consumer, queue).
func (r *runner) trackQueue(c, q int) int {
	if r.cfg.Groups > 0 {
		return r.groupOf(c)*r.cfg.Queues + q // a group's members share
	}
	if r.cfg.QueueType == "stream" {
		return c*r.cfg.Queues + q
	}
	return q
}

// trackQueues is the tracking indices (see trackQueue) that should each
// see every message routed to queue q.
func (r *runner) trackQueues(q int) []int {
	if r.cfg.QueueType != "stream" {
		return []int{q}
	}
	if r.cfg.Groups > 0 {
		ts := make([]int, r.cfg.Groups)
		for g := range ts {
			ts[g] = g*r.cfg.Queues + q
		}
		return ts
	}
	var ts []int
	for _, c := range r.readers[q] {
		ts = append(ts, r.trackQueue(c, q))
	}
	return ts
}

// buildRoutes decides, for each producer, the routing keys it cycles over
// and which queue each should reach.
func (r *runner) buildRoutes() {
	cfg := r.cfg
	P, Q := cfg.Producers, cfg.Queues
	for p := 0; p < P; p++ {
		ps := &producerState{id: uint32(p)}
		// Queue indices this producer publishes to.
		var qs []int
		if Q >= P {
			for q := p; q < Q; q += P {
				qs = append(qs, q)
			}
		} else {
			qs = []int{p % Q}
		}
		switch cfg.ExchangeType {
		case "direct":
			if cfg.RoutingKey != "" {
				ps.routes = []route{{key: cfg.RoutingKey, queue: -1}}
			} else {
				for _, q := range qs {
					ps.routes = append(ps.routes, route{key: r.queues[q], queue: q})
				}
			}
		case "fanout":
			ps.routes = []route{{key: cfg.RoutingKey, queue: -1}}
		case "topic":
			if cfg.RoutingKey != "" {
				ps.routes = []route{{key: cfg.RoutingKey, queue: -2}}
				break
			}
			N := cfg.TopicBindings
			var js []int
			if N >= P {
				for j := p; j < N; j += P {
					js = append(js, j)
				}
			} else {
				js = []int{p % N}
			}
			for _, j := range js {
				ps.routes = append(ps.routes, route{key: topicKey(j), queue: j % Q})
			}
		case "headers":
			for _, q := range qs {
				ps.routes = append(ps.routes, route{headers: amqp.Table{"q": r.queues[q]}, queue: q})
			}
		}
		r.producers = append(r.producers, ps)
	}
}

// topicKey is the routing key that matches binding j (and no other).
func topicKey(j int) string { return "r." + strconv.Itoa(j) + ".x" }

// topicPattern is binding j's pattern: always a wildcard, three shapes.
func topicPattern(j int) string {
	switch j % 3 {
	case 0:
		return "r." + strconv.Itoa(j) + ".*"
	case 1:
		return "r." + strconv.Itoa(j) + ".#"
	default:
		return "*." + strconv.Itoa(j) + ".x"
	}
}

// expected is the number of deliveries the consumers should see, and
// whether it can be known. Call only after the producers have finished.
func (r *runner) expected() (int64, bool) {
	var n int64
	for _, ps := range r.producers {
		for _, rt := range ps.routes {
			if rt.queue == -2 {
				return 0, false
			}
		}
	}
	for _, ps := range r.producers {
		sent := ps.sent.Load()
		for seq := int64(0); seq < sent; seq++ {
			if r.cfg.Confirm > 0 && !ps.confirmed.has(uint32(seq)) {
				continue
			}
			q := ps.routes[seq%int64(len(ps.routes))].queue
			lo, hi := q, q+1
			if q == -1 {
				lo, hi = 0, r.cfg.Queues
			}
			for qi := lo; qi < hi; qi++ {
				n += int64(len(r.trackQueues(qi)))
			}
		}
	}
	return n, true
}

// countLost counts messages that were sent (and confirmed, with confirms)
// but never reached a queue's consumer.
func (r *runner) countLost(got map[uint64]*bitset) int64 {
	return r.countLostIn(got, func(int) bool { return true })
}

// countLostIn is countLost for the tracking indices in counts.
func (r *runner) countLostIn(got map[uint64]*bitset, counts func(tq int) bool) int64 {
	var lost int64
	empty := &bitset{}
	for _, ps := range r.producers {
		sent := ps.sent.Load()
		for seq := int64(0); seq < sent; seq++ {
			if r.cfg.Confirm > 0 && !ps.confirmed.has(uint32(seq)) {
				continue
			}
			q := ps.routes[seq%int64(len(ps.routes))].queue
			lo, hi := q, q+1
			if q == -1 {
				lo, hi = 0, r.cfg.Queues
			}
			for qi := lo; qi < hi; qi++ {
				for _, tq := range r.trackQueues(qi) {
					if !counts(tq) {
						continue
					}
					b := got[trackKey(ps.id, tq)]
					if b == nil {
						b = empty
					}
					if !b.has(uint32(seq)) {
						lost++
					}
				}
			}
		}
	}
	return lost
}

// writeConfirmTrace writes every producer's confirms to file, one line
// each, in the order they were published: the producer, the publish's
// time (Unix ns) and its confirm's latency in microseconds. Stalls show
// as runs of slow confirms; their spacing tells a periodic cause.
func (r *runner) writeConfirmTrace(file string) error {
	type rec struct {
		p int
		confirmAt
	}
	var all []rec
	for i, ps := range r.producers {
		for _, c := range ps.trace {
			all = append(all, rec{i, c})
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].sent < all[b].sent })
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, c := range all {
		fmt.Fprintf(w, "%d %d %d\n", c.p, c.sent, c.took/int64(time.Microsecond))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
