package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// Users, vhosts, permissions and limits, named as rabbitmqctl names them
// (list_users, add_user, set_permissions -p VHOST ...).

// accessCmds are the rabbitmqctl-style commands.
func (c *cli) accessCmds() []*cobra.Command {
	return []*cobra.Command{
		c.listAt("list_users", "List users", path("users"), []column{{"USER", "name"}, {"TAGS", "tags"}}),
		c.addUserCmd(), c.deleteUserCmd(), c.changePasswordCmd(), c.setUserTagsCmd(),
		c.listAt("list_vhosts", "List virtual hosts", path("vhosts"), []column{
			{"NAME", "name"}, {"DESCRIPTION", "description"}, {"TAGS", "tags"}, {"MESSAGES", "messages"},
		}),
		c.addVHostCmd(), c.deleteVHostCmd(), c.traceCmd("trace_on", true), c.traceCmd("trace_off", false),
		c.listPermissionsCmd(), c.setPermissionsCmd(), c.clearPermissionsCmd(),
		c.listTopicPermissionsCmd(), c.setTopicPermissionsCmd(), c.clearTopicPermissionsCmd(),
		c.listVHostLimitsCmd(), c.setVHostLimitsCmd(), c.clearVHostLimitsCmd(),
		c.listUserPermissionsCmd(),
	}
}

// listAt is a list command over a fixed path.
func (c *cli) listAt(use, short, p string, cols []column) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return c.list(p, cols) },
	}
}

func (c *cli) list(p string, cols []column) error {
	b, err := c.client().do(http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	return c.printList(b, cols)
}

// done prints a confirmation line (nothing with --format json).
func (c *cli) done(format string, args ...any) {
	if c.format == "json" {
		return
	}
	fmt.Fprintf(c.stdout, format+"\n", args...)
}

func (c *cli) addUserCmd() *cobra.Command {
	var tags string
	cmd := &cobra.Command{
		Use: "add_user USER PASSWORD", Short: "Create a user (fails if it exists)", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, a []string) error {
			cl := c.client()
			if _, err := cl.do(http.MethodGet, path("users", a[0]), nil); err == nil {
				return fmt.Errorf("user '%s' already exists", a[0])
			}
			if _, err := cl.do(http.MethodPut, path("users", a[0]), map[string]any{"password": a[1], "tags": tags}); err != nil {
				return err
			}
			c.done("user '%s' added", a[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&tags, "tags", "", "comma-separated tags (administrator, monitoring, policymaker, management)")
	return cmd
}

func (c *cli) deleteUserCmd() *cobra.Command {
	return &cobra.Command{
		Use: "delete_user USER", Short: "Delete a user and its permissions", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			if _, err := c.client().do(http.MethodDelete, path("users", a[0]), nil); err != nil {
				return err
			}
			c.done("user '%s' deleted", a[0])
			return nil
		},
	}
}

// userRecord reads a user as the API shows it.
func (c *cli) userRecord(name string) (map[string]any, error) {
	var u map[string]any
	if err := c.client().get(path("users", name), &u); err != nil {
		return nil, err
	}
	return u, nil
}

func (c *cli) changePasswordCmd() *cobra.Command {
	return &cobra.Command{
		Use: "change_password USER PASSWORD", Short: "Set a user's password (its tags stay)", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, a []string) error {
			u, err := c.userRecord(a[0])
			if err != nil {
				return err
			}
			if _, err := c.client().do(http.MethodPut, path("users", a[0]), map[string]any{"password": a[1], "tags": u["tags"]}); err != nil {
				return err
			}
			c.done("password of '%s' changed", a[0])
			return nil
		},
	}
}

func (c *cli) setUserTagsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "set_user_tags USER [TAG ...]", Short: "Replace a user's tags (its password stays)", Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			u, err := c.userRecord(a[0])
			if err != nil {
				return err
			}
			body := map[string]any{
				"password_hash": u["password_hash"], "hashing_algorithm": u["hashing_algorithm"], "tags": strings.Join(a[1:], ","),
			}
			if _, err := c.client().do(http.MethodPut, path("users", a[0]), body); err != nil {
				return err
			}
			c.done("tags of '%s' set to [%s]", a[0], strings.Join(a[1:], ", "))
			return nil
		},
	}
}

