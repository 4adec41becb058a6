package main

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Partitioned streams and consumer groups (issue 13, sections 2 and 3):
//
//   - --partitions N declares the stream with x-stream-partitions N;
//   - --partition-keys K sends each message with an x-stream-partition-key
//     header, k0 .. k(K-1) in turn (0: none, the broker's round robin);
//   - --groups G --members M runs G*M consumers: consumer i is member i%M of
//     group i/M, consuming with x-stream-group "<prefix>-g<i/M>". Each group
//     is one reader: every confirmed message must reach one of its members
//     (lost counts those that reached none), a message two members got is
//     a duplicate, and each member's x-stream-offset must rise within each
//     partition (x-stream-partition).
//   - --static-groups is the same topology for a broker without groups
//     (RabbitMQ): no x-stream-group, one stream per partition (--queues),
//     member m of each group consuming the streams q with q%M == m, so each
//     stream has one reader per group.

// GroupSummary is one group's report.
type GroupSummary struct {
	Name       string `json:"name"`
	Members    int    `json:"members"`
	Received   int64  `json:"received"`
	Duplicates int64  `json:"duplicates"`
	Lost       *int64 `json:"lost,omitempty"`
	// OrderViolations counts deliveries whose x-stream-offset did not rise
	// within their partition, for the member that got them.
	OrderViolations int64 `json:"order_violations"`
}

func (c *Config) validateGroups() error {
	if c.Partitions < 0 || c.PartitionKeys < 0 || c.Groups < 0 || c.Members < 1 {
		return errors.New("negative --partitions, --partition-keys or --groups, or --members < 1")
	}
	if (c.Partitions > 0 || c.PartitionKeys > 0 || c.Groups > 0) && c.QueueType != "stream" {
		return errors.New("--partitions, --partition-keys and --groups need --queue-type stream")
	}
	if c.StaticGroups && c.Groups == 0 {
		return errors.New("--static-groups needs --groups")
	}
	if c.Groups > 0 {
		if c.Groups*c.Members > 1<<14 {
			return errors.New("too many group members")
		}
		if c.StaticGroups && c.Queues < c.Members {
			return fmt.Errorf("--static-groups: %d members need at least as many streams (--queues)", c.Members)
		}
		c.Consumers = c.Groups * c.Members
	}
	if c.ConsumeFor < 0 {
		return errors.New("negative --consume-for")
	}
	return nil
}

// groupOf is consumer i's group.
func (r *runner) groupOf(i int) int { return i / r.cfg.Members }

// groupName is group g's x-stream-group.
func (r *runner) groupName(g int) string { return fmt.Sprintf("%s-g%d", r.cfg.QueuePrefix, g) }

// memberQueues is the queues member i consumes: all of them, or with
// --static-groups its share.
func (r *runner) memberQueues(i int) []int {
	var qs []int
	m := i % r.cfg.Members
	for q := 0; q < r.cfg.Queues; q++ {
		if !r.cfg.StaticGroups || q%r.cfg.Members == m {
			qs = append(qs, q)
		}
	}
	return qs
}

// consumeArgs is consumer i's basic.consume arguments: --consume-arg, and
// its group's x-stream-group.
func (r *runner) consumeArgs(i int) amqp.Table {
	t := r.cfg.ConsumeArgs.table()
	if r.cfg.Groups > 0 && !r.cfg.StaticGroups {
		if t == nil {
			t = amqp.Table{}
		}
		t["x-stream-group"] = r.groupName(r.groupOf(i))
	}
	return t
}

// interleaved: a reader gets one producer's messages from several
// partitions (or several members share a partition over time), so their
// producer sequence numbers need not rise; order is checked by offset per
// partition instead.
func (r *runner) interleaved() bool {
	return r.cfg.Partitions > 1 || (r.cfg.Groups > 0 && !r.cfg.StaticGroups && r.cfg.Members > 1)
}

// keyHeaders is the header tables producer ps cycles over with
// --partition-keys (nil without): k<j> in turn, merged with the route's
// headers.
func (r *runner) keyHeaders(ps *producerState) []amqp.Table {
	if r.cfg.PartitionKeys == 0 {
		return nil
	}
	out := make([]amqp.Table, r.cfg.PartitionKeys)
	for j := range out {
		t := amqp.Table{}
		for k, v := range ps.routes[0].headers {
			t[k] = v
		}
		t["x-stream-partition-key"] = fmt.Sprintf("k%d", j)
		out[j] = t
	}
	return out
}

// groupSummaries reports each group from its members' trackers (which it
// leaves as they are), without the losses (Run counts those).
func (r *runner) groupSummaries() []GroupSummary {
	gs := make([]GroupSummary, r.cfg.Groups)
	for g := range gs {
		gs[g].Name, gs[g].Members = r.groupName(g), r.cfg.Members
		if r.cfg.StaticGroups {
			gs[g].Name = fmt.Sprintf("static-%d", g)
		}
	}
	union := map[uint64]*bitset{}
	for i, cs := range r.consumers {
		g := r.groupOf(i)
		gs[g].OrderViolations += cs.offsetRegressed
		for k, t := range cs.trackers {
			gs[g].Duplicates += t.duplicates
			gs[g].Received += int64(t.count)
			u := union[k]
			if u == nil {
				u = &bitset{}
				union[k] = u
			}
			gs[g].Duplicates += u.orCount(&t.seen)
		}
	}
	return gs
}
