package clusterconf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Cluster is the three nodes under test.
type Cluster struct {
	// Target is "rabbit" or "warren" (in the record and the logs only).
	Target string
	// AMQP are the nodes' amqp:// URLs (guest or an administrator).
	AMQP [3]string
	// Mgmt are the nodes' management API base URLs, with credentials.
	Mgmt [3]string
	// Nodes are the nodes' names, replaced by node1..node3 in the record.
	Nodes [3]string
	// Kill kills node i (0-based) with SIGKILL and returns once it is
	// gone; Start starts it again and returns once it accepts AMQP
	// connections.
	Kill, Start func(i int) error
	// DeleteMember removes node i's replica of the quorum queue named
	// (vhost "/") as an administrator does (RabbitMQ: rabbitmq-queues
	// delete_member run on that node; Warren: warrenctl delete_member,
	// DELETE /api/quorum-queues/{vhost}/{queue}/members/{node} on that
	// node's management API) and returns once the command has.
	DeleteMember func(i int, queue string) error
}

// Timeouts of the waits, generous for a loaded 2-core machine: a case
// waits until something it expects holds, for at most this long, then
// records what it saw last.
const (
	waitTimeout  = 60 * time.Second
	quietPeriod  = 500 * time.Millisecond
	dialTimeout  = 5 * time.Second
	deliverWait  = 20 * time.Second
	caseDeadline = 4 * time.Minute
)

// record is every case's transcript, by case name.
var (
	recordMu sync.Mutex
	record   = map[string][]string{}
)

// env is one case's view of the cluster: connections per node, the
// transcript, and the names to normalise.
type env struct {
	t     *testing.T
	c     *Cluster
	conns [3]*amqp.Connection
	lines []string
	repl  []string // old, new pairs for strings.NewReplacer
}

func newEnv(t *testing.T, c *Cluster) *env {
	e := &env{t: t, c: c}
	// Longer names first, so that a name that contains another is
	// replaced whole.
	idx := []int{0, 1, 2}
	sort.Slice(idx, func(a, b int) bool { return len(c.Nodes[idx[a]]) > len(c.Nodes[idx[b]]) })
	for _, i := range idx {
		e.repl = append(e.repl, c.Nodes[i], fmt.Sprintf("node%d", i+1))
	}
	t.Cleanup(func() {
		for _, cn := range e.conns {
			if cn != nil {
				cn.Close()
			}
		}
	})
	return e
}

// name returns a fresh name for a queue, exchange, vhost or user, which
// the transcript shows as <label>.
func (e *env) name(label string) string {
	var b [5]byte
	rand.Read(b[:])
	n := "cc-" + label + "-" + hex.EncodeToString(b[:])
	e.repl = append([]string{n, "<" + label + ">"}, e.repl...)
	return n
}

func (e *env) norm(s string) string { return strings.NewReplacer(e.repl...).Replace(s) }

// say adds a line to the transcript.
func (e *env) say(format string, args ...any) {
	l := e.norm(fmt.Sprintf(format, args...))
	e.lines = append(e.lines, l)
	e.t.Log(l)
}

// finish stores the transcript of the case.
func (e *env) finish(name string) {
	recordMu.Lock()
	record[name] = e.lines
	recordMu.Unlock()
}

// outcome is how an error reads in a transcript: ok, the AMQP reply code
// and text, or what else went wrong.
func outcome(err error) string {
	var ae *amqp.Error
	if e, ok := err.(*amqp.Error); ok && e == nil {
		err = nil // a typed nil from a NotifyClose channel
	}
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ae):
		return fmt.Sprintf("%d %s", ae.Code, ae.Reason)
	case errors.Is(err, amqp.ErrClosed):
		return "channel/connection closed"
	}
	return "error: " + err.Error()
}

// dial opens a connection to node i, to vhost "/" as the URL's user.
func (e *env) dial(i int) (*amqp.Connection, error) {
	return amqp.DialConfig(e.c.AMQP[i], amqp.Config{Dial: amqp.DefaultDial(dialTimeout), Heartbeat: 10 * time.Second})
}