func (c *cli) addVHostCmd() *cobra.Command {
	var desc, tags, dqt string
	cmd := &cobra.Command{
		Use: "add_vhost VHOST", Short: "Create a virtual host (the caller gets full permissions on it)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			body := map[string]any{"description": desc, "tags": tags}
			if dqt != "" {
				body["default_queue_type"] = dqt
			}
			if _, err := c.client().do(http.MethodPut, path("vhosts", a[0]), body); err != nil {
				return err
			}
			c.done("vhost '%s' added", a[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "description")
	cmd.Flags().StringVar(&tags, "tags", "", "comma-separated tags")
	cmd.Flags().StringVar(&dqt, "default-queue-type", "", "default queue type (classic)")
	return cmd
}

// traceCmd turns the firehose of the -p vhost on or off, as rabbitmqctl
// trace_on and trace_off do. The vhost's description, tags and default
// queue type are written back unchanged.
func (c *cli) traceCmd(use string, on bool) *cobra.Command {
	state := map[bool]string{true: "enabled", false: "disabled"}[on]
	return &cobra.Command{
		Use: use, Short: "Turn tracing (the amq.rabbitmq.trace firehose) of the vhost (-p) " + map[bool]string{true: "on", false: "off"}[on], Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			var v map[string]any
			if err := c.client().get(path("vhosts", c.vhost), &v); err != nil {
				return err
			}
			body := map[string]any{"description": v["description"], "tags": v["tags"], "tracing": on}
			if dqt, ok := v["default_queue_type"].(string); ok && dqt != "undefined" {
				body["default_queue_type"] = dqt
			}
			if _, err := c.client().do(http.MethodPut, path("vhosts", c.vhost), body); err != nil {
				return err
			}
			c.done("Trace %s for vhost %s", state, c.vhost)
			return nil
		},
	}
}

func (c *cli) deleteVHostCmd() *cobra.Command {
	return &cobra.Command{
		Use: "delete_vhost VHOST", Short: "Delete a virtual host with everything in it", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			if _, err := c.client().do(http.MethodDelete, path("vhosts", a[0]), nil); err != nil {
				return err
			}
			c.done("vhost '%s' deleted", a[0])
			return nil
		},
	}
}

var permColumns = []column{{"USER", "user"}, {"CONFIGURE", "configure"}, {"WRITE", "write"}, {"READ", "read"}}

func (c *cli) listPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "list_permissions [-p VHOST]", Short: "List the permissions of every user in --vhost", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return c.list(path("vhosts", c.vhost, "permissions"), permColumns)
		},
	}
}

func (c *cli) listUserPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "list_user_permissions USER", Short: "List a user's permissions in every vhost", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			return c.list(path("users", a[0], "permissions"), []column{
				{"VHOST", "vhost"}, {"CONFIGURE", "configure"}, {"WRITE", "write"}, {"READ", "read"},
			})
		},
	}
}

func (c *cli) setPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "set_permissions [-p VHOST] USER CONF WRITE READ", Short: "Set a user's permissions in --vhost", Args: cobra.ExactArgs(4),
		RunE: func(_ *cobra.Command, a []string) error {
			body := map[string]string{"configure": a[1], "write": a[2], "read": a[3]}
			if _, err := c.client().do(http.MethodPut, path("permissions", c.vhost, a[0]), body); err != nil {
				return err
			}
			c.done("permissions of '%s' in vhost '%s' set", a[0], c.vhost)
			return nil
		},
	}
}

func (c *cli) clearPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "clear_permissions [-p VHOST] USER", Short: "Remove a user's permissions in --vhost", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			if _, err := c.client().do(http.MethodDelete, path("permissions", c.vhost, a[0]), nil); err != nil {
				return err
			}
			c.done("permissions of '%s' in vhost '%s' cleared", a[0], c.vhost)
			return nil
		},
	}
}

