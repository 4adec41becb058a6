// Command failover measures how long a broker cluster stops confirming
// publishes when a node dies (bench/cluster.sh kills it meanwhile): one
// publisher with confirms (internal/jepsen's, which reconnects to the
// next URL after a failure) publishes persistent messages to a queue for
// --duration, and the longest time between two successive confirms is
// the failover time ("resumed": false when the confirms had not come back
// by the end, the gap then running to the end). It prints one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/jepsen"
)

func main() {
	urls := flag.String("urls", "amqp://guest:guest@127.0.0.1:5672/", "comma-separated broker URLs, tried in turn after a failure")
	queue := flag.String("queue", "failover", "queue to publish to")
	queueType := flag.String("queue-type", "", "declare the queue durable with this x-queue-type (empty: do not declare)")
	declareURL := flag.String("declare-url", "", "declare the queue on this broker (its leader or home node; default: the first of --urls)")
	duration := flag.Duration("duration", 20*time.Second, "how long to publish")
	window := flag.Int("confirm", 16, "unconfirmed messages at most")
	declareOnly := flag.Bool("declare-only", false, "declare the queue, wait until every one of --urls knows it, and exit")
	flag.Parse()

	var targets []jepsen.Target
	for _, u := range strings.Split(*urls, ",") {
		targets = append(targets, jepsen.Target{Node: u, Dial: func() (*amqp091.Connection, error) {
			return amqp091.DialConfig(u, amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
		}})
	}
	if *queueType != "" {
		dt := targets[0]
		if *declareURL != "" {
			u := *declareURL
			dt = jepsen.Target{Node: u, Dial: func() (*amqp091.Connection, error) { return amqp091.Dial(u) }}
		}
		if err := declare(dt, *queue, *queueType); err != nil {
			fmt.Fprintln(os.Stderr, "failover: declare:", err)
			os.Exit(1)
		}
	}
	if *declareOnly {
		// A declare-ok on one node does not say that the others have
		// applied it yet: wait until each of them knows the queue.
		for _, t := range targets {
			if err := waitKnown(t, *queue, 30*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "failover:", err)
				os.Exit(1)
			}
		}
		return
	}
	var h jepsen.History
	p := &jepsen.Publisher{Name: "f", Targets: targets, Key: *queue, History: &h, Window: *window, ConfirmWait: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	// The longest gap between confirms, sampled every 5 ms.
	var last, gapFrom, gapTo time.Time
	var gap time.Duration
	confirmed := 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case now := <-tick.C:
			by, _ := h.Counts()
			if n := by[jepsen.Confirmed]; n > confirmed {
				if !last.IsZero() && now.Sub(last) > gap {
					gap, gapFrom, gapTo = now.Sub(last), last, now
				}
				confirmed, last = n, now
			}
		}
	}
	// A run that ends without confirms again: the gap runs to its end.
	resumed := true
	if end := time.Now(); !last.IsZero() && end.Sub(last) > gap {
		gap, gapFrom, gapTo, resumed = end.Sub(last), last, end, false
	}
	by, _ := h.Counts()
	out := map[string]any{"resumed": resumed,
		"confirmed": by[jepsen.Confirmed], "nacked": by[jepsen.Nacked], "unknown": by[jepsen.Unknown] + by[jepsen.Sent],
		"longest_gap_ms": gap.Milliseconds(), "gap_from": gapFrom.Format(time.RFC3339Nano), "gap_to": gapTo.Format(time.RFC3339Nano),
	}
	var events []string
	for _, e := range h.Events() {
		events = append(events, e.At.Format("15:04:05.000")+" "+e.What)
	}
	out["events"] = events
	json.NewEncoder(os.Stdout).Encode(out)
}

func declare(t jepsen.Target, q, typ string) error {
	conn, ch, err := t.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": typ})
	return err
}

func waitKnown(t jepsen.Target, q string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := passive(t, q)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not know queue %s after %v: %w", t.Node, q, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func passive(t jepsen.Target, q string) error {
	conn, ch, err := t.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	return err
}
