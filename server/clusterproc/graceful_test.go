package clusterproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// stopTimeout bounds a node's clean stop (stopGracefully).
const stopTimeout = 30 * time.Second

// TestQuorumGracefulLeaderStop stops a quorum queue's leader cleanly
// (SIGTERM: its connections are closed, its queues and cluster stopped,
// its store closed) right after 200 persistent messages published
// through a follower were confirmed: the node hands its leadership over
// and exits within stopTimeout, another replica leads, a consumer on the
// third node gets every confirmed message (none lost, none twice unless
// marked redelivered), and the stopped node comes back as a member the
// queue works through.
func TestQuorumGracefulLeaderStop(t *testing.T) {
	c := newCluster(t, 3)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	t.Cleanup(func() { c.logEvents(t) })
	const q = "qgrace"

	// Declared on n1, which leads it (x-queue-leader-locator client-local).
	if _, err := c.channel(n1).QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*node{n2, n3} {
		waitFor(t, waitTimeout, q+" visible on "+nd.name, func() (bool, string) {
			_, err := c.passive(nd, q)
			return err == nil, errString(err)
		})
	}
	var leader string
	waitFor(t, waitTimeout, q+"'s leader known on n2", func() (bool, string) {
		leader = c.queueLeader(n2, q)
		return leader != "", "no leader"
	})
	if leader != n1.name {
		t.Fatalf("%s is led by %s, want n1, the declaring node", q, leader)
	}

	// 200 persistent messages through n2, every one confirmed.
	msgs := bodies("g", 200)
	acked, nacked := publishConfirmed(t, c.channel(n2), q, msgs)
	if len(nacked) > 0 || len(acked) != len(msgs) {
		t.Fatalf("through n2: acked %d nacked %d of %d", len(acked), len(nacked), len(msgs))
	}

	// The leader stops cleanly, at once.
	took := c.stopGracefully(n1, stopTimeout)
	t.Logf("n1 exited %v after SIGTERM", took.Round(time.Millisecond))
	log, _ := os.ReadFile(filepath.Join(n1.dir, "broker.log"))
	if !bytes.Contains(log, []byte(`"store closed"`)) {
		t.Errorf("n1's log has no \"store closed\": its shutdown did not finish")
	}
	// It handed its leadership over before its links closed.
	if !bytes.Contains(log, []byte(`"led":1,"handed_over":1`)) {
		t.Errorf("n1's log does not say it handed over the leadership of %s", q)
	}
	waitFor(t, waitTimeout, "a new leader of "+q+" on n2", func() (bool, string) {
		l := c.queueLeader(n2, q)
		return l == n2.name || l == n3.name, fmt.Sprintf("leader %q", l)
	})

	// Every confirmed message is delivered on n3.
	start := time.Now()
	got, dups, notRedelivered, unexpected := consumeConfirmed(t, c, n3, q, acked)
	t.Logf("n3 consumed %d of %d confirmed in %v; %d delivered twice (%d of them not marked redelivered)",
		len(got), len(acked), time.Since(start).Round(time.Millisecond), dups, notRedelivered)
	var lost []string
	for _, m := range acked {
		if got[m] == 0 {
			lost = append(lost, m)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d confirmed messages lost after n1's clean stop: %v", len(lost), len(acked), lost)
	}
	if len(unexpected) > 0 {
		t.Errorf("delivered but never published: %v", unexpected)
	}
	if notRedelivered > 0 {
		t.Errorf("%d messages delivered again without the redelivered flag", notRedelivered)
	}
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, waitTimeout, q+" empty on n3", func() (bool, string) {
		qq, err := c.passive(n3, q)
		return err == nil && qq.Messages == 0, fmt.Sprintf("%d %s", qq.Messages, errString(err))
	})

	// n1 comes back, its replica running again, and the queue works
	// through it.
	c.restart(n1)
	waitFor(t, waitTimeout, "n2 not quorum-critical with n1's replica back", func() (bool, string) {
		code, body := c.mgmtCall(n2, "GET", "/api/health/checks/node-is-quorum-critical", "")
		return code == 200, fmt.Sprint(code, body)
	})
	if m := c.queueMembers(n1, q); !slices.Contains(m, n1.name) || len(m) != 3 {
		t.Fatalf("members after n1's restart: %v", m)
	}
	last := "after-restart"
	deadline := time.Now().Add(waitTimeout)
	for {
		if a, _ := publishConfirmed(t, c.channel(n1), q, []string{last}); len(a) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish through the restarted n1 still nacked after %v", waitTimeout)
		}
	}
	if d := consumeN(t, c.channel(n1), q, 1, true); len(d) != 1 {
		t.Fatalf("consumed on n1 after its restart: %d deliveries", len(d))
	} else if _, ok := d[last]; !ok {
		t.Fatalf("consumed on n1 after its restart: not %q", last)
	}
}

// stopGracefully sends nd SIGTERM (runNode's Serve then shuts down) and
// waits at most d for it to exit, and returns how long that took. A node
// that has not exited by then is sent SIGQUIT, so that its goroutines are
// dumped on the test's stderr, and fails the test; so does one that exits
// with an error.
func (c *procCluster) stopGracefully(nd *node, d time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	if err := nd.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatalf("SIGTERM to %s: %v", nd.name, err)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-nd.exited:
	case <-timer.C:
		nd.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-nd.exited:
		case <-time.After(5 * time.Second):
		}
		c.t.Fatalf("%s did not exit within %v of SIGTERM (its goroutines are dumped above)", nd.name, d)
	}
	took := time.Since(start)
	st := nd.cmd.ProcessState
	nd.cmd = nil
	if !st.Success() {
		c.t.Fatalf("%s's exit after SIGTERM: %v", nd.name, st)
	}
	return took
}

// consumeConfirmed consumes q on nd, acking each delivery, until every
// one of want was delivered or waitTimeout has passed, opening a new
// channel when one is closed (as during an election). It returns how
// many times each body was delivered, how many deliveries were of a body
// already delivered and how many of those were not marked redelivered,
// and the bodies delivered that are not in want.
func consumeConfirmed(t *testing.T, c *procCluster, nd *node, q string, want []string) (got map[string]int, dups, notRedelivered int, unexpected []string) {
	t.Helper()
	wanted := map[string]bool{}
	for _, m := range want {
		wanted[m] = true
	}
	got = map[string]int{}
	missing := len(want)
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	var lastErr error
	for missing > 0 {
		conn, ch, err := c.open(nd)
		if err == nil {
			err = ch.Qos(50, 0, false)
		}
		var ds <-chan amqp091.Delivery
		if err == nil {
			ds, err = ch.Consume(q, "", false, false, false, false, nil)
		}
		if err != nil {
			lastErr = err
			if conn != nil {
				conn.Close()
			}
			select {
			case <-deadline.C:
				t.Logf("consume on %s: %v", nd.name, lastErr)
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
	session:
		for missing > 0 {
			select {
			case d, ok := <-ds:
				if !ok {
					break session
				}
				b := string(d.Body)
				got[b]++
				switch {
				case !wanted[b]:
					unexpected = append(unexpected, b)
				case got[b] == 1:
					missing--
				default:
					dups++
					if !d.Redelivered {
						notRedelivered++
					}
				}
				if err := d.Ack(false); err != nil {
					lastErr = err
				}
			case <-deadline.C:
				conn.Close()
				t.Logf("consume on %s: %d of %d missing after %v (last error: %v)", nd.name, missing, len(want), waitTimeout, lastErr)
				return
			}
		}
		conn.Close()
	}
	return
}