// dialAs opens a connection to node i as user:pass to vhost.
func (e *env) dialAs(i int, user, pass, vhost string) (*amqp.Connection, error) {
	u, err := url.Parse(e.c.AMQP[i])
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword(user, pass)
	u.Path = "/" + url.PathEscape(vhost)
	u.RawPath = ""
	return amqp.DialConfig(u.String(), amqp.Config{Dial: amqp.DefaultDial(dialTimeout), Heartbeat: 10 * time.Second, Vhost: vhost})
}

// conn returns the case's connection to node i, dialled again when the
// last one closed.
func (e *env) conn(i int) *amqp.Connection {
	e.t.Helper()
	if c := e.conns[i]; c != nil && !c.IsClosed() {
		return c
	}
	c, err := e.dial(i)
	if err != nil {
		e.t.Fatalf("dial node%d: %v", i+1, err)
	}
	e.conns[i] = c
	return c
}

// ch opens a fresh channel on node i.
func (e *env) ch(i int) *amqp.Channel {
	e.t.Helper()
	ch, err := e.conn(i).Channel()
	if err != nil {
		e.t.Fatalf("channel on node%d: %v", i+1, err)
	}
	return ch
}

// try runs op on a fresh channel of node i and returns its outcome.
func (e *env) try(i int, op func(ch *amqp.Channel) error) string {
	e.t.Helper()
	ch := e.ch(i)
	err := op(ch)
	if err == nil {
		ch.Close()
	}
	return outcome(err)
}

// eventually repeats op until done(outcome) or waitTimeout and returns
// the last outcome.
func (e *env) eventually(op func() string, done func(string) bool) string {
	deadline := time.Now().Add(waitTimeout)
	for {
		o := op()
		if done(o) || time.Now().After(deadline) {
			return o
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) declare(i int, name string, durable, exclusive bool, args amqp.Table) string {
	return e.try(i, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, durable, false, exclusive, false, args)
		return err
	})
}

// passive declares name passively on node i: "ok messages=M consumers=C"
// or the error.
func (e *env) passive(i int, name string) string {
	var q amqp.Queue
	o := e.try(i, func(ch *amqp.Channel) error {
		var err error
		q, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
		return err
	})
	if o == "ok" {
		return fmt.Sprintf("ok messages=%d consumers=%d", q.Messages, q.Consumers)
	}
	return o
}

// publish publishes bodies to exchange/key on node i with confirms and
// mandatory: "ack ack returned(312 NO_ROUTE)+ack ..." per message.
func (e *env) publish(i int, exchange, key string, persistent bool, bodies ...string) string {
	e.t.Helper()
	ch := e.ch(i)
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return "confirm.select: " + outcome(err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, len(bodies)))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	mode := amqp.Transient
	if persistent {
		mode = amqp.Persistent
	}
	var out []string
	for _, b := range bodies {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false,
			amqp.Publishing{Body: []byte(b), DeliveryMode: mode})
		if err != nil {
			cancel()
			out = append(out, "publish: "+outcome(err))
			break
		}
		ok, err := dc.WaitContext(ctx)
		cancel()
		var r string
		select {
		case ret, ok := <-returns:
			if ok {
				r = fmt.Sprintf("returned(%d %s)+", ret.ReplyCode, ret.ReplyText)
			}
		default:
		}
		switch {
		case ch.IsClosed():
			out = append(out, r+"channel closed: "+outcome(<-closed))
			return strings.Join(out, " ")
		case err != nil:
			out = append(out, r+"no confirm: "+outcome(err))
		case ok:
			out = append(out, r+"ack")
		default:
			out = append(out, r+"nack")
		}
	}
	return strings.Join(out, " ")
}

// delivery is how a delivery reads in a transcript.
func delivery(d amqp.Delivery) string {
	s := fmt.Sprintf("body=%s redelivered=%v exchange=%q key=%q", d.Body, d.Redelivered, d.Exchange, d.RoutingKey)
	if n, ok := d.Headers["x-delivery-count"]; ok {
		s += fmt.Sprintf(" x-delivery-count=%v", n)
	}
	return s
}

// consumer is a consumer on a channel of its own, whose deliveries and
// cancel notifications the case reads.
type consumer struct {
	ch      *amqp.Channel
	tag     string
	ds      <-chan amqp.Delivery
	cancels chan string
	closes  chan *amqp.Error
}

