package clusterproc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/jepsen"
)

// The Jepsen-style tests of issue 14, section 3: clients publish with
// confirms and consume with manual acks on every node while a fault hits
// the cluster of broker processes; the history they record must show no
// confirmed message lost (jepsen.Check) and every declare-ok'd queue on
// every node. Each scenario runs with each queue type: durable classic
// queues (unavailable while their home node is down; the verdict is read
// once it is back) and quorum queues (skipped while a cluster refuses
// them with 540). The default run is short; the jepsen build tag runs
// longer and repeated faults (jepsen_scale*_test.go).

type queueKind struct {
	name string
	args amqp091.Table
}

// replicated: the queue has replicas on other nodes, so it must serve
// publishes while one node is down, cut off or paused.
func (k queueKind) replicated() bool { return k.name == "quorum" }

var queueKinds = []queueKind{
	{"classic", nil},
	{"quorum", amqp091.Table{"x-queue-type": "quorum"}},
}

// scale is how long and how often the scenarios run.
type scale struct {
	phase    time.Duration // publishing before each fault
	fault    time.Duration // how long a node stays paused or cut off (beyond the election timeout)
	down     time.Duration // how long a killed node stays down
	rounds   int           // faults per scenario
	interval time.Duration // a publisher's pause between two publishes
	max      int           // messages per publisher at most
}

// refused540 holds why this build's cluster refuses a queue kind (the
// declare's 540), so that the later scenarios of that kind skip without
// starting a cluster.
var refused540 sync.Map // kind name -> reason

// jrun is one scenario's clients and history.
type jrun struct {
	t    *testing.T
	c    *procCluster
	kind queueKind
	q    string
	h    *jepsen.History

	pubCtx, conCtx, decCtx    context.Context
	stopPub, stopCon, stopDec context.CancelFunc
	pubWG, conWG, decWG       sync.WaitGroup
	decls                     []*jepsen.Declarer
	nPub, nCon                int
}

// startJepsen starts a cluster for kind (in network namespaces when
// netns), or skips when kind is known to be refused.
func startJepsen(t *testing.T, kind queueKind, netns bool) *procCluster {
	if why, ok := refused540.Load(kind.name); ok {
		t.Skip(why)
	}
	if netns {
		return newNetnsCluster(t, 3)
	}
	return newCluster(t, 3)
}

// newRun declares the scenario's queue on home and waits until every
// node knows it.
func newRun(t *testing.T, c *procCluster, kind queueKind, home *node) *jrun {
	r := &jrun{t: t, c: c, kind: kind, q: "jepsen-" + kind.name, h: &jepsen.History{}}
	r.pubCtx, r.stopPub = context.WithCancel(context.Background())
	r.conCtx, r.stopCon = context.WithCancel(context.Background())
	r.decCtx, r.stopDec = context.WithCancel(context.Background())
	t.Cleanup(func() {
		r.stopPub()
		r.stopDec()
		r.stopCon()
		r.pubWG.Wait()
		r.decWG.Wait()
		r.conWG.Wait()
	})
	ch := c.channel(home)
	if _, err := ch.QueueDeclare(r.q, true, false, false, false, kind.args); err != nil {
		if code, text := amqpCode(err); code == 540 {
			why := fmt.Sprintf("%s queues are refused in a cluster: %d %s", kind.name, code, text)
			refused540.Store(kind.name, why)
			t.Skip(why)
		}
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		waitFor(t, waitTimeout, r.q+" visible on "+nd.name, func() (bool, string) {
			_, err := c.passive(nd, r.q)
			return err == nil, errString(err)
		})
	}
	return r
}

// targets is nd, then the other nodes: a client reconnects to the next
// after a failure.
func (c *procCluster) targets(nd *node) []jepsen.Target {
	var out []jepsen.Target
	for k := range c.nodes {
		n := c.nodes[(nd.i+k)%len(c.nodes)]
		out = append(out, jepsen.Target{Node: n.name, Dial: func() (*amqp091.Connection, error) { return c.connect(n) }})
	}
	return out
}

// publish starts a confirming publisher connected to each of on.
func (r *jrun) publish(sc scale, on ...*node) {
	for _, nd := range on {
		r.nPub++
		p := &jepsen.Publisher{Name: fmt.Sprintf("p%d%s", r.nPub, nd.name), Targets: r.c.targets(nd), Key: r.q,
			History: r.h, Interval: sc.interval, Max: sc.max}
		r.pubWG.Go(func() { p.Run(r.pubCtx) })
	}
}

