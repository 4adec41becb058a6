// Command warren-perf is a load generator for AMQP 0-9-1 brokers (Warren,
// RabbitMQ, ...). It declares queues and exchanges, runs producers and
// consumers for a bounded time and/or count, prints a progress line every
// second and ends with a JSON summary: rates, end-to-end latency
// percentiles, lost/duplicate/out-of-order counts and, with --broker-pid,
// the broker's CPU time and peak RSS.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, "warren-perf:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "warren-perf:", err)
			return 2
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	sum, err := Run(ctx, cfg, os.Stderr)
	if sum != nil {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Println(string(b))
		if cfg.JSONFile != "" {
			if werr := os.WriteFile(cfg.JSONFile, append(b, '\n'), 0o644); werr != nil {
				fmt.Fprintln(os.Stderr, "warren-perf:", werr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren-perf:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("warren-perf", flag.ContinueOnError)
	fs.StringVar(&c.URL, "url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	fs.StringVar(&c.ConsumerURL, "consumer-url", "", "consumers' broker URL (default --url): another node of a cluster")
	fs.IntVar(&c.Producers, "producers", 1, "number of producers (one connection each)")
	fs.IntVar(&c.Consumers, "consumers", 1, "number of consumers (one connection each)")
	fs.IntVar(&c.Queues, "queues", 1, "number of queues (named <queue-prefix>-<i>)")
	fs.StringVar(&c.QueuePrefix, "queue-prefix", "warren-perf", "queue (and exchange) name prefix")
	fs.IntVar(&c.Size, "size", 1024, "message body size in bytes (min 16)")
	fs.Float64Var(&c.Rate, "rate", 0, "messages per second per producer (0 = unlimited)")
	fs.BoolVar(&c.Persistent, "persistent", false, "publish with delivery-mode 2")
	fs.IntVar(&c.Confirm, "confirm", 0, "publisher confirms: max outstanding per producer (0 = off)")
	fs.BoolVar(&c.AutoAck, "auto-ack", false, "consume with no-ack")
	fs.IntVar(&c.Prefetch, "prefetch", 0, "basic.qos prefetch count per consumer (manual ack)")
	fs.IntVar(&c.MultiAckEvery, "multi-ack-every", 1, "ack with multiple=true every K messages (1 = single acks)")
	fs.StringVar(&c.ExchangeType, "exchange-type", "direct", "direct|fanout|topic|headers")
	fs.StringVar(&c.Exchange, "exchange", "", "exchange name (default: default exchange for direct, <prefix>.<type> otherwise)")
	fs.StringVar(&c.RoutingKey, "routing-key", "", "fixed routing key (direct: bind every queue with it)")
	fs.IntVar(&c.TopicBindings, "topic-bindings", 0, "topic: number of wildcard bindings spread over the queues (0 = one per queue)")
	fs.IntVar(&c.FanoutQueues, "fanout-queues", 0, "fanout: number of queues bound to the fanout exchange (overrides --queues)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "publishing time bound (0 = none; then --count must be set)")
	fs.Int64Var(&c.Count, "count", 0, "messages per producer (0 = until --duration)")
	fs.BoolVar(&c.DurableQueues, "durable-queues", false, "declare durable queues (and exchanges)")
	fs.IntVar(&c.ConnectionsOnly, "connections-only", 0, "open N idle connections, hold them for --duration, report broker RSS per connection")
	fs.BoolVar(&c.Predeclared, "predeclared", false, "do not declare or delete queues/exchanges")
	fs.BoolVar(&c.Keep, "keep", false, "do not delete what was declared")
	fs.StringVar(&c.JSONFile, "json", "", "also write the final JSON summary to FILE")
	fs.StringVar(&c.ConfirmTrace, "confirm-trace", "", "write every confirm to FILE: producer, publish time (Unix ns), latency (µs), in publish order (--confirm)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of this client (go tool pprof) to FILE")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "broker pid: report its CPU seconds and peak RSS from /proc")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 10*time.Second, "after publishing stops, wait at most this long for confirms and deliveries")
	fs.DurationVar(&c.ConsumerDelay, "consumer-delay", 0, "start consumers this long after the producers (e.g. equal to --duration: fill, then drain)")
	fs.Int64Var(&c.MaxInflight, "max-inflight", 0, "pause publishing while more than N messages (all producers) are sent but not yet received (0 = no limit); keeps queues short so that throughput is the sustained end-to-end rate")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines")
	fs.StringVar(&c.QueueType, "queue-type", "", "classic|quorum|stream: declare with x-queue-type (quorum and stream are durable; default: no x-queue-type, the broker's default)")
	fs.Var(&c.QueueArgs, "queue-arg", "queue.declare argument k=v (repeatable); v is a long if an integer, a boolean if true/false, else a string (\"...\" forces a string)")
	fs.Var(&c.ConsumeArgs, "consume-arg", "basic.consume argument k=v (repeatable), typed as --queue-arg")
	fs.StringVar(&c.StreamOffset, "stream-offset", "", "stream consumers: x-stream-offset first|last|next|N|interval (10m; units Y M D h m s)")
	fs.BoolVar(&c.ConsumersAfterPublish, "consumers-after-publish", false, "start consumers once publishing (and its confirms) is done: with --stream-offset first, recv/s is the replay rate")
	fs.IntVar(&c.Partitions, "partitions", 0, "stream: declare with x-stream-partitions N (0 = no argument)")
	fs.IntVar(&c.PartitionKeys, "partition-keys", 0, "stream: each message's x-stream-partition-key header is one of K keys, in turn (0 = no header: the broker's round robin)")
	fs.IntVar(&c.Groups, "groups", 0, "stream consumer groups: G groups of --members consumers each, with x-stream-group (overrides --consumers); each group must get every confirmed message")
	fs.IntVar(&c.Members, "members", 1, "consumers per group (--groups)")
	fs.BoolVar(&c.StaticGroups, "static-groups", false, "--groups without x-stream-group (for brokers without groups, e.g. RabbitMQ: one stream per partition): member m of each group consumes the queues q with q % members == m")
	fs.BoolVar(&c.LeanPublisher, "lean-publisher", false, "producers speak AMQP 0-9-1 with Warren's codec (one buffer per producer written when the confirm window fills, one goroutine reading acks) instead of through amqp091-go (plain amqp:// only)")
	fs.BoolVar(&c.LeanConsumer, "lean-consumer", false, "consumers speak AMQP 0-9-1 with Warren's codec on one goroutine each instead of through amqp091-go (cheaper per delivery; plain amqp:// only)")
	fs.DurationVar(&c.ConsumeFor, "consume-for", 0, "stop consumers this long after they start, whether or not they got everything (lagging readers: no loss check)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, c.validate()
}
