package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/warrenmq/warren/internal/buildinfo"
)

// cli holds the global flags and the output streams.
type cli struct {
	url, user, password, vhost, format string
	// quiet and formatter are rabbitmqctl's -q and --formatter
	// (rabbitmqctl.go).
	quiet     bool
	formatter string

	stdin          io.Reader
	stdout, stderr io.Writer
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "warrenctl",
		Short:         "Manage a Warren broker through its management HTTP API",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if c.format != "table" && c.format != "json" {
				return fmt.Errorf("--format must be table or json, not %q", c.format)
			}
			return nil
		},
	}
	root.Version = buildinfo.Read().String("warrenctl")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&c.url, "url", envOr("WARRENCTL_URL", "http://127.0.0.1:15672"), "management API base URL")
	pf.StringVar(&c.user, "user", envOr("WARRENCTL_USER", "guest"), "user name")
	pf.StringVar(&c.password, "password", envOr("WARRENCTL_PASSWORD", "guest"), "password")
	pf.StringVarP(&c.vhost, "vhost", "p", envOr("WARRENCTL_VHOST", "/"), "virtual host")
	pf.StringVar(&c.format, "format", "table", "output format: table or json")
	root.AddCommand(c.listCmd(), c.overviewCmd(), c.declareCmd(), c.deleteCmd(), c.purgeCmd(), c.closeCmd(),
		c.exportCmd(), c.importCmd(), c.publishCmd(), c.getCmd(), c.healthCmd(), c.statusCmd(), c.clusterStatusCmd(), c.forgetClusterNodeCmd(), c.environmentCmd())
	root.AddCommand(c.accessCmds()...)
	root.AddCommand(c.rabbitCmds()...)
	root.AddCommand(c.streamCmds()...)
	root.AddCommand(c.quorumCmds()...)
	pf.BoolVarP(&c.quiet, "quiet", "q", false, "rabbitmqctl commands: no informational lines")
	pf.StringVar(&c.formatter, "formatter", "", "rabbitmqctl commands: table (tab-separated, the default) or json")
	return root
}

func (c *cli) client() *client { return newClient(c.url, c.user, c.password) }

// column is one table column: a header and a JSON field path ("a.b").
type column struct{ header, field string }

// listings maps object kinds to their API path and table columns.
var listings = map[string]struct {
	path    func(vhost string) string
	columns []column
}{
	"queues": {func(v string) string { return path("queues", v) }, []column{
		{"NAME", "name"}, {"DURABLE", "durable"}, {"AUTO_DELETE", "auto_delete"}, {"EXCLUSIVE", "exclusive"},
		{"MESSAGES", "messages"}, {"READY", "messages_ready"}, {"UNACKED", "messages_unacknowledged"}, {"CONSUMERS", "consumers"},
	}},
	"exchanges": {func(v string) string { return path("exchanges", v) }, []column{
		{"NAME", "name"}, {"TYPE", "type"}, {"DURABLE", "durable"}, {"AUTO_DELETE", "auto_delete"}, {"INTERNAL", "internal"},
	}},
	"bindings": {func(v string) string { return path("bindings", v) }, []column{
		{"SOURCE", "source"}, {"DESTINATION", "destination"}, {"DESTINATION_TYPE", "destination_type"},
		{"ROUTING_KEY", "routing_key"}, {"ARGUMENTS", "arguments"},
	}},
	"connections": {func(string) string { return path("connections") }, []column{
		{"NAME", "name"}, {"USER", "user"}, {"VHOST", "vhost"}, {"CHANNELS", "channels"}, {"TIMEOUT", "timeout"},
	}},
	"channels": {func(string) string { return path("channels") }, []column{
		{"NAME", "name"}, {"USER", "user"}, {"CONSUMERS", "consumer_count"}, {"UNACKED", "messages_unacknowledged"},
		{"PREFETCH", "prefetch_count"},
	}},
	"consumers": {func(v string) string { return path("consumers", v) }, []column{
		{"QUEUE", "queue.name"}, {"TAG", "consumer_tag"}, {"CHANNEL", "channel_details.name"},
		{"ACK_REQUIRED", "ack_required"}, {"PREFETCH", "prefetch_count"},
	}},
	"users": {func(string) string { return path("users") }, []column{{"NAME", "name"}, {"TAGS", "tags"}}},
	"policies": {func(v string) string { return path("policies", v) }, []column{
		{"NAME", "name"}, {"PATTERN", "pattern"}, {"APPLY_TO", "apply-to"}, {"PRIORITY", "priority"}, {"DEFINITION", "definition"},
	}},
	"vhosts": {func(string) string { return path("vhosts") }, []column{
		{"NAME", "name"}, {"MESSAGES", "messages"}, {"READY", "messages_ready"}, {"UNACKED", "messages_unacknowledged"},
	}},
}