// consume starts a manual-ack consumer connected to each of on.
func (r *jrun) consume(on ...*node) {
	for _, nd := range on {
		r.nCon++
		cs := &jepsen.Consumer{Name: fmt.Sprintf("c%d%s", r.nCon, nd.name), Targets: r.c.targets(nd), Queue: r.q, History: r.h}
		r.conWG.Go(func() { cs.Run(r.conCtx) })
	}
}

// declare starts a declarer of queues of the run's kind on each of on.
func (r *jrun) declare(on ...*node) {
	for _, nd := range on {
		every := 20 * time.Millisecond
		if r.kind.replicated() {
			every = 100 * time.Millisecond // each queue is a Raft group
		}
		d := &jepsen.Declarer{Prefix: "decl-" + r.kind.name + "-" + nd.name, Targets: r.c.targets(nd), Args: r.kind.args,
			Interval: every, History: r.h}
		r.decls = append(r.decls, d)
		r.decWG.Go(func() { d.Run(r.decCtx) })
	}
}

// fault marks what happens in the history and the test log.
func (r *jrun) fault(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	r.h.Mark(what)
	r.t.Logf("%s: %s", time.Now().Format("15:04:05.000"), what)
}

func (r *jrun) confirmed() int {
	by, _ := r.h.Counts()
	return by[jepsen.Confirmed]
}

// progress waits until want more messages are confirmed than now: the
// cluster serves publishes (again).
func (r *jrun) progress(want int) {
	r.t.Helper()
	from := r.confirmed()
	waitFor(r.t, startTimeout, fmt.Sprintf("%d more confirms", want), func() (bool, string) {
		n := r.confirmed()
		return n-from >= want, fmt.Sprintf("%d more", n-from)
	})
}

