package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// healthCmd runs one of the management API's health checks
// (/api/health/checks/CHECK, default protocol-listener/amqp) and fails
// unless it passes: a container's HEALTHCHECK.
func (c *cli) healthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "health [CHECK]",
		Short: "Run a health check (default protocol-listener/amqp; alarms, port-listener/5672, virtual-hosts...)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			check := "protocol-listener/amqp"
			if len(args) == 1 {
				check = strings.Trim(args[0], "/")
			}
			b, err := c.client().do(http.MethodGet, "/api/health/checks/"+check, nil)
			if err != nil {
				return fmt.Errorf("health check %s: %w", check, err)
			}
			_, err = fmt.Fprintln(c.stdout, strings.TrimSpace(string(b)))
			return err
		},
	}
}