func (c *cli) listCmd() *cobra.Command {
	kinds := []string{"queues", "exchanges", "bindings", "connections", "channels", "consumers", "users", "vhosts", "policies"}
	return &cobra.Command{
		Use:       "list " + strings.Join(kinds, "|"),
		Short:     "List objects (queues and exchanges, bindings and consumers of --vhost)",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			l := listings[args[0]]
			b, err := c.client().do(http.MethodGet, l.path(c.vhost), nil)
			if err != nil {
				return err
			}
			return c.printList(b, l.columns)
		},
	}
}

// printList prints a JSON array as JSON or as a table of columns.
func (c *cli) printList(b []byte, cols []column) error {
	if c.format == "json" {
		return c.printJSON(b)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	hdr := make([]string, len(cols))
	for i, col := range cols {
		hdr[i] = col.header
	}
	fmt.Fprintln(w, strings.Join(hdr, "\t"))
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, col := range cols {
			cells[i] = cell(lookup(r, col.field))
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

func lookup(m map[string]any, field string) any {
	var v any = m
	for _, part := range strings.Split(field, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[part]
	}
	return v
}

// cell renders a JSON value for a table.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		if v == "" {
			return `""`
		}
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = cell(x)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if len(v) == 0 {
			return ""
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	return fmt.Sprint(v)
}

// printJSON pretty-prints a JSON document.
func (c *cli) printJSON(b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := c.stdout.Write(out.Bytes())
	return err
}

func (c *cli) overviewCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "overview",
		Short: "Show the node and its totals",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			b, err := c.client().do(http.MethodGet, path("overview"), nil)
			if err != nil {
				return err
			}
			if c.format == "json" {
				return c.printJSON(b)
			}
			var o map[string]any
			if err := json.Unmarshal(b, &o); err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			for _, f := range []string{
				"product_name", "product_version", "node", "cluster_name",
				"object_totals.connections", "object_totals.channels", "object_totals.queues",
				"object_totals.exchanges", "object_totals.consumers",
				"queue_totals.messages", "queue_totals.messages_ready", "queue_totals.messages_unacknowledged",
			} {
				fmt.Fprintf(w, "%s\t%s\n", f, cell(lookup(o, f)))
			}
			return w.Flush()
		},
	}
}

// parseArgs turns k=v pairs into an arguments table: integers and booleans
// keep their type, everything else is a string.
func parseArgs(pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want key=value", p)
		}
		out[k] = typed(v)
	}
	return out, nil
}

func typed(v string) any {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		return b
	}
	return v
}

