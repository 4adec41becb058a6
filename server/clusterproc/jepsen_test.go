package clusterproc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/jepsen"
)

// The Jepsen-style tests of issue 14, section 3: clients publish with
// confirms and consume with manual acks on every node while a fault hits
// the cluster of broker processes; the history they record must show no
// confirmed message lost (jepsen.Check) and every declare-ok'd queue on
// every node. Each scenario runs with both queue types: durable classic
// queues (unavailable while their home node is down; the verdict is read
// once it is back) and quorum queues (replicated: they serve through the
// fault). The default run is short: one cluster per scenario, holding a
// queue of each type, each with its own clients and history, through one
// fault. The jepsen build tag runs each type on a cluster of its own,
// with longer and repeated faults (jepsen_scale*_test.go).

type queueKind struct {
	name string
	args amqp091.Table
}

// replicated: the queue has replicas on other nodes, so it must serve
// publishes while one node is down, cut off or paused.
func (k queueKind) replicated() bool { return k.name == "quorum" }

var (
	classicKind = queueKind{"classic", nil}
	quorumKind  = queueKind{"quorum", amqp091.Table{"x-queue-type": "quorum"}}
)

// scale is how long and how often the scenarios run.
type scale struct {
	phase    time.Duration // publishing before each fault
	fault    time.Duration // how long a node stays paused or cut off (beyond the election timeout)
	down     time.Duration // how long a killed node stays down
	rounds   int           // faults per scenario
	interval time.Duration // a publisher's pause between two publishes
	max      int           // messages per publisher at most
	// kinds are the sets of queue kinds that share a cluster: each set
	// runs every scenario once.
	kinds [][]queueKind
	// parallel: the scenarios run side by side (go test's -parallel,
	// GOMAXPROCS by default), each on its cluster.
	parallel bool
}

// refused540 holds why this build's cluster refuses a queue kind (the
// declare's 540), so that the later scenarios leave that kind out.
var refused540 sync.Map // kind name -> reason

// jqueue is one queue of a scenario and what its clients saw.
type jqueue struct {
	kind       queueKind
	name       string
	h          *jepsen.History
	decls      []*jepsen.Declarer
	nPub, nCon int
	// publishing counts the publishers still running: one that sent its
	// scale.max messages stops, and a queue none publish to confirms no
	// more (progress says so instead of waiting in vain).
	publishing atomic.Int32
}

// jrun is one scenario: its cluster, queues and clients.
type jrun struct {
	t  *testing.T
	c  *procCluster
	sc scale
	qs []*jqueue

	pubCtx, conCtx, decCtx    context.Context
	stopPub, stopCon, stopDec context.CancelFunc
	pubWG, conWG, decWG       sync.WaitGroup
}

