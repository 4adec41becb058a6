package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// rabbitmqctl's command names, column lists and output layout, so that
// scripts written for rabbitmqctl run against Warren with warrenctl:
//
//	warrenctl list_queues -p / name messages consumers
//
// prints RabbitMQ 3.10's informational line ("Listing queues for vhost /
// ..."), then, when there are rows, a header of the column names and the
// rows, tab-separated; -q drops the informational lines, --formatter json
// prints a JSON array of objects with the columns asked for.

// rabbitList is one list_* command: its API path, the informational line,
// the default columns and, for the columns named differently from the
// API's JSON fields, the field (a dotted path) or a constant.
type rabbitList struct {
	path     func(vhost string) string
	info     func(vhost string) string
	defaults []string
	fields   map[string]string
	consts   map[string]string
	perVHost bool
}

var rabbitLists = map[string]rabbitList{
	"list_queues": {
		path:     func(v string) string { return path("queues", v) },
		info:     func(v string) string { return "Timeout: 60.0 seconds ...\nListing queues for vhost " + v + " ..." },
		defaults: []string{"name", "messages"},
		perVHost: true,
	},
	"list_exchanges": {
		path:     func(v string) string { return path("exchanges", v) },
		info:     func(v string) string { return "Listing exchanges for vhost " + v + " ..." },
		defaults: []string{"name", "type"},
		perVHost: true,
	},
	"list_bindings": {
		path:     func(v string) string { return path("bindings", v) },
		info:     func(v string) string { return "Listing bindings for vhost " + v + "..." },
		defaults: []string{"source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"},
		fields:   map[string]string{"source_name": "source", "destination_name": "destination", "destination_kind": "destination_type"},
		consts:   map[string]string{"source_kind": "exchange"},
		perVHost: true,
	},
	"list_connections": {
		path:     func(string) string { return path("connections") },
		info:     func(string) string { return "Listing connections ..." },
		defaults: []string{"user", "peer_host", "peer_port", "state"},
		fields:   map[string]string{"pid": "name"},
	},
	"list_channels": {
		path:     func(string) string { return path("channels") },
		info:     func(string) string { return "Listing channels ..." },
		defaults: []string{"pid", "user", "consumer_count", "messages_unacknowledged"},
		fields:   map[string]string{"pid": "name", "connection": "connection_details.name"},
	},
	"list_consumers": {
		path:     func(v string) string { return path("consumers", v) },
		info:     func(v string) string { return "Listing consumers in vhost " + v + " ..." },
		defaults: []string{"queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments"},
		fields:   map[string]string{"queue_name": "queue.name", "channel_pid": "channel_details.name"},
		perVHost: true,
	},
	"list_policies": {
		path:     func(v string) string { return path("policies", v) },
		info:     func(v string) string { return "Listing policies for vhost \"" + v + "\" ..." },
		defaults: []string{"vhost", "name", "pattern", "apply-to", "definition", "priority"},
		perVHost: true,
	},
}

