// Command warren-backlog measures a broker under a large backlog: producers
// publish persistent messages with confirms into one durable queue that has
// no consumer, then one consumer drains it. It checks that every confirmed
// message is received exactly once, and reports publish and drain rates and
// the broker's peak RSS (sampled from /proc every 200 ms). It works against
// any AMQP 0-9-1 broker.
//
// While it runs it shows its progress on stderr (internal/progress): on a
// terminal a line redrawn in place with the confirmed or received count,
// the percentage, the current rate, the time left and the broker's RSS;
// elsewhere the same as a plain line every 5 s; --progress off for none.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/progress"
)

type result struct {
	Messages       int64   `json:"messages"`
	Size           int     `json:"size"`
	PublishSeconds float64 `json:"publish_seconds"`
	PublishRate    float64 `json:"publish_rate"`
	DrainSeconds   float64 `json:"drain_seconds"`
	DrainRate      float64 `json:"drain_rate"`
	Confirmed      int64   `json:"confirmed"`
	Received       int64   `json:"received"`
	Lost           int64   `json:"lost"`
	Duplicates     int64   `json:"duplicates"`
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	PeakRSSFillMB  float64 `json:"peak_rss_fill_mb"`
}

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	count := flag.Int64("count", 1_000_000, "messages in all")
	producers := flag.Int("producers", 2, "publishing connections")
	size := flag.Int("size", 1024, "body bytes (at least 16)")
	window := flag.Int("confirm-window", 500, "unconfirmed messages per producer")
	queueName := flag.String("queue", "warren-backlog", "durable queue to use (purged first, deleted after)")
	pid := flag.Int("broker-pid", 0, "broker process to sample RSS from")
	timeout := flag.Duration("timeout", time.Hour, "give up after this long")
	jsonOut := flag.String("json", "", "write the result as JSON to FILE")
	queues := flag.Int("queues", 1, "spread the messages over this many queues (<queue>-<i> when more than one)")
	fillOnly := flag.Bool("fill-only", false, "publish, then stop: keep the queues and their messages (for restart tests)")
	queueType := flag.String("queue-type", "", "x-queue-type of the queues: classic, quorum (empty: the broker's default)")
	progressMode := flag.String("progress", progress.Auto, "progress on stderr: auto (live on a terminal, a line every 5 s otherwise), plain or off")
	flag.Parse()
	check(progress.CheckMode(*progressMode))
	if *size < 16 {
		*size = 16
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	rss := newSampler(*pid)
	defer rss.stop()
	conn, err := amqp.Dial(*url)
	check(err)
	ch, err := conn.Channel()
	check(err)
	names := []string{*queueName}
	if *queues > 1 {
		names = names[:0]
		for i := 0; i < *queues; i++ {
			names = append(names, fmt.Sprintf("%s-%d", *queueName, i))
		}
	}
	for _, name := range names {
		var args amqp.Table
		if *queueType != "" {
			args = amqp.Table{"x-queue-type": *queueType}
		}
		_, err = ch.QueueDeclare(name, true, false, false, false, args)
		check(err)
		_, err = ch.QueuePurge(name, false)
		check(err)
	}

	res := result{Messages: *count, Size: *size}
	per := *count / int64(*producers)
	var confirmed atomic.Int64
	meterOpts := progress.Options{Mode: *progressMode, Interval: 5 * time.Second, Unit: "msg"}
	if *pid > 0 {
		meterOpts.Extra = func() string { return fmt.Sprintf("broker rss %.0f MB", rss.peakMB()) }
	}
	fill := progress.Start(os.Stderr, "fill", *count, meterOpts)
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < *producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := per
			if p == *producers-1 {
				n = *count - per*int64(*producers-1)
			}
			publish(ctx, *url, names, p, n, *size, *window, func() { confirmed.Add(1); fill.Add(1) })
		}()
	}
	wg.Wait()
	fill.Done()
	res.PublishSeconds = time.Since(start).Seconds()
	res.Confirmed = confirmed.Load()
	res.PublishRate = float64(res.Confirmed) / res.PublishSeconds
	res.PeakRSSFillMB = rss.peakMB()
	if *fillOnly {
		conn.Close()
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(out))
		return
	}
	if len(names) > 1 {
		fmt.Fprintln(os.Stderr, "warren-backlog: draining is for one queue; use --fill-only with --queues")
		os.Exit(2)
	}

	start = time.Now()
	seen := make([][]uint64, *producers) // bitsets of received sequence numbers
	for p := range seen {
		seen[p] = make([]uint64, (*count-per*int64(*producers-1))/64+2)
	}
	check(ch.Qos(1000, 0, false))
	deliveries, err := ch.Consume(*queueName, "", false, false, false, false, nil)
	check(err)
	drain := progress.Start(os.Stderr, "drain", res.Confirmed, meterOpts)
	var n int64
	for n < res.Confirmed {
		select {
		case d, ok := <-deliveries:
			if !ok {
				fmt.Fprintln(os.Stderr, "consumer closed")
				n = res.Confirmed
				continue
			}
			p, seq := int(binary.BigEndian.Uint32(d.Body)), binary.BigEndian.Uint64(d.Body[4:])
			if p < len(seen) && int(seq/64) < len(seen[p]) {
				bit := uint64(1) << (seq % 64)
				if seen[p][seq/64]&bit != 0 {
					res.Duplicates++
				}
				seen[p][seq/64] |= bit
			}
			n++
			drain.Set(n)
			if n%500 == 0 {
				d.Ack(true)
			}
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "timed out draining")
			n = res.Confirmed
		}
	}
	ch.Ack(0, true)
	drain.Done()
	res.Received = n - res.Duplicates
	res.DrainSeconds = time.Since(start).Seconds()
	res.DrainRate = float64(n) / res.DrainSeconds
	res.Lost = res.Confirmed - res.Received
	res.PeakRSSMB = rss.peakMB()
	ch.QueueDelete(*queueName, false, false, false)
	conn.Close()

	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(out))
	if *jsonOut != "" {
		check(os.WriteFile(*jsonOut, out, 0o644))
	}
	if res.Lost != 0 || res.Duplicates != 0 {
		os.Exit(1)
	}
}

