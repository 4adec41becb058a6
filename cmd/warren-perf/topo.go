package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/amqpopen"
)

// openChannel dials u and opens a channel; closing the connection closes
// the channel too.
func openChannel(u string) (*amqp.Connection, *amqp.Channel, error) {
	return amqpopen.Channel(func() (*amqp.Connection, error) { return dial(u) })
}

// declare creates (and purges) the queues, the exchange and the bindings.
func (r *runner) declare() error {
	cfg := r.cfg
	conn, ch, err := openChannel(cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	args := cfg.queueArgs()
	for _, q := range r.queues {
		if cfg.QueueType == "stream" {
			// Streams refuse queue.purge: start from an empty one.
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				return fmt.Errorf("queue.delete %s: %w", q, err)
			}
		}
		if _, err := ch.QueueDeclare(q, cfg.DurableQueues, false, false, false, args); err != nil {
			return fmt.Errorf("queue.declare %s: %w", q, err)
		}
		if cfg.QueueType == "stream" {
			continue
		}
		if _, err := ch.QueuePurge(q, false); err != nil {
			return fmt.Errorf("queue.purge %s: %w", q, err)
		}
	}
	if cfg.Exchange == "" {
		return nil
	}
	if err := ch.ExchangeDeclare(cfg.Exchange, cfg.ExchangeType, cfg.DurableQueues, false, false, false, nil); err != nil {
		return fmt.Errorf("exchange.declare %s: %w", cfg.Exchange, err)
	}
	// Bindings are many (--topic-bindings): send them no-wait and check the
	// channel with one synchronous call at the end.
	bind := func(q, key string, args amqp.Table) error {
		return ch.QueueBind(q, key, cfg.Exchange, true, args)
	}
	switch cfg.ExchangeType {
	case "direct", "fanout":
		for _, q := range r.queues {
			if err := bind(q, cfg.RoutingKey, nil); err != nil {
				return err
			}
		}
	case "topic":
		if cfg.RoutingKey != "" {
			for _, q := range r.queues {
				if err := bind(q, cfg.RoutingKey, nil); err != nil {
					return err
				}
			}
			break
		}
		for j := 0; j < cfg.TopicBindings; j++ {
			if err := bind(r.queues[j%cfg.Queues], topicPattern(j), nil); err != nil {
				return err
			}
		}
	case "headers":
		for _, q := range r.queues {
			if err := bind(q, "", amqp.Table{"x-match": "all", "q": q}); err != nil {
				return err
			}
		}
	}
	if _, err := ch.QueueDeclarePassive(r.queues[0], cfg.DurableQueues, false, false, false, args); err != nil {
		return fmt.Errorf("after bindings: %w", err)
	}
	return nil
}

// teardown deletes what declare created.
func (r *runner) teardown() error {
	conn, ch, err := openChannel(r.cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range r.queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			return fmt.Errorf("queue.delete %s: %w", q, err)
		}
	}
	if r.cfg.Exchange != "" {
		if err := ch.ExchangeDelete(r.cfg.Exchange, false, false); err != nil {
			return fmt.Errorf("exchange.delete %s: %w", r.cfg.Exchange, err)
		}
	}
	return nil
}

// report prints one progress line per second until stop is closed.
func (r *runner) report(start time.Time, stop <-chan struct{}, consumerMu *sync.Mutex) {
	if r.cfg.Quiet {
		<-stop
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastS, lastR, lastC int64
	last := start
	var h histogram
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			s, rc, c := r.sent.Load(), r.received.Load(), r.confirmed.Load()
			dt := now.Sub(last).Seconds()
			h.reset()
			consumerMu.Lock()
			for _, cs := range r.consumers {
				cs.mu.Lock()
				h.merge(&cs.interval)
				cs.interval.reset()
				cs.mu.Unlock()
			}
			consumerMu.Unlock()
			fmt.Fprintf(r.out, "%6.1fs sent %8.0f/s  recv %8.0f/s  conf %8.0f/s  p50 %7.2f ms  p99 %7.2f ms%s\n",
				now.Sub(start).Seconds(), float64(s-lastS)/dt, float64(rc-lastR)/dt, float64(c-lastC)/dt,
				float64(h.percentile(50))/1e6, float64(h.percentile(99))/1e6, r.left(now.Sub(start), s))
			lastS, lastR, lastC, last = s, rc, c, now
		}
	}
}

