package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// setting is one entry of /api/nodes/{node}/environment.
type setting struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Origin string `json:"origin"`
}

// environmentCmd is rabbitmqctl environment: the node's effective
// configuration, laid out as rabbitmqctl prints an application
// environment (one Erlang term: the application and its {key,value}
// settings, keys in snake case), each value that is not the default
// followed by a comment naming where it came from; --formatter json prints
// {"warren": {key: value}}.
func (c *cli) environmentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "environment",
		Short: "rabbitmqctl environment: the broker's effective configuration and where each value came from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var o map[string]any
			if err := c.client().get(path("overview"), &o); err != nil {
				return err
			}
			node, _ := o["node"].(string)
			var env []setting
			if err := c.client().get(path("nodes", node, "environment"), &env); err != nil {
				return err
			}
			if c.formatter == "json" {
				m := map[string]any{}
				for _, s := range env {
					m[s.Key] = s.Value
				}
				b, err := json.Marshal(map[string]any{"warren": m})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(c.stdout, string(b))
				return err
			}
			writeEnvironment(c.stdout, node, env, c.quiet)
			return nil
		},
	}
}

func writeEnvironment(w io.Writer, node string, env []setting, quiet bool) {
	if !quiet {
		fmt.Fprintf(w, "Application environment of node %s ...\n", node)
	}
	if len(env) == 0 {
		fmt.Fprintln(w, "[{warren,[]}]")
		return
	}
	const head, indent = "[{warren,[", "          "
	for i, s := range env {
		line := indent
		if i == 0 {
			line = head
		}
		line += "{" + s.Key + "," + erlangValue(s.Value) + "}"
		if i < len(env)-1 {
			line += ","
		} else {
			line += "]}]"
		}
		if s.Origin != "" && s.Origin != "default" {
			line += " % " + s.Origin
		}
		fmt.Fprintln(w, line)
	}
}

// erlangValue prints a setting's value as an Erlang term: numbers and
// booleans bare, anything else as a string.
func erlangValue(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	}
	return fmt.Sprint(v)
}