// usable returns the kinds not known to be refused; it skips the test
// when there are none.
func usable(t *testing.T, kinds []queueKind) []queueKind {
	var out []queueKind
	var why []string
	for _, k := range kinds {
		if w, ok := refused540.Load(k.name); ok {
			why = append(why, w.(string))
			continue
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		t.Skip(strings.Join(why, "; "))
	}
	return out
}

// startJepsen starts a cluster (in network namespaces when netns).
func startJepsen(t *testing.T, netns bool) *procCluster {
	if netns {
		return newNetnsCluster(t, 3)
	}
	return newCluster(t, 3)
}

// newRun declares a queue of each kind on home and waits until every node
// knows them. A kind the cluster refuses (540) is left out, and the test
// skipped when none is left.
func newRun(t *testing.T, c *procCluster, kinds []queueKind, sc scale, home *node) *jrun {
	r := &jrun{t: t, c: c, sc: sc}
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
	for _, k := range usable(t, kinds) {
		q := &jqueue{kind: k, name: "jepsen-" + k.name, h: &jepsen.History{}}
		if _, err := c.channel(home).QueueDeclare(q.name, true, false, false, false, k.args); err != nil {
			if code, text := amqpCode(err); code == 540 {
				why := fmt.Sprintf("%s queues are refused in a cluster: %d %s", k.name, code, text)
				refused540.Store(k.name, why)
				t.Log(why)
				continue
			}
			t.Fatal(err)
		}
		r.qs = append(r.qs, q)
	}
	usable(t, kinds)
	for _, q := range r.qs {
		for _, nd := range c.nodes {
			waitFor(t, waitTimeout, q.name+" visible on "+nd.name, func() (bool, string) {
				_, err := c.passive(nd, q.name)
				return err == nil, errString(err)
			})
		}
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

// publish starts, for each queue, a confirming publisher connected to
// each of on.
func (r *jrun) publish(on ...*node) {
	for _, q := range r.qs {
		for _, nd := range on {
			q.nPub++
			p := &jepsen.Publisher{Name: fmt.Sprintf("p%d%s", q.nPub, nd.name), Targets: r.c.targets(nd), Key: q.name,
				History: q.h, Interval: r.sc.interval, Max: r.sc.max}
			q.publishing.Add(1)
			r.pubWG.Go(func() {
				defer q.publishing.Add(-1)
				p.Run(r.pubCtx)
			})
		}
	}
}

// consume starts, for each queue, a manual-ack consumer connected to each
// of on.
func (r *jrun) consume(on ...*node) {
	for _, q := range r.qs {
		for _, nd := range on {
			q.nCon++
			cs := &jepsen.Consumer{Name: fmt.Sprintf("c%d%s", q.nCon, nd.name), Targets: r.c.targets(nd), Queue: q.name, History: q.h}
			r.conWG.Go(func() { cs.Run(r.conCtx) })
		}
	}
}

// declare starts, for each queue's kind, a declarer of queues of that
// kind on each of on.
func (r *jrun) declare(on ...*node) {
	for _, q := range r.qs {
		for _, nd := range on {
			every := 20 * time.Millisecond
			if q.kind.replicated() {
				every = 100 * time.Millisecond // each queue is a Raft group
			}
			d := &jepsen.Declarer{Prefix: "decl-" + q.kind.name + "-" + nd.name, Targets: r.c.targets(nd), Args: q.kind.args,
				Interval: every, History: q.h}
			q.decls = append(q.decls, d)
			r.decWG.Go(func() { d.Run(r.decCtx) })
		}
	}
}

// fault marks what happens in every history and the test log.
func (r *jrun) fault(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	for _, q := range r.qs {
		q.h.Mark(what)
	}
	r.t.Logf("%s: %s", time.Now().Format("15:04:05.000"), what)
}

func (q *jqueue) confirmed() int {
	by, _ := q.h.Counts()
	return by[jepsen.Confirmed]
}

// progress waits until want more messages are confirmed than now in each
// queue: the cluster serves publishes (again).
func (r *jrun) progress(want int) {
	r.t.Helper()
	r.progressOf(r.qs, want)
}

// progressReplicated is progress for the replicated queues only: those
// that must serve publishes during a fault.
func (r *jrun) progressReplicated(want int) {
	r.t.Helper()
	var qs []*jqueue
	for _, q := range r.qs {
		if q.kind.replicated() {
			qs = append(qs, q)
		}
	}
	r.progressOf(qs, want)
}

func (r *jrun) progressOf(qs []*jqueue, want int) {
	r.t.Helper()
	from := make([]int, len(qs))
	for i, q := range qs {
		from[i] = q.confirmed()
	}
	start := time.Now()
	for i, q := range qs {
		waitFor(r.t, startTimeout, fmt.Sprintf("%d more confirms in %s", want, q.name), func() (bool, string) {
			n := q.confirmed()
			if n-from[i] < want && q.publishing.Load() == 0 && r.pubCtx.Err() == nil {
				r.t.Fatalf("%s: %d more confirms of %d wanted, and every publisher has sent its %d messages (scale.max): the scenario outlasted its publishers", q.name, n-from[i], want, r.sc.max)
			}
			return n-from[i] >= want, fmt.Sprintf("%d more", n-from[i])
		})
		r.t.Logf("%s: %d more confirms in %s after %v", time.Now().Format("15:04:05.000"), want, q.name, time.Since(start).Round(time.Millisecond))
	}
}

// delivered is how many distinct ids q's consumers have had.
func (q *jqueue) delivered() int {
	_, n := q.h.Counts()
	return n
}

// finish stops the publishers, waits until the consumers have every
// confirmed message (or a deadline), stops them and checks each queue's
// history; then checks that every declare-ok'd queue exists on every
// node. It returns the queues' verdicts, in the order of r.qs.
func (r *jrun) finish() []jepsen.Result {
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
		n := 0
		for _, q := range r.qs {
			_, left := q.h.Undelivered(0)
			n += left
		}
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
	var out []jepsen.Result
	for _, q := range r.qs {
		out = append(out, r.check(q))
	}
	r.checkDeclared()
	return out
}

// logQueueState logs what each running node's management API says of
// q: whether what was not delivered is still ready, held unacknowledged,
// or gone.
func (r *jrun) logQueueState(q *jqueue) {
	for _, nd := range r.c.nodes {
		if nd.cmd == nil || nd.paused {
			continue
		}
		code, body := r.c.mgmtCall(nd, "GET", "/api/queues/%2F/"+q.name, "")
		var st struct {
			Ready     int      `json:"messages_ready"`
			Unacked   int      `json:"messages_unacknowledged"`
			Consumers int      `json:"consumers"`
			Leader    string   `json:"leader"`
			Members   []string `json:"members"`
		}
		json.Unmarshal([]byte(body), &st)
		r.t.Logf("%s on %s: %d: ready %d, unacked %d, consumers %d, leader %s, members %v",
			q.name, nd.name, code, st.Ready, st.Unacked, st.Consumers, st.Leader, st.Members)
	}
}

// check checks q's history.
func (r *jrun) check(q *jqueue) jepsen.Result {
	r.t.Helper()
	res := jepsen.Check(q.h.Snapshot())
	r.t.Logf("%s history: %s", q.kind.name, res)
	if !res.OK() || res.DuplicatesFlagless > 0 || res.SameCount > 0 {
		// What the clients saw, to read the deliveries against.
		for _, e := range q.h.Events() {
			r.t.Logf("  %s %s", e.At.Format("15:04:05.000"), e.What)
		}
	}
	if res.DuplicatesFlagless > 0 || res.SameCount > 0 {
		r.t.Logf("%s ids delivered more than once:\n%s", q.kind.name, res.DupReport(25))
	}
	if !res.OK() {
		r.logQueueState(q)
		r.t.Errorf("the %s history fails the check: %d confirmed messages lost, %d unexpected", q.kind.name, len(res.Lost), len(res.Unexpected))
	}
	if res.Confirmed == 0 {
		r.t.Errorf("nothing was confirmed in %s: the test proved nothing", q.name)
	}
	if q.kind.replicated() && (res.FlaglessAgain > 0 || res.SameCount > 0) {
		// Every way a quorum queue hands a message out again (return,
		// detach, a node's reset) raises its x-delivery-count; a checkout
		// that never reached the channel goes back unraised, and is not
		// delivered. A second flagless delivery, or a count seen twice, is
		// a message delivered twice as new, or enqueued twice.
		r.t.Errorf("%s: %d deliveries flagless after a flagless one, %d with an x-delivery-count seen before (see the ids above)",
			q.name, res.FlaglessAgain, res.SameCount)
	}
	return res
}

// declarers are the declarers of every queue's kind.
func (r *jrun) declarers() []*jepsen.Declarer {
	var ds []*jepsen.Declarer
	for _, q := range r.qs {
		ds = append(ds, q.decls...)
	}
	return ds
}

// declaredOK is how many declares the declarers got declare-ok for.
func (r *jrun) declaredOK() int {
	n := 0
	for _, d := range r.declarers() {
		n += len(d.OK())
	}
	return n
}

// checkDeclared waits until every queue a declarer got declare-ok for is
// on every node.
func (r *jrun) checkDeclared() {
	r.t.Helper()
	ds := r.declarers()
	if len(ds) == 0 {
		return
	}
	var names []string
	tried := 0
	for _, d := range ds {
		names = append(names, d.OK()...)
		tried += d.Tried()
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
	run   func(t *testing.T, c *procCluster, kinds []queueKind, sc scale)
}{
	{"KillQueueNode", false, false, killQueueNode},
	{"KillConsumerNode", false, false, killConsumerNode},
	{"KillFollower", false, true, killFollower},
	{"KillMetaLeaderDuringDeclares", false, false, killMetaLeaderDuringDeclares},
	{"PartitionMetaLeader", true, false, partitionMetaLeader},
	{"PauseMetaLeader", false, false, pauseMetaLeader},
	{"WipeAndRejoin", false, false, wipeAndRejoin},
	{"KillAll", false, false, killAll},
	{"RollingRestart", false, false, rollingRestart},
	{"MembershipChanges", false, false, membershipChanges},
	{"RandomFaults", true, true, randomFaults},
}

// kindsName names a set of kinds: "classic+quorum".
func kindsName(kinds []queueKind) string {
	var ns []string
	for _, k := range kinds {
		ns = append(ns, k.name)
	}
	return strings.Join(ns, "+")
}

func TestJepsen(t *testing.T) {
	sc := jepsenScale
	for _, kinds := range sc.kinds {
		t.Run(kindsName(kinds), func(t *testing.T) {
			for _, s := range jepsenScenarios {
				t.Run(s.name, func(t *testing.T) {
					if s.long && !jepsenLong {
						t.Skip("runs under the jepsen build tag")
					}
					if sc.parallel {
						t.Parallel()
					}
					usable(t, kinds)
					start := time.Now()
					c := startJepsen(t, s.netns)
					t.Logf("%s: cluster up after %v", time.Now().Format("15:04:05.000"), time.Since(start).Round(time.Millisecond))
					s.run(t, c, kinds, sc)
					t.Logf("%s/%s: %v", kindsName(kinds), s.name, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// killQueueNode: kill -9 the node of the queues (a classic queue's home,
// a quorum queue's leader); another replica leads the quorum queue.
func killQueueNode(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	killNode(t, c, kinds, sc, c.nodes[0], "the queues' node", (*jrun).progressReplicated)
}

// killNode: kill -9 victim during confirmed publishing, with publishers
// and consumers on every node, wait until the queues that must serve
// without it do (serving), restart it from its data.
func killNode(t *testing.T, c *procCluster, kinds []queueKind, sc scale, victim *node, what string, serving func(*jrun, int)) {
	r := newRun(t, c, kinds, sc, c.nodes[0])
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 %s (%s)", round, victim.name, what)
		c.kill(victim)
		serving(r, 50)
		r.fault("round %d: confirms again without %s", round, victim.name)
		sleepFault(sc.down)
		c.restart(victim)
		r.fault("round %d: %s restarted", round, victim.name)
		r.progress(50)
	}
	r.finish()
}

// killConsumerNode: kill -9 the node holding the consumers' connections;
// they reconnect to the other nodes and the messages they held unacked
// are delivered again.
func killConsumerNode(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	r := newRun(t, c, kinds, sc, n1)
	r.consume(n3, n3)
	r.publish(n1, n2)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: kill -9 %s (the consumers' node)", round, n3.name)
		c.kill(n3)
		before := make([]int, len(r.qs))
		for i, q := range r.qs {
			before[i] = q.delivered()
		}
		for i, q := range r.qs {
			waitFor(t, startTimeout, "the consumers of "+q.name+" deliver again from another node", func() (bool, string) {
				n := q.delivered()
				return n > before[i]+20, fmt.Sprintf("%d more ids delivered", n-before[i])
			})
		}
		sleepFault(sc.down)
		c.restart(n3)
		r.fault("round %d: %s restarted", round, n3.name)
	}
	for i, res := range r.finish() {
		if res.Duplicates > 0 && res.DuplicatesFlagless == res.Duplicates {
			t.Errorf("%s: none of %d messages delivered again carried redelivered", r.qs[i].name, res.Duplicates)
		}
	}
}

// killFollower: kill -9 a node that is not the queues' (a quorum queue's
// follower): every queue serves without it.
func killFollower(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	killNode(t, c, kinds, sc, c.nodes[1], "a follower", (*jrun).progress)
}

// killMetaLeaderDuringDeclares: kill -9 the metadata leader while every
// node declares queues; the others elect a leader, and every queue whose
// declare-ok came exists on every node afterwards.
func killMetaLeaderDuringDeclares(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	r := newRun(t, c, kinds, sc, c.nodes[0])
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
	n := r.declaredOK()
	waitFor(t, startTimeout, "declares go on", func() (bool, string) {
		m := r.declaredOK()
		return m > n+10, fmt.Sprint(m - n)
	})
	r.stopDec()
	r.decWG.Wait()
	r.checkDeclared()
}

// metaLeaderFault: the metadata leader, which also holds the queues, is
// taken away from the others beyond the election timeout (cut, until
// mend), with clients and declarers on every node. The majority elects a
// leader; the stale leader commits no declare (every declare-ok'd queue
// exists everywhere afterwards) and loses no confirmed message.
func metaLeaderFault(t *testing.T, c *procCluster, kinds []queueKind, sc scale, what string, cut, mend func(*node)) {
	l := c.metaLeader()
	r := newRun(t, c, kinds, sc, l)
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.declare(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		l = c.metaLeader()
		time.Sleep(sc.phase)
		r.fault("round %d: %s %s (the metadata leader)", round, what, l.name)
		cut(l)
		from := time.Now()
		nl := c.metaLeader(c.others(l)...)
		r.fault("round %d: %s leads the majority after %v", round, nl.name, time.Since(from).Round(time.Millisecond))
		r.progressReplicated(50) // the majority's replicas elect a queue leader
		sleepFault(sc.fault)
		mend(l)
		r.fault("round %d: %s is back", round, l.name)
		c.metaLeader()
		r.progress(50)
	}
	r.finish()
}

// partitionMetaLeader: the metadata leader is cut off from both other
// nodes by a partition, then healed.
func partitionMetaLeader(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	metaLeaderFault(t, c, kinds, sc, "isolate",
		func(l *node) {
			if err := c.net.Isolate(l.i); err != nil {
				t.Fatal(err)
			}
		},
		func(*node) { c.heal() })
}

// pauseMetaLeader: the metadata leader is stopped with SIGSTOP, then
// continued with SIGCONT.
func pauseMetaLeader(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	metaLeaderFault(t, c, kinds, sc, "SIGSTOP", c.pause, c.resume)
}

// wipeAndRejoin: kill a node that is not the queues', delete its data
// directory and start it again as a fresh member (--cluster-join); it
// gets every definition back and serves clients again.
func wipeAndRejoin(t *testing.T, c *procCluster, kinds []queueKind, sc scale) {
	n1, n3 := c.nodes[0], c.nodes[2]
	r := newRun(t, c, kinds, sc, n1)
	if err := c.channel(n1).ExchangeDeclare("jepsen-x", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r.consume(c.nodes...)
	r.publish(c.nodes...)
	r.progress(50)
	for round := range sc.rounds {
		time.Sleep(sc.phase)
		r.fault("round %d: wipe %s and rejoin through %s", round, n3.name, n1.name)
		c.wipe(n3, n1)
		r.fault("round %d: %s rejoined", round, n3.name)
		for _, q := range r.qs {
			waitFor(t, waitTimeout, q.name+" on the rejoined "+n3.name, func() (bool, string) {
				_, err := c.passive(n3, q.name)
				return err == nil, errString(err)
			})
		}
		waitFor(t, waitTimeout, "the exchange on the rejoined "+n3.name, func() (bool, string) {
			conn, ch, err := c.open(n3)
			if err != nil {
				return false, err.Error()
			}
			defer conn.Close()
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