func (c *cli) declareCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "declare", Short: "Declare a queue, an exchange, a binding or a policy"}
	var durable, autoDelete, internal bool
	var args []string
	var kind string
	q := &cobra.Command{
		Use:   "queue NAME",
		Short: "Declare a queue",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			t, err := parseArgs(args)
			if err != nil {
				return err
			}
			_, err = c.client().do(http.MethodPut, path("queues", c.vhost, a[0]),
				map[string]any{"durable": durable, "auto_delete": autoDelete, "arguments": t})
			if err == nil {
				fmt.Fprintf(c.stdout, "queue declared: %s\n", a[0])
			}
			return err
		},
	}
	q.Flags().BoolVar(&durable, "durable", true, "survive a broker restart")
	q.Flags().BoolVar(&autoDelete, "auto-delete", false, "delete when the last consumer leaves")
	q.Flags().StringArrayVar(&args, "arg", nil, "queue argument key=value (repeatable), e.g. x-max-length=1000")
	x := &cobra.Command{
		Use:   "exchange NAME",
		Short: "Declare an exchange",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			t, err := parseArgs(args)
			if err != nil {
				return err
			}
			_, err = c.client().do(http.MethodPut, path("exchanges", c.vhost, a[0]), map[string]any{
				"type": kind, "durable": durable, "auto_delete": autoDelete, "internal": internal, "arguments": t,
			})
			if err == nil {
				fmt.Fprintf(c.stdout, "exchange declared: %s\n", a[0])
			}
			return err
		},
	}
	x.Flags().StringVar(&kind, "type", "direct", "direct, fanout, topic or headers")
	x.Flags().BoolVar(&durable, "durable", true, "survive a broker restart")
	x.Flags().BoolVar(&autoDelete, "auto-delete", false, "delete when the last binding goes")
	x.Flags().BoolVar(&internal, "internal", false, "refuse direct publishes")
	x.Flags().StringArrayVar(&args, "arg", nil, "exchange argument key=value (repeatable)")
	cmd.AddCommand(q, x, c.bindingCmd(true), c.policyCmd())
	return cmd
}

func (c *cli) policyCmd() *cobra.Command {
	var pattern, applyTo, definition string
	var priority int
	cmd := &cobra.Command{
		Use:   "policy NAME --pattern REGEX --definition JSON",
		Short: "Create or replace a policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			var def map[string]any
			if err := json.Unmarshal([]byte(definition), &def); err != nil {
				return fmt.Errorf("--definition: %w", err)
			}
			_, err := c.client().do(http.MethodPut, path("policies", c.vhost, a[0]), map[string]any{
				"pattern": pattern, "definition": def, "apply-to": applyTo, "priority": priority,
			})
			if err == nil {
				fmt.Fprintf(c.stdout, "policy set: %s\n", a[0])
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&pattern, "pattern", "", "regular expression of the names it applies to")
	f.StringVar(&definition, "definition", "", `JSON object, e.g. '{"max-length": 1000}'`)
	f.StringVar(&applyTo, "apply-to", "all", "queues, exchanges or all")
	f.IntVar(&priority, "priority", 0, "the matching policy with the highest priority applies")
	cmd.MarkFlagRequired("pattern")
	cmd.MarkFlagRequired("definition")
	return cmd
}

// bindingCmd is "declare binding" or "delete binding".
func (c *cli) bindingCmd(declare bool) *cobra.Command {
	var source, dest, destType, key string
	var args []string
	short := "Bind an exchange to a queue or exchange"
	if !declare {
		short = "Remove a binding"
	}
	cmd := &cobra.Command{
		Use:   "binding --source EXCHANGE --destination NAME",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			t, err := parseArgs(args)
			if err != nil {
				return err
			}
			d := "q"
			if destType == "exchange" {
				d = "e"
			} else if destType != "queue" {
				return fmt.Errorf("--destination-type must be queue or exchange")
			}
			p := path("bindings", c.vhost, "e", source, d, dest)
			body := map[string]any{"routing_key": key, "arguments": t}
			cl := c.client()
			if declare {
				_, err = cl.do(http.MethodPost, p, body)
			} else {
				_, err = cl.do(http.MethodDelete, p, body)
			}
			if err == nil {
				verb := "binding declared"
				if !declare {
					verb = "binding deleted"
				}
				fmt.Fprintf(c.stdout, "%s: %s -> %s %s (%q)\n", verb, source, destType, dest, key)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&source, "source", "", "source exchange")
	f.StringVar(&dest, "destination", "", "destination queue or exchange")
	f.StringVar(&destType, "destination-type", "queue", "queue or exchange")
	f.StringVar(&key, "routing-key", "", "routing key")
	f.StringArrayVar(&args, "arg", nil, "binding argument key=value (repeatable)")
	cmd.MarkFlagRequired("source")
	cmd.MarkFlagRequired("destination")
	return cmd
}

func (c *cli) deleteCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "delete", Short: "Delete a queue, an exchange, a binding or a policy"}
	var ifUnused, ifEmpty bool
	q := &cobra.Command{
		Use:   "queue NAME",
		Short: "Delete a queue",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			p := path("queues", c.vhost, a[0]) + query(map[string]bool{"if-unused": ifUnused, "if-empty": ifEmpty})
			_, err := c.client().do(http.MethodDelete, p, nil)
			if err == nil {
				fmt.Fprintf(c.stdout, "queue deleted: %s\n", a[0])
			}
			return err
		},
	}
	q.Flags().BoolVar(&ifUnused, "if-unused", false, "only if it has no consumers")
	q.Flags().BoolVar(&ifEmpty, "if-empty", false, "only if it has no ready messages")
	x := &cobra.Command{
		Use:   "exchange NAME",
		Short: "Delete an exchange",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			p := path("exchanges", c.vhost, a[0]) + query(map[string]bool{"if-unused": ifUnused})
			_, err := c.client().do(http.MethodDelete, p, nil)
			if err == nil {
				fmt.Fprintf(c.stdout, "exchange deleted: %s\n", a[0])
			}
			return err
		},
	}
	x.Flags().BoolVar(&ifUnused, "if-unused", false, "only if it is the source of no binding")
	pol := &cobra.Command{
		Use:   "policy NAME",
		Short: "Delete a policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			_, err := c.client().do(http.MethodDelete, path("policies", c.vhost, a[0]), nil)
			if err == nil {
				fmt.Fprintf(c.stdout, "policy deleted: %s\n", a[0])
			}
			return err
		},
	}
	cmd.AddCommand(q, x, c.bindingCmd(false), pol)
	return cmd
}