func (c *cli) listTopicPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "list_topic_permissions [-p VHOST]", Short: "List the topic permissions in --vhost", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return c.list(path("vhosts", c.vhost, "topic-permissions"), []column{
				{"USER", "user"}, {"EXCHANGE", "exchange"}, {"WRITE", "write"}, {"READ", "read"},
			})
		},
	}
}

func (c *cli) setTopicPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "set_topic_permissions [-p VHOST] USER EXCHANGE WRITE READ", Short: "Set a user's topic permissions on an exchange of --vhost",
		Args: cobra.ExactArgs(4),
		RunE: func(_ *cobra.Command, a []string) error {
			body := map[string]string{"exchange": a[1], "write": a[2], "read": a[3]}
			if _, err := c.client().do(http.MethodPut, path("topic-permissions", c.vhost, a[0]), body); err != nil {
				return err
			}
			c.done("topic permissions of '%s' on '%s' in vhost '%s' set", a[0], a[1], c.vhost)
			return nil
		},
	}
}

func (c *cli) clearTopicPermissionsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "clear_topic_permissions [-p VHOST] USER [EXCHANGE]", Short: "Remove a user's topic permissions in --vhost (all, or one exchange's)",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(_ *cobra.Command, a []string) error {
			p := path("topic-permissions", c.vhost, a[0])
			if len(a) == 2 {
				p += "?exchange=" + url.QueryEscape(a[1])
			}
			if _, err := c.client().do(http.MethodDelete, p, nil); err != nil {
				return err
			}
			c.done("topic permissions of '%s' in vhost '%s' cleared", a[0], c.vhost)
			return nil
		},
	}
}

func (c *cli) listVHostLimitsCmd() *cobra.Command {
	var global bool
	cmd := &cobra.Command{
		Use: "list_vhost_limits [-p VHOST] [--global]", Short: "List the limits of --vhost (or of every vhost)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			p := path("vhost-limits", c.vhost)
			if global {
				p = path("vhost-limits")
			}
			return c.list(p, []column{{"VHOST", "vhost"}, {"LIMITS", "value"}})
		},
	}
	cmd.Flags().BoolVar(&global, "global", false, "every vhost")
	return cmd
}

func (c *cli) setVHostLimitsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   `set_vhost_limits [-p VHOST] '{"max-connections": N, "max-queues": N}'`,
		Short: "Set limits of --vhost (a negative value removes one), as rabbitmqctl does",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, a []string) error {
			var limits map[string]json.Number
			dec := json.NewDecoder(strings.NewReader(a[0]))
			dec.UseNumber()
			if err := dec.Decode(&limits); err != nil {
				return fmt.Errorf("limits must be a JSON object of numbers: %w", err)
			}
			cl := c.client()
			for name, v := range limits {
				n, err := v.Int64()
				if err != nil {
					return fmt.Errorf("limit %s: %w", name, err)
				}
				p := path("vhost-limits", c.vhost, name)
				if n < 0 {
					_, err = cl.do(http.MethodDelete, p, nil)
				} else {
					_, err = cl.do(http.MethodPut, p, map[string]int64{"value": n})
				}
				if err != nil {
					return err
				}
			}
			c.done("limits of vhost '%s' set", c.vhost)
			return nil
		},
	}
}

func (c *cli) clearVHostLimitsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "clear_vhost_limits [-p VHOST]", Short: "Remove every limit of --vhost", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			cl := c.client()
			var cur []struct {
				Value map[string]any `json:"value"`
			}
			if err := cl.get(path("vhost-limits", c.vhost), &cur); err != nil {
				return err
			}
			for _, l := range cur {
				for name := range l.Value {
					if _, err := cl.do(http.MethodDelete, path("vhost-limits", c.vhost, name), nil); err != nil {
						return err
					}
				}
			}
			c.done("limits of vhost '%s' cleared", c.vhost)
			return nil
		},
	}
}