// publish sends n messages numbered 0..n-1 with confirms, calling acked
// for each one confirmed, and returns how many were.
func publish(ctx context.Context, url string, queues []string, producer int, n int64, size, window int, acked func()) int64 {
	conn, err := amqp.Dial(url)
	check(err)
	defer conn.Close()
	ch, err := conn.Channel()
	check(err)
	check(ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, window))
	body := make([]byte, size)
	binary.BigEndian.PutUint32(body, uint32(producer))
	var ok, outstanding int64
	for seq := int64(0); seq < n || outstanding > 0; {
		if seq < n && outstanding < int64(window) {
			binary.BigEndian.PutUint64(body[4:], uint64(seq))
			err := ch.PublishWithContext(ctx, "", queues[seq%int64(len(queues))], false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
			check(err)
			seq++
			outstanding++
			continue
		}
		select {
		case c := <-confirms:
			outstanding--
			if c.Ack {
				ok++
				acked()
			}
		case <-ctx.Done():
			return ok
		}
	}
	return ok
}

type sampler struct {
	pid  int
	peak atomic.Int64 // KB
	quit chan struct{}
}

func newSampler(pid int) *sampler {
	s := &sampler{pid: pid, quit: make(chan struct{})}
	if pid > 0 {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				s.sample()
				select {
				case <-t.C:
				case <-s.quit:
					return
				}
			}
		}()
	}
	return s
}

func (s *sampler) sample() {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > s.peak.Load() {
					s.peak.Store(kb)
				}
			}
		}
	}
}

func (s *sampler) peakMB() float64 { s.sample(); return float64(s.peak.Load()) / 1024 }
func (s *sampler) stop()           { close(s.quit) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren-backlog:", err)
		os.Exit(2)
	}
}