func query(flags map[string]bool) string {
	var parts []string
	for _, k := range []string{"if-unused", "if-empty"} {
		if flags[k] {
			parts = append(parts, k+"=true")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "?" + strings.Join(parts, "&")
}

func (c *cli) purgeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "purge", Short: "Purge a queue"}
	cmd.AddCommand(&cobra.Command{
		Use:   "queue NAME",
		Short: "Drop a queue's ready messages",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			_, err := c.client().do(http.MethodDelete, path("queues", c.vhost, a[0], "contents"), nil)
			if err == nil {
				fmt.Fprintf(c.stdout, "queue purged: %s\n", a[0])
			}
			return err
		},
	})
	return cmd
}

func (c *cli) closeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "close", Short: "Close a connection"}
	var reason string
	conn := &cobra.Command{
		Use:   "connection NAME",
		Short: "Close a client connection (its name as 'list connections' shows it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			cl := c.client()
			req, err := http.NewRequest(http.MethodDelete, strings.TrimSuffix(cl.base, "/")+path("connections", a[0]), nil)
			if err != nil {
				return err
			}
			req.SetBasicAuth(cl.user, cl.password)
			if reason != "" {
				req.Header.Set("X-Reason", reason)
			}
			resp, err := cl.http.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				e := &apiError{Status: resp.StatusCode}
				json.NewDecoder(resp.Body).Decode(e)
				return e
			}
			fmt.Fprintf(c.stdout, "connection closed: %s\n", a[0])
			return nil
		},
	}
	conn.Flags().StringVar(&reason, "reason", "", "reason sent to the client")
	cmd.AddCommand(conn)
	return cmd
}

