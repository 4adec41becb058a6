package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// statusCmd is rabbitmqctl status: the node's sections as RabbitMQ 3.10
// prints them (without its bold headings), from /api/overview and
// /api/nodes/NODE; --formatter json prints the node object.
func (c *cli) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "rabbitmqctl status: runtime, data directory, alarms, memory, descriptors, disk, totals, listeners",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var o map[string]any
			if err := c.client().get(path("overview"), &o); err != nil {
				return err
			}
			node, _ := o["node"].(string)
			if c.formatter == "json" {
				b, err := c.client().do(http.MethodGet, path("nodes", node), nil)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(c.stdout, strings.TrimSpace(string(b)))
				return err
			}
			var n map[string]any
			if err := c.client().get(path("nodes", node), &n); err != nil {
				return err
			}
			writeStatus(c.stdout, o, n, c.quiet)
			return nil
		},
	}
}

func writeStatus(w io.Writer, o, n map[string]any, quiet bool) {
	num := func(v any) float64 { f, _ := v.(float64); return f }
	gb := func(v any) string { return fmt.Sprintf("%.4g gb", num(v)/1e9) }
	if !quiet {
		fmt.Fprintf(w, "Status of node %s ...\n", cell(o["node"]))
	}
	fmt.Fprint(w, "Runtime\n\n")
	fmt.Fprintf(w, "OS PID: %s\n", cell(n["os_pid"]))
	fmt.Fprintf(w, "Uptime (seconds): %d\n", int64(num(n["uptime"]))/1000)
	if name := cell(o["product_name"]); name != "RabbitMQ" {
		fmt.Fprintf(w, "%s version: %s\n", name, cell(o["product_version"]))
	}
	fmt.Fprintf(w, "RabbitMQ version: %s\n", cell(o["rabbitmq_version"]))
	fmt.Fprintf(w, "Node name: %s\n", cell(o["node"]))
	fmt.Fprint(w, "\nData directory\n\n")
	fmt.Fprintf(w, "Node data directory: %s\n", cell(n["db_dir"]))
	fmt.Fprint(w, "\nAlarms\n\n")
	var alarms []string
	if n["mem_alarm"] == true {
		alarms = append(alarms, "Memory alarm on node "+cell(o["node"]))
	}
	if n["disk_free_alarm"] == true {
		alarms = append(alarms, "Free disk space alarm on node "+cell(o["node"]))
	}
	if len(alarms) == 0 {
		alarms = []string{"(none)"}
	}
	fmt.Fprintln(w, strings.Join(alarms, "\n"))
	fmt.Fprint(w, "\nMemory\n\n")
	fmt.Fprintf(w, "Total memory used: %s\n", gb(n["mem_used"]))
	fmt.Fprintf(w, "Memory high watermark setting: computed to: %s\n", gb(n["mem_limit"]))
	fmt.Fprint(w, "\nFile Descriptors\n\n")
	fmt.Fprintf(w, "Total: %d, limit: %d\n", int64(num(n["fd_used"])), int64(num(n["fd_total"])))
	fmt.Fprint(w, "\nFree Disk Space\n\n")
	fmt.Fprintf(w, "Low free disk space watermark: %s\n", gb(n["disk_free_limit"]))
	fmt.Fprintf(w, "Free disk space: %s\n", gb(n["disk_free"]))
	fmt.Fprint(w, "\nTotals\n\n")
	fmt.Fprintf(w, "Connection count: %s\n", cell(lookup(o, "object_totals.connections")))
	fmt.Fprintf(w, "Queue count: %s\n", cell(lookup(o, "object_totals.queues")))
	if vh, ok := n["vhost_count"]; ok {
		fmt.Fprintf(w, "Virtual host count: %s\n", cell(vh))
	}
	fmt.Fprint(w, "\nListeners\n\n")
	ls, _ := o["listeners"].([]any)
	for _, l := range ls {
		m, _ := l.(map[string]any)
		fmt.Fprintf(w, "Interface: %s, port: %s, protocol: %s\n", cell(m["ip_address"]), cell(m["port"]), cell(m["protocol"]))
	}
}