// rabbitCmds are the rabbitmqctl-named commands.
func (c *cli) rabbitCmds() []*cobra.Command {
	var cmds []*cobra.Command
	names := make([]string, 0, len(rabbitLists))
	for n := range rabbitLists {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		l := rabbitLists[name]
		cmds = append(cmds, &cobra.Command{
			Use:   name + " [COLUMN...]",
			Short: "rabbitmqctl " + name + ": default columns " + strings.Join(l.defaults, " "),
			RunE: func(_ *cobra.Command, cols []string) error {
				if len(cols) == 0 {
					cols = l.defaults
				}
				return c.rabbitList(l, cols)
			},
		})
	}
	cmds = append(cmds,
		&cobra.Command{
			Use: "purge_queue QUEUE", Short: "rabbitmqctl purge_queue", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Purging queue '%s' in vhost '%s' ...", a[0], c.vhost)
				_, err := c.client().do(http.MethodDelete, path("queues", c.vhost, a[0], "contents"), nil)
				return c.notFound(err, "queue", a[0])
			},
		},
		&cobra.Command{
			Use: "delete_queue QUEUE", Short: "rabbitmqctl delete_queue (--if-empty, --if-unused)", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				c.info("Deleting queue '%s' on vhost '%s' ...", a[0], c.vhost)
				flags := map[string]bool{}
				for _, f := range []string{"if-empty", "if-unused"} {
					flags[f], _ = cmd.Flags().GetBool(f)
				}
				_, err := c.client().do(http.MethodDelete, path("queues", c.vhost, a[0])+query(flags), nil)
				return c.notFound(err, "queue", a[0])
			},
		},
		&cobra.Command{
			Use: "close_connection NAME [REASON]", Short: "rabbitmqctl close_connection", Args: cobra.RangeArgs(1, 2),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Closing connection %s, reason: %s...", a[0], strings.Join(a[1:], " "))
				_, err := c.client().do(http.MethodDelete, path("connections", a[0]), nil)
				return c.notFound(err, "connection", a[0])
			},
		},
		&cobra.Command{
			Use: "set_policy NAME PATTERN DEFINITION", Short: "rabbitmqctl set_policy (--priority, --apply-to)", Args: cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, a []string) error {
				var def map[string]any
				if err := json.Unmarshal([]byte(a[2]), &def); err != nil {
					return fmt.Errorf("policy definition %q is not a JSON object: %v", a[2], err)
				}
				prio, _ := cmd.Flags().GetInt("priority")
				applyTo, _ := cmd.Flags().GetString("apply-to")
				c.info("Setting policy %q for pattern %q to %q with priority %q for vhost %q ...", a[0], a[1], a[2], strconv.Itoa(prio), c.vhost)
				_, err := c.client().do(http.MethodPut, path("policies", c.vhost, a[0]), map[string]any{
					"pattern": a[1], "definition": def, "priority": prio, "apply-to": applyTo,
				})
				return c.notFound(err, "policy", a[0])
			},
		},
		&cobra.Command{
			Use: "clear_policy NAME", Short: "rabbitmqctl clear_policy", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Clearing policy %q on vhost %q ...", a[0], c.vhost)
				_, err := c.client().do(http.MethodDelete, path("policies", c.vhost, a[0]), nil)
				return c.notFound(err, "policy", a[0])
			},
		},
	)
	for _, cmd := range cmds {
		switch {
		case strings.HasPrefix(cmd.Use, "delete_queue"):
			cmd.Flags().Bool("if-empty", false, "only if the queue is empty")
			cmd.Flags().Bool("if-unused", false, "only if the queue has no consumers")
		case strings.HasPrefix(cmd.Use, "set_policy"):
			cmd.Flags().Int("priority", 0, "policy priority")
			cmd.Flags().String("apply-to", "all", "queues, exchanges or all")
		}
	}
	return cmds
}

// info prints an informational line unless -q.
func (c *cli) info(format string, a ...any) {
	if !c.quiet && c.formatter != "json" {
		fmt.Fprintf(c.stdout, format+"\n", a...)
	}
}

// notFound names what is missing in a 404: the vhost when it does not
// exist, else the object.
func (c *cli) notFound(err error, kind, name string) error {
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return err
	}
	if _, verr := c.client().do(http.MethodGet, path("vhosts", c.vhost), nil); verr != nil {
		var ve *apiError
		if errors.As(verr, &ve) && ve.Status == http.StatusNotFound {
			return fmt.Errorf("vhost '%s' does not exist", c.vhost)
		}
	}
	if kind == "connection" {
		return fmt.Errorf("connection '%s' does not exist", name)
	}
	return fmt.Errorf("%s '%s' in vhost '%s' does not exist", kind, name, c.vhost)
}

func (c *cli) rabbitList(l rabbitList, cols []string) error {
	if c.formatter != "" && c.formatter != "table" && c.formatter != "json" {
		return fmt.Errorf("--formatter must be table or json, not %q", c.formatter)
	}
	b, err := c.client().do(http.MethodGet, l.path(c.vhost), nil)
	if err != nil {
		var ae *apiError
		if l.perVHost && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return fmt.Errorf("vhost '%s' does not exist", c.vhost)
		}
		return err
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		return err
	}
	value := func(r map[string]any, col string) any {
		if v, ok := l.consts[col]; ok {
			return v
		}
		f := col
		if m, ok := l.fields[col]; ok {
			f = m
		}
		return lookup(r, f)
	}
	if c.formatter == "json" {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			o := map[string]any{}
			for _, col := range cols {
				o[col] = value(r, col)
			}
			out = append(out, o)
		}
		enc := json.NewEncoder(c.stdout)
		return enc.Encode(out)
	}
	c.info("%s", l.info(c.vhost))
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, strings.Join(cols, "\t"))
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, col := range cols {
			v := value(r, col)
			if m, ok := v.(map[string]any); ok && col == "definition" {
				b, _ := json.Marshal(m) // a policy's definition is shown as JSON
				cells[i] = string(b)
			} else {
				cells[i] = erlangCell(v)
			}
		}
		fmt.Fprintln(c.stdout, strings.Join(cells, "\t"))
	}
	return nil
}

// erlangCell renders a value as rabbitmqctl's table does: strings bare,
// empty tables and lists as [], a table as [{"k",v}].
func erlangCell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = erlangCell(x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			val := erlangCell(v[k])
			if s, ok := v[k].(string); ok {
				val = strconv.Quote(s)
			}
			parts[i] = "{" + strconv.Quote(k) + "," + val + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v)
}