func (c *cli) exportCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:     "export [FILE]",
		Aliases: []string{"export_definitions"},
		Short:   "Export definitions as RabbitMQ's definitions JSON (to FILE, or stdout)",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			p := path("definitions")
			if !all {
				p = path("definitions", c.vhost)
			}
			b, err := c.client().do(http.MethodGet, p, nil)
			if err != nil {
				return err
			}
			var out bytes.Buffer
			if err := json.Indent(&out, b, "", "  "); err != nil {
				return err
			}
			out.WriteByte('\n')
			if len(a) == 0 || a[0] == "-" {
				_, err = c.stdout.Write(out.Bytes())
				return err
			}
			if err := os.WriteFile(a[0], out.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "definitions exported to %s\n", a[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", true, "every vhost with users and permissions (false: only --vhost)")
	return cmd
}

func (c *cli) importCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE",
		Aliases: []string{"import_definitions"},
		Short:   "Import a definitions file ('-' for stdin): users, vhosts, permissions, limits, policies, exchanges, queues, bindings",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			var b []byte
			var err error
			if a[0] == "-" {
				b, err = io.ReadAll(c.stdin)
			} else {
				b, err = os.ReadFile(a[0])
			}
			if err != nil {
				return err
			}
			var doc json.RawMessage
			if err := json.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("%s: %w", a[0], err)
			}
			if _, err := c.client().do(http.MethodPost, path("definitions"), doc); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "definitions imported from %s\n", a[0])
			return nil
		},
	}
}

func (c *cli) publishCmd() *cobra.Command {
	var exchange, key, payload, encoding string
	var props, headers []string
	var persistent bool
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish one message (for debugging); reports whether it was routed",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			p, err := parseArgs(props)
			if err != nil {
				return err
			}
			for k, v := range p {
				if k != "delivery_mode" && k != "priority" && k != "timestamp" {
					p[k] = fmt.Sprint(v) // string properties stay strings
				}
			}
			if len(headers) > 0 {
				h, err := parseArgs(headers)
				if err != nil {
					return err
				}
				p["headers"] = h
			}
			if persistent {
				p["delivery_mode"] = 2
			}
			ex := exchange
			if ex == "" {
				ex = "amq.default"
			}
			b, err := c.client().do(http.MethodPost, path("exchanges", c.vhost, ex, "publish"), map[string]any{
				"properties": p, "routing_key": key, "payload": payload, "payload_encoding": encoding,
			})
			if err != nil {
				return err
			}
			if c.format == "json" {
				return c.printJSON(b)
			}
			var res struct {
				Routed bool `json:"routed"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return err
			}
			if res.Routed {
				fmt.Fprintln(c.stdout, "message published and routed")
			} else {
				fmt.Fprintln(c.stdout, "message published but not routed")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&exchange, "exchange", "", "exchange (default: the default exchange)")
	f.StringVar(&key, "routing-key", "", "routing key")
	f.StringVar(&payload, "payload", "", "message body")
	f.StringVar(&encoding, "payload-encoding", "string", "string or base64")
	f.StringArrayVar(&props, "property", nil, "message property key=value, e.g. content_type=text/plain (repeatable)")
	f.StringArrayVar(&headers, "header", nil, "header key=value (repeatable)")
	f.BoolVar(&persistent, "persistent", false, "delivery mode 2")
	return cmd
}

func (c *cli) getCmd() *cobra.Command {
	var count int
	var ackMode, encoding string
	cmd := &cobra.Command{
		Use:   "get QUEUE",
		Short: "Get messages from a queue (for debugging; requeued by default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			b, err := c.client().do(http.MethodPost, path("queues", c.vhost, a[0], "get"), map[string]any{
				"count": count, "ackmode": ackMode, "encoding": encoding,
			})
			if err != nil {
				return err
			}
			return c.printList(b, []column{
				{"ROUTING_KEY", "routing_key"}, {"EXCHANGE", "exchange"}, {"REDELIVERED", "redelivered"},
				{"MESSAGE_COUNT", "message_count"}, {"PAYLOAD", "payload"}, {"PAYLOAD_BYTES", "payload_bytes"},
				{"PROPERTIES", "properties"},
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&count, "count", 1, "how many messages")
	f.StringVar(&ackMode, "ackmode", "ack_requeue_true", "ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false")
	f.StringVar(&encoding, "encoding", "auto", "auto (text when valid UTF-8) or base64")
	return cmd
}
