package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// Quorum queue membership, named as rabbitmq-queues names its commands:
//
//	warrenctl add_member orders w4
//	warrenctl delete_member orders w2
//	warrenctl grow w4 all --vhost-pattern '.*' --queue-pattern '.*'
//	warrenctl shrink w2
//
// Errors are rabbitmq-queues' words (node_not_running, not_found,
// "Cannot add members to a classic queue").
func (c *cli) quorumCmds() []*cobra.Command {
	grow := &cobra.Command{
		Use:   "grow NODE all|even",
		Short: "add a replica on NODE to every matching quorum queue without one (even: only those with an even number of replicas)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if a[1] != "all" && a[1] != "even" {
				return fmt.Errorf("the strategy must be all or even, not %q", a[1])
			}
			vp, _ := cmd.Flags().GetString("vhost-pattern")
			qp, _ := cmd.Flags().GetString("queue-pattern")
			c.info("Growing %s quorum queues on %s...", a[1], a[0])
			out, err := c.client().do(http.MethodPost, path("quorum-queues", "grow"),
				map[string]any{"node": a[0], "strategy": a[1], "vhost_pattern": vp, "queue_pattern": qp})
			if err != nil {
				return c.quorumError(err)
			}
			return c.memberChanges(out)
		},
	}
	grow.Flags().String("vhost-pattern", ".*", "regular expression of the vhosts")
	grow.Flags().String("queue-pattern", ".*", "regular expression of the queues")
	return []*cobra.Command{
		{
			Use: "add_member QUEUE NODE", Short: "add a replica of a quorum queue on NODE", Args: cobra.ExactArgs(2),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Adding a replica for queue %s on node %s...", a[0], a[1])
				_, err := c.client().do(http.MethodPost, path("quorum-queues", c.vhost, a[0], "members"), map[string]any{"node": a[1]})
				return c.quorumError(err)
			},
		},
		{
			Use: "delete_member QUEUE NODE", Short: "remove NODE's replica of a quorum queue", Args: cobra.ExactArgs(2),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Removing a replica of queue %s on node %s...", a[0], a[1])
				_, err := c.client().do(http.MethodDelete, path("quorum-queues", c.vhost, a[0], "members", a[1]), nil)
				return c.quorumError(err)
			},
		},
		grow,
		{
			Use: "shrink NODE", Short: "remove NODE's replica from every quorum queue that has one (never a queue's last)", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, a []string) error {
				c.info("Shrinking quorum queues on %s...", a[0])
				out, err := c.client().do(http.MethodPost, path("quorum-queues", "shrink"), map[string]any{"node": a[0]})
				if err != nil {
					return c.quorumError(err)
				}
				return c.memberChanges(out)
			},
		},
	}
}

// quorumError prints the API's refusal as rabbitmq-queues does.
func (c *cli) quorumError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.Reason != "" {
		return errors.New(ae.Reason)
	}
	return err
}

// memberChanges prints grow's and shrink's per-queue results.
func (c *cli) memberChanges(body []byte) error {
	var cs []struct {
		VHost  string `json:"vhost"`
		Name   string `json:"name"`
		Size   int    `json:"size"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal(body, &cs); err != nil {
		return err
	}
	rows := make([][]any, 0, len(cs))
	for _, x := range cs {
		rows = append(rows, []any{x.VHost, x.Name, x.Size, x.Result})
	}
	return c.streamRows("", []string{"vhost", "name", "size", "result"}, rows)
}
