package clusterproc

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

// randomFaults: faults of every kind the other scenarios inject, one at
// a time, each drawn at random with its node and how long it lasts: kill
// -9 then a restart, SIGSTOP then SIGCONT, a node cut off from both
// others, a partition between two nodes (the third still reaches both),
// a clean stop (SIGTERM) then a restart. Publishers and consumers run on
// every node; while a fault lasts the replicated queues must confirm
// (a majority is always up), and after it every queue must. The draw is
// seeded: the test logs its seed, and WARREN_JEPSEN_SEED=N draws the
// same faults again.
func randomFaults(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("WARREN_JEPSEN_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_JEPSEN_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("faults drawn with seed %d (WARREN_JEPSEN_SEED=%d draws them again)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	r := newRun(t, c, kinds, sc, c.nodes[0])
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	// between draws a duration in [d/2, 3d/2).
	between := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int63n(int64(d))) }
	// A fault: what it is called, how it starts and ends on node v (w
	// is another node), and how long it lasts at most (scale.fault or
	// scale.down).
	type fault struct {
		name      func(v, w *node) string
		cut, mend func(v, w *node)
		hold      time.Duration
	}
	faults := []fault{
		{func(v, _ *node) string { return "kill -9 " + v.name },
			func(v, _ *node) { c.kill(v) }, func(v, _ *node) { c.restart(v) }, sc.down},
		{func(v, _ *node) string { return "SIGSTOP " + v.name },
			func(v, _ *node) { c.pause(v) }, func(v, _ *node) { c.resume(v) }, sc.fault},
		{func(v, _ *node) string { return "cut " + v.name + " off" },
			func(v, _ *node) {
				if err := c.net.Isolate(v.i); err != nil {
					t.Fatal(err)
				}
			}, func(*node, *node) { c.heal() }, sc.fault},
		{func(v, w *node) string { return "partition between " + v.name + " and " + w.name },
			func(v, w *node) { c.partition(v, w) }, func(*node, *node) { c.heal() }, sc.fault},
		{func(v, _ *node) string { return "SIGTERM " + v.name },
			func(v, _ *node) {
				// As an operator's rolling restart: once no quorum queue
				// needs v for its majority.
				waitFor(t, waitTimeout, v.name+" not quorum-critical", func() (bool, string) {
					code, body := c.mgmtCall(v, "GET", "/api/health/checks/node-is-quorum-critical", "")
					return code == 200, fmt.Sprint(code, " ", body)
				})
				c.stopGracefully(v, time.Minute)
			}, func(v, _ *node) { c.restart(v) }, sc.down},
	}
	for round := range 3 * sc.rounds {
		time.Sleep(between(sc.phase))
		v := c.nodes[rng.Intn(len(c.nodes))]
		w := c.others(v)[rng.Intn(len(c.nodes)-1)]
		f := faults[rng.Intn(len(faults))]
		r.fault("round %d: %s", round, f.name(v, w))
		f.cut(v, w)
		r.progressReplicated(20)
		sleepFault(between(f.hold))
		f.mend(v, w)
		r.fault("round %d: mended", round)
		r.progress(50)
	}
	r.finish()
}
