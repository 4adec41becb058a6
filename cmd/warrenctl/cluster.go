package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// clusterStatusCmd is rabbitmqctl cluster_status: the cluster's name, its
// nodes and the running ones, as RabbitMQ 3.10 prints them (without its
// bold headings), and Warren's metadata leader, cluster listeners and
// quorum queues (leader, replicas, the replicas whose nodes run), from
// /api/cluster; --formatter json prints that object.
func (c *cli) clusterStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cluster_status",
		Short: "rabbitmqctl cluster_status: the cluster's nodes, which run, the metadata group's leader and the quorum queues' leaders and replicas",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if c.formatter == "json" {
				b, err := c.client().do(http.MethodGet, path("cluster"), nil)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(c.stdout, strings.TrimSpace(string(b)))
				return err
			}
			var st struct {
				ClusterName    string `json:"cluster_name"`
				Node           string `json:"node"`
				MetadataLeader string `json:"metadata_leader"`
				Nodes          []struct {
					Name    string `json:"name"`
					Address string `json:"address"`
					Running bool   `json:"running"`
				} `json:"nodes"`
				QuorumQueues []struct {
					VHost   string   `json:"vhost"`
					Name    string   `json:"name"`
					Leader  string   `json:"leader"`
					Members []string `json:"members"`
					Online  []string `json:"online"`
				} `json:"quorum_queues"`
			}
			if err := c.client().get(path("cluster"), &st); err != nil {
				return err
			}
			w := c.stdout
			if !c.quiet {
				fmt.Fprintf(w, "Cluster status of node %s ...\n", st.Node)
			}
			fmt.Fprintf(w, "Basics\n\nCluster name: %s\n\nDisk Nodes\n\n", st.ClusterName)
			var running []string
			for _, n := range st.Nodes {
				fmt.Fprintln(w, n.Name)
				if n.Running {
					running = append(running, n.Name)
				}
			}
			fmt.Fprint(w, "\nRunning Nodes\n\n")
			writeLines(w, running)
			fmt.Fprint(w, "\nMetadata leader\n\n")
			if st.MetadataLeader == "" {
				fmt.Fprintln(w, "(none)")
			} else {
				fmt.Fprintln(w, st.MetadataLeader)
			}
			fmt.Fprint(w, "\nCluster listeners\n\n")
			var ls []string
			for _, n := range st.Nodes {
				if n.Address != "" {
					ls = append(ls, fmt.Sprintf("Node: %s, address: %s, purpose: inter-node traffic (Raft and forwarded operations)", n.Name, n.Address))
				}
			}
			writeLines(w, ls)
			fmt.Fprint(w, "\nQuorum queues\n\n")
			var qs []string
			for _, q := range st.QuorumQueues {
				qs = append(qs, fmt.Sprintf("Vhost: %s, queue: %s, leader: %s, members: %s, online: %s",
					q.VHost, q.Name, cmp.Or(q.Leader, "(none)"), strings.Join(q.Members, ", "), strings.Join(q.Online, ", ")))
			}
			writeLines(w, qs)
			return nil
		},
	}
}

// forgetClusterNodeCmd is rabbitmqctl forget_cluster_node: the stopped
// node leaves the cluster and the queues homed on it are deleted
// (DELETE /api/cluster/nodes/NODE on the node warrenctl talks to). A
// running node is refused, as RabbitMQ refuses it.
func (c *cli) forgetClusterNodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "forget_cluster_node NODE",
		Short: "rabbitmqctl forget_cluster_node: remove a stopped node from the cluster and delete the queues homed on it",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			if !c.quiet {
				fmt.Fprintf(c.stdout, "Removing node %s from the cluster\n", a[0])
			}
			b, err := c.client().do(http.MethodDelete, path("cluster", "nodes", a[0]), nil)
			if err != nil {
				return err
			}
			var res struct {
				QueuesDeleted int `json:"queues_deleted"`
			}
			if json.Unmarshal(b, &res) == nil && res.QueuesDeleted > 0 && !c.quiet {
				fmt.Fprintf(c.stdout, "Deleted %d queue(s) homed on %s\n", res.QueuesDeleted, a[0])
			}
			return nil
		},
	}
}

func writeLines(w io.Writer, lines []string) {
	if len(lines) == 0 {
		fmt.Fprintln(w, "(none)")
		return
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}