// left is the progress line's tail: how much of the run is done and the
// time left to the nearer of its publishing bounds (--duration; --count
// messages per producer, at the rate since the start), "" for a run
// without bounds.
func (r *runner) left(elapsed time.Duration, sent int64) string {
	var eta time.Duration = -1
	pct := -1.0
	if d := r.cfg.Duration; d > 0 {
		eta, pct = max(d-elapsed, 0), 100*min(elapsed.Seconds()/d.Seconds(), 1)
	}
	if total := r.cfg.Count * int64(r.cfg.Producers); total > 0 && sent > 0 {
		t := time.Duration(float64(total-min(sent, total)) / (float64(sent) / elapsed.Seconds()) * float64(time.Second))
		if eta < 0 || t < eta {
			eta, pct = t, 100*float64(min(sent, total))/float64(total)
		}
	}
	switch {
	case eta < 0:
		return ""
	case eta == 0:
		return "  100.0%  publishing done, draining"
	}
	return fmt.Sprintf("  %5.1f%%  ETA %s", pct, eta.Round(100*time.Millisecond))
}

// connectionsOnly opens N idle connections, holds them for --duration and
// reports the broker's RSS growth per connection.
func (r *runner) connectionsOnly(ctx context.Context, sum *Summary) {
	cfg := r.cfg
	var rss0 int64 = -1
	if cfg.BrokerPID > 0 {
		if v, err := procRSSKB(cfg.BrokerPID); err == nil {
			rss0 = v
			sum.BrokerRSSStartKB = &v
		}
	}
	bs := startBrokerStats(cfg.BrokerPID)
	start := time.Now()
	conns := make([]*amqp.Connection, cfg.ConnectionsOnly)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(conns) || ctx.Err() != nil {
					return
				}
				c, err := dial(cfg.URL)
				if err != nil {
					r.fail("connection %d: %v", i, err)
					continue
				}
				if _, err := c.Channel(); err != nil {
					r.fail("connection %d: channel: %v", i, err)
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			sum.ConnectionsOpened++
		} else {
			sum.ConnectionsFailed++
		}
	}
	if !cfg.Quiet {
		fmt.Fprintf(r.out, "opened %d connections (%d failed) in %.1fs\n", sum.ConnectionsOpened, sum.ConnectionsFailed, time.Since(start).Seconds())
	}
	hold := time.NewTimer(time.Until(start.Add(cfg.Duration)))
	select {
	case <-hold.C:
	case <-ctx.Done():
	}
	// RSS with the connections open (after they settled for the duration).
	if rss0 >= 0 {
		if v, err := procRSSKB(cfg.BrokerPID); err == nil {
			d := v - rss0
			sum.RSSDeltaKB = &d
			if sum.ConnectionsOpened > 0 {
				per := float64(d) / float64(sum.ConnectionsOpened)
				sum.KBPerConnection = &per
			}
		}
	}
	bs.stop()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	sum.ElapsedS = time.Since(start).Seconds()
	bs.fill(sum)
	r.errMu.Lock()
	sum.Errors = append(sum.Errors, r.errors...)
	r.errMu.Unlock()
	if !cfg.Quiet && sum.KBPerConnection != nil {
		fmt.Fprintf(r.out, "broker RSS +%d KB = %.1f KB per connection\n", *sum.RSSDeltaKB, *sum.KBPerConnection)
	}
}

// brokerStats samples a broker process: CPU at start and stop, peak RSS
// once a second.
type brokerStats struct {
	pid       int
	cpu0, cpu float64
	peak      int64
	rss0      int64
	ok        bool
	done      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
}

func startBrokerStats(pid int) *brokerStats {
	b := &brokerStats{pid: pid, done: make(chan struct{})}
	if pid <= 0 {
		return b
	}
	c, err := procCPUSeconds(pid)
	if err != nil {
		return b
	}
	b.ok, b.cpu0 = true, c
	b.rss0, _ = procRSSKB(pid)
	b.peak = b.rss0
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				b.sample()
			}
		}
	}()
	return b
}

func (b *brokerStats) sample() {
	if v, err := procRSSKB(b.pid); err == nil {
		b.mu.Lock()
		if v > b.peak {
			b.peak = v
		}
		b.mu.Unlock()
	}
}

func (b *brokerStats) stop() {
	if !b.ok {
		return
	}
	b.sample()
	close(b.done)
	b.wg.Wait()
	if c, err := procCPUSeconds(b.pid); err == nil {
		b.cpu = c - b.cpu0
	} else {
		b.ok = false
	}
}

func (b *brokerStats) fill(s *Summary) {
	if !b.ok {
		return
	}
	cpu, peak, rss0 := b.cpu, b.peak, b.rss0
	s.BrokerCPUSeconds = &cpu
	s.BrokerRSSKB = &peak
	if s.BrokerRSSStartKB == nil {
		s.BrokerRSSStartKB = &rss0
	}
}
