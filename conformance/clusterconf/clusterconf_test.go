package clusterconf

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("CLUSTERCONF_NODE_DIR"); dir != "" {
		runNode(dir) // a Warren node of the local cluster (local_test.go)
		return
	}
	code := m.Run()
	if p := os.Getenv("CLUSTERCONF_RECORD"); p != "" {
		if err := writeRecord(p); err != nil {
			os.Stderr.WriteString("clusterconf: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestCluster runs every case against the cluster under test (target),
// in order, one at a time (some kill nodes), and compares each
// transcript with RabbitMQ's record when there is one.
func TestCluster(t *testing.T) {
	c, expect, filter := target(t)
	for _, cc := range cases {
		t.Run(cc.name, func(t *testing.T) {
			if reason := filter(cc); reason != "" {
				t.Skip(reason)
			}
			e := newEnv(t, c)
			cc.run(e)
			e.finish(cc.name)
			if expect == nil || t.Failed() {
				return
			}
			want, ok := expect[cc.name]
			if !ok {
				t.Fatalf("no record of RabbitMQ for %s", cc.name)
			}
			compare(t, expectWarren(t, cc.name, want), e.lines)
		})
	}
}
