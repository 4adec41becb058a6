package clusterproc

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Scenarios that take every node down: all at once (a power loss of the
// whole cluster), or one after the other (an operator's rolling
// upgrade).

// killAll sends SIGKILL to every running node before it waits for any of
// them to exit: the nodes die within a moment of each other.
func (c *procCluster) killAll() {
	for _, nd := range c.nodes {
		if nd.cmd != nil {
			nd.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, nd := range c.nodes {
		c.kill(nd)
	}
}

// restartAll starts every node from its data and waits until each is
// ready. The nodes start together: a node's start waits until it has
// applied the metadata log up to its start, which takes a quorum of
// them, so restarting one at a time (restart) would wait in vain.
func (c *procCluster) restartAll() {
	c.t.Helper()
	for _, nd := range c.nodes {
		c.spawn(nd)
	}
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Go(func() { c.waitReady(nd) })
	}
	wg.Wait()
	if c.t.Failed() {
		c.t.FailNow()
	}
}

// killAll: kill -9 every node at once during confirmed publishing, with
// publishers and consumers on every node; after sc.down, start them all
// again from their data. The clients reconnect (jepsen's targets, each
// node in turn), and every message confirmed before the power loss is
// delivered: a classic queue's from its home's disk, a quorum queue's
// from its replicas' logs.
func killAll(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	r := newRun(t, c, kinds, sc, c.nodes[0])
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 every node", round)
		c.killAll()
		r.fault("round %d: every node is down", round)
		sleepFault(sc.down)
		start := time.Now()
		c.restartAll()
		r.fault("round %d: every node restarted, ready after %v", round, time.Since(start).Round(time.Millisecond))
		r.progress(50)
	}
	r.finish()
}

// rollingRestart: each node in turn is stopped cleanly (SIGTERM), started
// again and waited on until it serves, under confirmed publishing and
// consuming on every node, as an operator upgrades a cluster. Before
// each stop, the operator's check: the node is not quorum-critical (its
// quorum queues keep a majority without it). While a node is down the
// queues with replicas elsewhere serve; a classic queue whose home is
// down waits for it.
func rollingRestart(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	home := c.nodes[0]
	r := newRun(t, c, kinds, sc, home)
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		for _, nd := range c.nodes {
			time.Sleep(sc.phase)
			waitFor(t, waitTimeout, nd.name+" not quorum-critical", func() (bool, string) {
				code, body := c.mgmtCall(nd, "GET", "/api/health/checks/node-is-quorum-critical", "")
				return code == 200, fmt.Sprint(code, " ", body)
			})
			r.fault("round %d: SIGTERM %s", round, nd.name)
			took := c.stopGracefully(nd, stopTimeout)
			r.fault("round %d: %s stopped after %v", round, nd.name, took.Round(time.Millisecond))
			if nd == home {
				r.progressReplicated(50)
			} else {
				r.progress(50)
			}
			r.fault("round %d: confirms again without %s", round, nd.name)
			start := time.Now()
			c.restart(nd)
			r.fault("round %d: %s restarted, ready after %v", round, nd.name, time.Since(start).Round(time.Millisecond))
			r.progress(50)
		}
	}
	r.finish()
}
