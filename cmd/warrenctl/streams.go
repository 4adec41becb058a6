package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Streams and their consumer groups, named as rabbitmq-streams names its
// commands, laid out as the rabbitmqctl commands of rabbitmqctl.go (an
// informational line, then a header and tab-separated rows; -q, and
// --formatter json for an array of objects):
//
//	warrenctl stream_status orders
//	warrenctl list_stream_groups orders
//	warrenctl reset_stream_group orders billing --to first
//	warrenctl delete_stream_group orders billing

// streamGroup is a group as /api/stream-groups answers it.
type streamGroup struct {
	Name       string `json:"name"`
	Partitions []struct {
		Partition       int     `json:"partition"`
		Owner           *string `json:"owner"`
		CommittedOffset uint64  `json:"committed_offset"`
		Committed       bool    `json:"committed"`
		Lag             uint64  `json:"lag"`
	} `json:"partitions"`
}

func (c *cli) streamCmds() []*cobra.Command {
	reset := &cobra.Command{
		Use:   "reset_stream_group STREAM GROUP --to first|last|next|OFFSET|TIMESTAMP",
		Short: "set a consumer group's committed offsets (while it has no members); TIMESTAMP is RFC 3339",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, a []string) error {
			to, _ := cmd.Flags().GetString("to")
			offset, err := offsetArg(to)
			if err != nil {
				return err
			}
			c.info("Resetting consumer group '%s' of stream '%s' in vhost '%s' to %s ...", a[1], a[0], c.vhost, to)
			_, err = c.client().do(http.MethodPost, path("stream-groups", c.vhost, a[0], a[1], "reset"), map[string]any{"offset": offset})
			return c.streamError(err, a[0], a[1])
		},
	}
	reset.Flags().String("to", "", "first, last, next, an offset or an RFC 3339 timestamp (required)")
	reset.MarkFlagRequired("to")
	return []*cobra.Command{
		{
			Use: "stream_status STREAM", Short: "a stream's partitions: first and next offset, messages, segments, bytes", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error { return c.streamStatus(a[0]) },
		},
		{
			Use: "list_stream_groups STREAM", Short: "a stream's consumer groups: per partition its owner, committed offset and lag", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error { return c.listStreamGroups(a[0]) },
		},
		reset,
		{
			Use: "delete_stream_group STREAM GROUP", Short: "forget a consumer group and its committed offsets (while it has no members)", Args: cobra.ExactArgs(2),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Deleting consumer group '%s' of stream '%s' in vhost '%s' ...", a[1], a[0], c.vhost)
				_, err := c.client().do(http.MethodDelete, path("stream-groups", c.vhost, a[0], a[1]), nil)
				return c.streamError(err, a[0], a[1])
			},
		},
	}
}

// offsetArg reads --to: a name, a non-negative integer, or a timestamp.
func offsetArg(s string) (any, error) {
	switch s {
	case "first", "last", "next":
		return s, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return s, nil
	}
	return nil, fmt.Errorf("--to must be first, last, next, a non-negative offset or an RFC 3339 timestamp (2026-12-01T10:00:00Z), not %q", s)
}

// streamError words the API's refusals of a stream command.
func (c *cli) streamError(err error, stream, group string) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Status {
	case http.StatusConflict:
		return fmt.Errorf("consumer group '%s' of stream '%s' in vhost '%s' has members: cancel them first", group, stream, c.vhost)
	case http.StatusNotFound:
		if strings.HasSuffix(ae.Reason, "is not a stream") {
			return fmt.Errorf("%s", ae.Reason)
		}
		var q map[string]any
		if qerr := c.client().get(path("queues", c.vhost, stream), &q); qerr != nil {
			return c.notFound(qerr, "stream", stream)
		}
		if group != "" {
			return fmt.Errorf("consumer group '%s' of stream '%s' in vhost '%s' does not exist", group, stream, c.vhost)
		}
	}
	return err
}

// streamRows prints rows as the rabbitmqctl commands do.
func (c *cli) streamRows(info string, cols []string, rows [][]any) error {
	if c.formatter != "" && c.formatter != "table" && c.formatter != "json" {
		return fmt.Errorf("--formatter must be table or json, not %q", c.formatter)
	}
	if c.formatter == "json" {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			o := map[string]any{}
			for i, col := range cols {
				o[col] = r[i]
			}
			out = append(out, o)
		}
		return json.NewEncoder(c.stdout).Encode(out)
	}
	c.info("%s", info)
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, strings.Join(cols, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = fmt.Sprint(v)
			if v == nil {
				cells[i] = ""
			}
		}
		fmt.Fprintln(c.stdout, strings.Join(cells, "\t"))
	}
	return nil
}

func (c *cli) streamStatus(stream string) error {
	var q struct {
		Type       string `json:"type"`
		Partitions []struct {
			Partition   int    `json:"partition"`
			FirstOffset uint64 `json:"first_offset"`
			NextOffset  uint64 `json:"next_offset"`
			Messages    uint64 `json:"messages"`
			Segments    int    `json:"segments"`
			Bytes       int64  `json:"bytes"`
		} `json:"partitions"`
	}
	if err := c.client().get(path("queues", c.vhost, stream), &q); err != nil {
		return c.notFound(err, "stream", stream)
	}
	if q.Type != "stream" {
		return fmt.Errorf("queue '%s' in vhost '%s' is not a stream", stream, c.vhost)
	}
	var rows [][]any
	for _, p := range q.Partitions {
		rows = append(rows, []any{p.Partition, p.FirstOffset, p.NextOffset, p.Messages, p.Segments, p.Bytes})
	}
	return c.streamRows(fmt.Sprintf("Status of stream %s in vhost %s ...", stream, c.vhost),
		[]string{"partition", "first_offset", "next_offset", "messages", "segments", "bytes"}, rows)
}

func (c *cli) listStreamGroups(stream string) error {
	var gs []streamGroup
	if err := c.client().get(path("stream-groups", c.vhost, stream), &gs); err != nil {
		return c.streamError(err, stream, "")
	}
	var rows [][]any
	for _, g := range gs {
		for _, p := range g.Partitions {
			// committed: empty while the group never committed in the
			// partition (its lag counts from where it would start).
			var owner, committed any
			if p.Owner != nil {
				owner = *p.Owner
			}
			if p.Committed {
				committed = p.CommittedOffset
			}
			rows = append(rows, []any{g.Name, p.Partition, owner, committed, p.Lag})
		}
	}
	return c.streamRows(fmt.Sprintf("Listing consumer groups of stream %s in vhost %s ...", stream, c.vhost),
		[]string{"group", "partition", "owner", "committed", "lag"}, rows)
}