// finish stops the publishers, waits until the consumers have every
// confirmed message (or a deadline), stops them and checks the history;
// then checks that every declare-ok'd queue exists on every node.
func (r *jrun) finish() jepsen.Result {
	r.t.Helper()
	r.stopDec()
	r.decWG.Wait()
	r.stopPub()
	r.pubWG.Wait()
	r.fault("publishers stopped")
	// Until every confirmed message is delivered, or none more has been
	// for drainIdle (what is left then is lost).
	const drainIdle = 20 * time.Second
	last, lastAt := -1, time.Now()
	for {
		_, n := r.h.Undelivered(0)
		if n == 0 {
			break
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > drainIdle {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stopCon()
	r.conWG.Wait()
	res := jepsen.Check(r.h.Snapshot())
	r.t.Logf("history: %s", res)
	if !res.OK() || res.DuplicatesFlagless > 0 || res.SameCount > 0 {
		// What the clients saw, to read the deliveries against.
		for _, e := range r.h.Events() {
			r.t.Logf("  %s %s", e.At.Format("15:04:05.000"), e.What)
		}
	}
	if res.DuplicatesFlagless > 0 || res.SameCount > 0 {
		r.t.Logf("ids delivered more than once:\n%s", res.DupReport(25))
	}
	if !res.OK() {
		r.t.Errorf("the history fails the check: %d confirmed messages lost, %d unexpected", len(res.Lost), len(res.Unexpected))
	}
	if res.Confirmed == 0 {
		r.t.Errorf("nothing was confirmed: the test proved nothing")
	}
	r.checkDeclared()
	return res
}

// checkDeclared waits until every queue a declarer got declare-ok for is
// on every node.
func (r *jrun) checkDeclared() {
	r.t.Helper()
	var names []string
	tried := 0
	for _, d := range r.decls {
		names = append(names, d.OK()...)
		tried += d.Tried()
	}
	if len(r.decls) == 0 {
		return
	}
	r.t.Logf("declares: %d sent, %d declare-ok", tried, len(names))
	if len(names) == 0 {
		r.t.Errorf("no declare succeeded")
		return
	}
	for _, nd := range r.c.nodes {
		missing := names
		waitFor(r.t, startTimeout, "every declare-ok'd queue on "+nd.name, func() (bool, string) {
			missing = r.c.missingQueues(nd, missing)
			if len(missing) == 0 {
				return true, ""
			}
			return false, fmt.Sprintf("%d missing, first %s", len(missing), missing[0])
		})
	}
}

// missingQueues returns those of names that a passive declare on nd does
// not find (on one connection, a new channel after each 404).
func (c *procCluster) missingQueues(nd *node, names []string) []string {
	conn, err := c.connect(nd)
	if err != nil {
		return names
	}
	defer conn.Close()
	var missing []string
	var ch *amqp091.Channel
	for i, n := range names {
		if ch == nil {
			if ch, err = conn.Channel(); err != nil {
				return append(missing, names[i:]...)
			}
		}
		if _, err := ch.QueueDeclarePassive(n, true, false, false, false, nil); err != nil {
			missing = append(missing, n)
			ch = nil
		}
	}
	return missing
}

// sleepFault holds a fault for d: the window in which it acts.
func sleepFault(d time.Duration) { time.Sleep(d) }

var jepsenScenarios = []struct {
	name  string
	netns bool
	long  bool // only under the jepsen build tag
	run   func(t *testing.T, c *procCluster, k queueKind, sc scale)
}{
	{"KillQueueNode", false, false, killQueueNode},
	{"KillConsumerNode", false, false, killConsumerNode},
	{"KillFollower", false, true, killFollower},
	{"KillMetaLeaderDuringDeclares", false, false, killMetaLeaderDuringDeclares},
	{"PartitionMetaLeader", true, false, partitionMetaLeader},
	{"PauseMetaLeader", false, false, pauseMetaLeader},
	{"WipeAndRejoin", false, false, wipeAndRejoin},
}

func TestJepsen(t *testing.T) {
	sc := jepsenScale
	for _, k := range queueKinds {
		t.Run(k.name, func(t *testing.T) {
			for _, s := range jepsenScenarios {
				t.Run(s.name, func(t *testing.T) {
					if s.long && !jepsenLong {
						t.Skip("runs under the jepsen build tag")
					}
					start := time.Now()
					c := startJepsen(t, k, s.netns)
					s.run(t, c, k, sc)
					t.Logf("%s/%s: %v", k.name, s.name, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// killQueueNode: kill -9 the node of the queue (a classic queue's home, a
// quorum queue's leader) during confirmed publishing, with publishers and
// consumers on every node; restart it from its data.
func killQueueNode(t *testing.T, c *procCluster, k queueKind, sc scale) {
	n1 := c.nodes[0]
	r := newRun(t, c, k, n1)
	r.consume(c.nodes...)
	r.publish(sc, c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 %s (the queue's node)", round, n1.name)
		c.kill(n1)
		if k.replicated() {
			r.progress(50) // another replica leads
			r.fault("round %d: confirms again without %s", round, n1.name)
		}
		sleepFault(sc.down)
		c.restart(n1)
		r.fault("round %d: %s restarted", round, n1.name)
		r.progress(50)
	}
	r.finish()
}

// killConsumerNode: kill -9 the node holding the consumers' connections;
// they reconnect to the other nodes and the messages they held unacked
// are delivered again.
func killConsumerNode(t *testing.T, c *procCluster, k queueKind, sc scale) {
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	r := newRun(t, c, k, n1)
	r.consume(n3, n3)
	r.publish(sc, n1, n2)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 %s (the consumers' node)", round, n3.name)
		c.kill(n3)
		_, before := r.h.Counts()
		waitFor(t, startTimeout, "the consumers deliver again from another node", func() (bool, string) {
			_, n := r.h.Counts()
			return n > before+20, fmt.Sprintf("%d more ids delivered", n-before)
		})
		sleepFault(sc.down)
		c.restart(n3)
		r.fault("round %d: %s restarted", round, n3.name)
	}
	res := r.finish()
	if res.Duplicates > 0 && res.DuplicatesFlagless == res.Duplicates {
		t.Errorf("none of %d messages delivered again carried redelivered", res.Duplicates)
	}
}

// killFollower: kill -9 a node that is not the queue's (a quorum queue's
// follower), with clients on every node.
func killFollower(t *testing.T, c *procCluster, k queueKind, sc scale) {
	n1, n2 := c.nodes[0], c.nodes[1]
	r := newRun(t, c, k, n1)
	r.consume(c.nodes...)
	r.publish(sc, c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 %s (a follower)", round, n2.name)
		c.kill(n2)
		r.progress(50) // the others go on
		sleepFault(sc.down)
		c.restart(n2)
		r.fault("round %d: %s restarted", round, n2.name)
	}
	r.finish()
}

// killMetaLeaderDuringDeclares: kill -9 the metadata leader while every
// node declares queues; the others elect a leader, and every queue whose
// declare-ok came exists on every node afterwards.
func killMetaLeaderDuringDeclares(t *testing.T, c *procCluster, k queueKind, sc scale) {
	r := newRun(t, c, k, c.nodes[0])
	r.declare(c.nodes...)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		l := c.metaLeader()
		r.fault("round %d: kill -9 %s (the metadata leader)", round, l.name)
		c.kill(l)
		nl := c.metaLeader(c.others(l)...)
		r.fault("round %d: %s leads the metadata", round, nl.name)
		sleepFault(sc.down)
		c.restart(l)
		r.fault("round %d: %s restarted", round, l.name)
	}
	// Some queues declared after the last fault too.
	n := 0
	for _, d := range r.decls {
		n += len(d.OK())
	}
	waitFor(t, startTimeout, "declares go on", func() (bool, string) {
		m := 0
		for _, d := range r.decls {
			m += len(d.OK())
		}
		return m > n+10, fmt.Sprint(m - n)
	})
	r.stopDec()
	r.decWG.Wait()
	r.checkDeclared()
}

// partitionMetaLeader: cut the metadata leader, which also holds the
// queue, off from both other nodes beyond the election timeout, with
// clients and declarers on every node. The majority elects a leader; the
// stale leader commits no declare (every declare-ok'd queue exists
// everywhere after the heal) and loses no confirmed message.
func partitionMetaLeader(t *testing.T, c *procCluster, k queueKind, sc scale) {
	l := c.metaLeader()
	r := newRun(t, c, k, l)
	r.consume(c.nodes...)
	r.publish(sc, c.nodes...)
	r.declare(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		l = c.metaLeader()
		time.Sleep(sc.phase)
		r.fault("round %d: isolate %s (the metadata leader)", round, l.name)
		if err := c.net.Isolate(l.i); err != nil {
			t.Fatal(err)
		}
		nl := c.metaLeader(c.others(l)...)
		r.fault("round %d: %s leads the majority", round, nl.name)
		if k.replicated() {
			r.progress(50) // the majority's replicas elect a queue leader
		}
		sleepFault(sc.fault)
		c.heal()
		r.fault("round %d: healed", round)
		c.metaLeader()
		r.progress(50)
	}
	r.finish()
}

// pauseMetaLeader: SIGSTOP the metadata leader, which also holds the
// queue, beyond the election timeout; the others elect a leader; SIGCONT.
func pauseMetaLeader(t *testing.T, c *procCluster, k queueKind, sc scale) {
	l := c.metaLeader()
	r := newRun(t, c, k, l)
	r.consume(c.nodes...)
	r.publish(sc, c.nodes...)
	r.declare(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		l = c.metaLeader()
		time.Sleep(sc.phase)
		r.fault("round %d: SIGSTOP %s (the metadata leader)", round, l.name)
		c.pause(l)
		paused := time.Now()
		nl := c.metaLeader(c.others(l)...)
		r.fault("round %d: %s leads after %v", round, nl.name, time.Since(paused).Round(time.Millisecond))
		if k.replicated() {
			r.progress(50)
		}
		sleepFault(sc.fault)
		c.resume(l)
		r.fault("round %d: SIGCONT %s", round, l.name)
		c.metaLeader()
		r.progress(50)
	}
	r.finish()
}

// wipeAndRejoin: kill a node that is not the queue's, delete its data
// directory and start it again as a fresh member (--cluster-join); it
// gets every definition back and serves clients again.
func wipeAndRejoin(t *testing.T, c *procCluster, k queueKind, sc scale) {
	n1, n3 := c.nodes[0], c.nodes[2]
	r := newRun(t, c, k, n1)
	if err := c.channel(n1).ExchangeDeclare("jepsen-x", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r.consume(c.nodes...)
	r.publish(sc, c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: wipe %s and rejoin through %s", round, n3.name, n1.name)
		c.wipe(n3, n1)
		r.fault("round %d: %s rejoined", round, n3.name)
		waitFor(t, waitTimeout, "the queue and the exchange on the rejoined "+n3.name, func() (bool, string) {
			if _, err := c.passive(n3, r.q); err != nil {
				return false, err.Error()
			}
			conn, err := c.connect(n3)
			if err != nil {
				return false, err.Error()
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return false, err.Error()
			}
			err = ch.ExchangeDeclarePassive("jepsen-x", "fanout", true, false, false, false, nil)
			return err == nil, errString(err)
		})
		v, err := c.view(n3)
		if err != nil || len(v.Nodes) != 3 {
			t.Fatalf("the rejoined node's view of the cluster: %+v %v", v, err)
		}
		r.progress(50)
	}
	r.finish()
}