// consume starts a consumer of queue on node i with manual acks and the
// given prefetch; the outcome is "ok" or the error.
func (e *env) consume(i int, queue string, prefetch int, args amqp.Table) (*consumer, string) {
	e.t.Helper()
	ch := e.ch(i)
	if prefetch > 0 {
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return nil, "basic.qos: " + outcome(err)
		}
	}
	c := &consumer{ch: ch, tag: "ctag-" + queue, cancels: ch.NotifyCancel(make(chan string, 4)),
		closes: ch.NotifyClose(make(chan *amqp.Error, 1))}
	ds, err := ch.Consume(queue, c.tag, false, false, false, false, args)
	if err != nil {
		return nil, outcome(err)
	}
	c.ds = ds
	return c, "ok"
}

// next returns the next n deliveries (fewer if they do not come within
// deliverWait), each as a transcript line, and the deliveries.
// take takes n deliveries from c as next does and writes each to the
// transcript as "NODE got ...".
func (e *env) take(c *consumer, node string, n int) []amqp.Delivery {
	lines, ds := c.next(n)
	for _, l := range lines {
		e.say("%s got %s", node, l)
	}
	return ds
}

func (c *consumer) next(n int) ([]string, []amqp.Delivery) {
	var lines []string
	var ds []amqp.Delivery
	timer := time.NewTimer(deliverWait)
	defer timer.Stop()
	for len(ds) < n {
		select {
		case d, ok := <-c.ds:
			if !ok {
				return append(lines, "deliveries ended"), ds
			}
			ds = append(ds, d)
			lines = append(lines, delivery(d))
		case <-timer.C:
			return append(lines, fmt.Sprintf("only %d of %d deliveries", len(ds), n)), ds
		}
	}
	return lines, ds
}

// quiet reports what arrives within quietPeriod: "nothing", or the
// deliveries and notifications.
func (c *consumer) quiet() string {
	timer := time.NewTimer(quietPeriod)
	defer timer.Stop()
	var got []string
	for {
		select {
		case d, ok := <-c.ds:
			if !ok {
				return strings.Join(append(got, "deliveries ended"), "; ")
			}
			got = append(got, delivery(d))
		case tag := <-c.cancels:
			got = append(got, "basic.cancel "+tag)
		case <-timer.C:
			if len(got) == 0 {
				return "nothing"
			}
			return strings.Join(got, "; ")
		}
	}
}

// waitCancel waits up to waitTimeout for a server basic.cancel or the
// channel's close: "basic.cancel", "channel closed: ..." or "none".
func (c *consumer) waitCancel() string {
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-c.cancels:
		return "basic.cancel"
	case err := <-c.closes:
		return "channel closed: " + outcome(err)
	case <-timer.C:
		return "none"
	}
}

