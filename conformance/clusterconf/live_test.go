//go:build clusterconf

package clusterconf

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// target is the cluster the environment names (bench/clusterconf.sh sets
// it): CLUSTERCONF_AMQP and CLUSTERCONF_MGMT (three URLs each, comma
// separated), CLUSTERCONF_NODES (their node names), CLUSTERCONF_CTL (a
// command that, given "kill N" or "start N", kills node N with SIGKILL
// or starts it again, and given "delete_member N QUEUE" removes node N's
// replica of the quorum queue QUEUE of vhost "/"), CLUSTERCONF_TARGET (rabbit or warren), and
// CLUSTERCONF_EXPECT, a record to compare with (RabbitMQ's).
func target(t *testing.T) (*Cluster, map[string][]string, func(clusterCase) string) {
	split := func(k string) [3]string {
		v := strings.Split(os.Getenv(k), ",")
		if len(v) != 3 {
			t.Fatalf("%s: want three comma-separated values, have %q (run bench/clusterconf.sh)", k, os.Getenv(k))
		}
		return [3]string{v[0], v[1], v[2]}
	}
	c := &Cluster{Target: os.Getenv("CLUSTERCONF_TARGET"), AMQP: split("CLUSTERCONF_AMQP"),
		Mgmt: split("CLUSTERCONF_MGMT"), Nodes: split("CLUSTERCONF_NODES")}
	ctl := strings.Fields(os.Getenv("CLUSTERCONF_CTL"))
	run := func(op string, i int, args ...string) error {
		if len(ctl) == 0 {
			return fmt.Errorf("no CLUSTERCONF_CTL")
		}
		cmd := exec.Command(ctl[0], append(append(ctl[1:len(ctl):len(ctl)], op, fmt.Sprint(i+1)), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s %d %s: %v: %s", ctl, op, i+1, strings.Join(args, " "), err, out)
		}
		return nil
	}
	c.Kill = func(i int) error { return run("kill", i) }
	c.Start = func(i int) error { return run("start", i) }
	c.DeleteMember = func(i int, queue string) error { return run("delete_member", i, queue) }
	var expect map[string][]string
	if p := os.Getenv("CLUSTERCONF_EXPECT"); p != "" {
		var err error
		if expect, err = loadRecord(p); err != nil {
			t.Fatal(err)
		}
	}
	return c, expect, func(clusterCase) string { return "" }
}

// expectWarren: the live run compares with RabbitMQ's transcript as it is.
func expectWarren(_ *testing.T, _ string, want []string) []string { return want }
