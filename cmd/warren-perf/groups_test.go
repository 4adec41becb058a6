package main

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

func TestGroupFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--groups", "2"}, // not a stream
		{"--queue-type", "stream", "--prefetch", "10", "--static-groups"}, // no --groups
		{"--queue-type", "stream", "--prefetch", "10", "--groups", "2", "--members", "0"},
		{"--queue-type", "stream", "--prefetch", "10", "--groups", "2", "--members", "3", "--static-groups"}, // 3 members, 1 stream
		{"--partitions", "3"},
		{"--queue-type", "stream", "--prefetch", "10", "--partition-keys", "-1"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	c, err := parseFlags([]string{"--queue-type", "stream", "--prefetch", "10", "--partitions", "6", "--groups", "3", "--members", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Consumers != 6 || c.queueArgs()["x-stream-partitions"] != int64(6) {
		t.Fatalf("consumers %d, queue args %v", c.Consumers, c.queueArgs())
	}
	r := &runner{cfg: c}
	if g := r.consumeArgs(5)["x-stream-group"]; g != "warren-perf-g2" {
		t.Errorf("consumer 5's group = %v, want warren-perf-g2", g)
	}
}

// TestStaticGroups: RabbitMQ's nearest equivalent of groups (a stream per
// partition, each read by one member of each group) against Warren; every
// group gets every message once.
func TestStaticGroups(t *testing.T) {
	url := servertest.Start(t, server.Config{})
	// A lean consumer of several streams subscribes to them all on its
	// one channel, as the other does.
	for _, lean := range []bool{false, true} {
		args := []string{"--queue-type", "stream", "--queues", "4", "--groups", "3", "--members", "2", "--static-groups",
			"--size", "100", "--confirm", "50", "--prefetch", "100", "--multi-ack-every", "10", "--count", "2000", "--duration", "10s"}
		if lean {
			args = append(args, "--lean-consumer")
		}
		s := runAgainst(t, url, args...)
		if s.Received != 6000 || len(s.Groups) != 3 || len(s.Errors) != 0 {
			t.Fatalf("lean %v: received %d, groups %+v, errors %v", lean, s.Received, s.Groups, s.Errors)
		}
		for _, g := range s.Groups {
			if g.Received != 2000 || g.Duplicates != 0 || g.Lost == nil || *g.Lost != 0 || g.OrderViolations != 0 {
				t.Errorf("lean %v: group %+v", lean, g)
			}
		}
	}
}

// TestGroups: two members of a group that both read every
// message (a broker that ignores x-stream-group does that) are counted
// as duplicates, and a partitioned stream's deliveries without
// x-stream-partition as missing headers; on a broker with groups the run
// is clean.
func TestGroups(t *testing.T) {
	url := servertest.Start(t, server.Config{})
	for _, lean := range []string{"", "--lean-consumer"} {
		t.Run("lean="+strconv.FormatBool(lean != ""), func(t *testing.T) { testGroups(t, url, lean) })
	}
}

func testGroups(t *testing.T, url, lean string) {
	args := []string{"--url", url, "--quiet", "--queue-type", "stream", "--partitions", "3", "--partition-keys", "50",
		"--groups", "2", "--members", "2", "--size", "100", "--confirm", "50", "--prefetch", "100", "--count", "1000", "--duration", "10s"}
	if lean != "" {
		args = append(args, lean)
	}
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _ := Run(ctx, cfg, io.Discard)
	if s == nil || len(s.Groups) != 2 || s.Lost == nil || *s.Lost != 0 {
		t.Fatalf("%+v", s)
	}
	if s.StreamOffsetMissing > 0 {
		// No groups and partitions in this broker's streams (yet): each
		// member read the whole stream.
		for _, g := range s.Groups {
			if g.Duplicates == 0 || g.Received <= 1000 {
				t.Errorf("members of %s read everything, yet %+v", g.Name, g)
			}
		}
		t.Skip("no consumer groups in this broker's streams yet")
	}
	for _, g := range s.Groups {
		if g.Received != 1000 || g.Duplicates != 0 || *g.Lost != 0 || g.OrderViolations != 0 {
			t.Errorf("group %+v", g)
		}
	}
	if len(s.Errors) != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
}