// mgmt calls the management API of node i: the status and the decoded
// JSON body (nil when there is none).
func (e *env) mgmt(i int, method, path string, body any) (int, any) {
	e.t.Helper()
	u, err := url.Parse(e.c.Mgmt[i])
	if err != nil {
		e.t.Fatal(err)
	}
	pass, _ := u.User.Password()
	user := u.User.Username()
	u.User = nil
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, u.String()+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("Content-Type", "application/json")
	cl := http.Client{Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	if len(b) > 0 && json.Unmarshal(b, &v) != nil {
		v = string(b)
	}
	return resp.StatusCode, v
}

// kill kills node i and records it; restart starts it again and waits
// until every node reports every node running in /api/nodes.
func (e *env) kill(i int) {
	e.t.Helper()
	if err := e.c.Kill(i); err != nil {
		e.t.Fatalf("kill node%d: %v", i+1, err)
	}
	if c := e.conns[i]; c != nil {
		c.Close()
	}
	e.say("-- node%d killed", i+1)
}

func (e *env) restart(i int) {
	e.t.Helper()
	if err := e.c.Start(i); err != nil {
		e.t.Fatalf("start node%d: %v", i+1, err)
	}
	e.say("-- node%d started", i+1)
	e.waitHealthy()
}

// waitHealthy waits until each node's /api/nodes shows all three nodes
// running (fails the case otherwise: the next cases need a whole cluster).
func (e *env) waitHealthy() {
	e.t.Helper()
	deadline := time.Now().Add(2 * waitTimeout)
	for {
		bad := ""
		for i := range 3 {
			st, v := e.mgmt(i, "GET", "/api/nodes", nil)
			ns, _ := v.([]any)
			running := 0
			for _, n := range ns {
				if m, _ := n.(map[string]any); m["running"] == true {
					running++
				}
			}
			if st != 200 || running != 3 {
				bad = fmt.Sprintf("node%d: /api/nodes %d, %d running", i+1, st, running)
				break
			}
		}
		if bad == "" {
			// And AMQP on each.
			for i := range 3 {
				c, err := e.dial(i)
				if err != nil {
					bad = fmt.Sprintf("node%d: %v", i+1, err)
					break
				}
				c.Close()
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("cluster not whole after %v: %s", 2*waitTimeout, bad)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// compare reports where got differs from want: a line diff (longest
// common subsequence), "-" RabbitMQ's lines Warren lacks, "+" Warren's
// that RabbitMQ's record lacks.
func compare(t *testing.T, want, got []string) {
	t.Helper()
	// A wanted line ending in "*" matches any line it is a prefix of (a
	// known difference whose figure varies).
	eq := func(w, g string) bool {
		return w == g || (strings.HasSuffix(w, "*") && strings.HasPrefix(g, w[:len(w)-1]))
	}
	n, m := len(want), len(got)
	l := make([][]int, n+1)
	for i := range l {
		l[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if eq(want[i], got[j]) {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	var diff []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && eq(want[i], got[j]):
			i, j = i+1, j+1
		case j < m && (i == n || l[i][j+1] >= l[i+1][j]):
			diff = append(diff, "  + "+got[j])
			j++
		default:
			diff = append(diff, "  - "+want[i])
			i++
		}
	}
	if len(diff) > 0 {
		t.Errorf("differs from RabbitMQ's record (- RabbitMQ only, + Warren only):\n%s", strings.Join(diff, "\n"))
	}
}

func loadRecord(path string) (map[string][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string][]string
	return m, json.Unmarshal(b, &m)
}

func writeRecord(path string) error {
	recordMu.Lock()
	defer recordMu.Unlock()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <q> as it reads
	enc.SetIndent("", "  ")
	if err := enc.Encode(record); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// inflight publishes to queue on node i with confirms (at most 16
// outstanding) until the returned stop is called; stop waits for the
// outstanding confirms (up to waitTimeout) and says how many were acked
// and whether every publish was acked or nacked (a closed channel counts
// its unconfirmed publishes as unanswered).
func (e *env) inflight(i int, queue string) (stop func() (acked int, answered bool)) {
	e.t.Helper()
	ch := e.ch(i)
	if err := ch.Confirm(false); err != nil {
		e.t.Fatalf("confirm.select: %v", err)
	}
	done := make(chan struct{})
	type res struct {
		acked    int
		answered bool
	}
	out := make(chan res, 1)
	go func() {
		var pending []*amqp.DeferredConfirmation
		r := res{answered: true}
		settle := func(dc *amqp.DeferredConfirmation) {
			select {
			case <-dc.Done():
				if dc.Acked() {
					r.acked++
				}
			case <-time.After(waitTimeout):
				r.answered = false
			}
		}
		for n := 0; ; n++ {
			select {
			case <-done:
				for _, dc := range pending {
					settle(dc)
				}
				out <- r
				return
			default:
			}
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false,
				amqp.Publishing{Body: []byte(fmt.Sprint("f", n)), DeliveryMode: amqp.Persistent})
			if err != nil {
				// A closed channel: what it had not confirmed is unanswered.
				for _, dc := range pending {
					select {
					case <-dc.Done():
						if dc.Acked() {
							r.acked++
						}
					default:
						r.answered = false
					}
				}
				<-done
				out <- r
				return
			}
			pending = append(pending, dc)
			if len(pending) >= 16 {
				settle(pending[0])
				pending = pending[1:]
			}
		}
	}()
	return func() (int, bool) {
		close(done)
		r := <-out
		ch.Close()
		return r.acked, r.answered
	}
}
