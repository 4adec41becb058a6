package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/queue/quorum"
)

// TestStressClients drives a classic and a quorum queue of one broker
// with AMQP clients that do what applications do, at random and all at
// once: publishers with confirms; consumers with and without a prefetch
// that ack, nack, reject with requeue and ack several at once, and that
// cancel (their client acks what they hold afterwards), close their
// channel or their connection, and consume again; basic.get, with and
// without acks. Then one consumer drains each queue: every confirmed
// message must have been acked. A message that stayed checked out to no
// one, or went missing between a queue and a channel, shows here; a
// failure logs what the clients saw of the first ones missing.
func TestStressClients(t *testing.T) {
	srv, err := New(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), MemoryHighWatermarkBytes: 1 << 50, DiskFreeLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	stressKinds(t, []string{fmt.Sprintf("amqp://guest:guest@%s/", srv.Addr())}, 3*time.Second, nil)
}

// TestStressClientsCluster is TestStressClients on a cluster of three
// nodes, each client on a node of its own choosing: a classic queue
// served from its home to the others, a quorum queue with a replica on
// every node.
func TestStressClientsCluster(t *testing.T) {
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	stressState = func(t *testing.T, qname string) { logNodesState(t, nodes, qname) }
	t.Cleanup(func() { stressState = nil })
	stressKinds(t, urls, 4*time.Second, nil)
}

// TestStressClientsMembership is TestStressClientsCluster with the quorum
// queue's members changing throughout: a node's replica deleted and
// added back (delete_member, add_member), node after node. Consumers
// move between a node's replica and its stand-in, and keep consuming.
func TestStressClientsMembership(t *testing.T) {
	nodes := startReplicaCluster(t, []func(string, string) error{nil, nil, nil})
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	srv := nodes[0].srv
	waitFor(t, 10*time.Second, "n1 sees every node running", func() bool {
		for _, n := range []string{"n1", "n2", "n3"} {
			if _, up := srv.running(n); !up {
				return false
			}
		}
		return true
	})
	churn := func(ctx context.Context, qname string) {
		for i := 0; ctx.Err() == nil; i++ {
			node := fmt.Sprintf("n%d", i%3+1)
			if err := srv.DeleteQuorumMember("/", qname, node); err != nil {
				t.Errorf("delete_member %s: %v", node, err)
				return
			}
			time.Sleep(time.Duration(i%4) * 50 * time.Millisecond)
			if err := srv.AddQuorumMember("/", qname, node); err != nil {
				t.Errorf("add_member %s: %v", node, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stressState = func(t *testing.T, qname string) { logNodesState(t, nodes, qname) }
	t.Cleanup(func() { stressState = nil })
	stressClients(t, urls, "stress-members", amqp091.Table{"x-queue-type": "quorum"}, 6*time.Second, uint64(time.Now().UnixNano()), churn)
}

// logNodesState logs what each node holds of qname: the object serving
// it, its stats, the home's proxies and the channels' consumers.
func logNodesState(t *testing.T, nodes []*replicaNode, qname string) {
	for i, n := range nodes {
		v := n.srv.vhost("/")
		q := v.lookupQueue(qname)
		if q == nil {
			t.Logf("n%d: no %s", i+1, qname)
			continue
		}
		ready, cons := 0, 0
		if c, ok := q.(interface{ Counts() (int, int) }); ok {
			ready, cons = c.Counts()
		}
		t.Logf("n%d: %T %p %+v; counts: %d ready, %d consumers", i+1, q, q, q.Stats(), ready, cons)
		if qq, ok := q.(*quorum.Queue); ok {
			for _, h := range qq.ConsumerHolds() {
				t.Logf("n%d: machine consumer %x of %s: %d out, cancelled %v, tag here %q", i+1, h.Key, h.Node, h.Out, h.Cancelled, h.Tag)
			}
		}
		h := n.srv.home
		h.mu.Lock()
		for node, p := range h.peers {
			p.mu.Lock()
			for id, x := range p.proxies {
				t.Logf("n%d: proxy %d for %s: tag %s on %p credit %d busy %v started %v gone %v", i+1, id, node, x.tag, x.q, x.credit, x.busy, x.started, x.gone)
			}
			t.Logf("n%d: peer %s: %d held, %d out", i+1, node, len(p.held), len(p.out))
			p.mu.Unlock()
		}
		h.mu.Unlock()
		r := n.srv.remote
		r.mu.Lock()
		t.Logf("n%d: down %v", i+1, r.down)
		for id, rc := range r.consumers {
			t.Logf("n%d: remote consumer %d tag %s home %s", i+1, id, rc.tag, rc.q.home)
		}
		r.mu.Unlock()
		for _, c := range n.srv.clientConns() {
			c.consMu.Lock()
			for k := range c.consumers {
				t.Logf("n%d: conn %d consumer %s on %T %p (current %v) gone %v", i+1, c.id, k.tag, k.queue(), k.queue(), k.queue() == q, k.gone.Load())
			}
			c.consMu.Unlock()
		}
	}
}

// stressState, when set, logs the broker's view of a queue whose drain
// failed.
var stressState func(t *testing.T, qname string)

func stressKinds(t *testing.T, urls []string, d time.Duration, churn func(context.Context, string)) {
	for _, kind := range []struct {
		name string
		args amqp091.Table
	}{{"classic", nil}, {"quorum", amqp091.Table{"x-queue-type": "quorum"}}} {
		t.Run(kind.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			stressClients(t, urls, "stress-"+kind.name, kind.args, d, seed, churn)
		})
	}
}

// stressLedger is what the clients saw: bodies confirmed, and acked;
// left counts those confirmed and not acked.
type stressLedger struct {
	mu        sync.Mutex
	confirmed map[string]bool
	acked     map[string]bool
	left      int
	// brokerCancels: consumers the broker cancelled (basic.cancel).
	brokerCancels int
	events        map[string][]string // by body, and by "consumer TAG": what the clients saw
}

// note records what a client saw of body b (or of a consumer).
func (l *stressLedger) note(b, what string) {
	l.mu.Lock()
	if l.events == nil {
		l.events = map[string][]string{}
	}
	l.events[b] = append(l.events[b], time.Now().Format("05.000")+" "+what)
	l.mu.Unlock()
}

func (l *stressLedger) confirm(b string) {
	l.mu.Lock()
	l.confirmed[b] = true
	if !l.acked[b] {
		l.left++
	}
	l.mu.Unlock()
}

func (l *stressLedger) ack(b string) {
	l.mu.Lock()
	if !l.acked[b] && l.confirmed[b] {
		l.left--
	}
	l.acked[b] = true
	l.mu.Unlock()
}

func (l *stressLedger) done() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.left == 0
}

func (l *stressLedger) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for b := range l.confirmed {
		if !l.acked[b] {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// stressClients runs the clients on qname for d; churn (nil: none) runs
// beside them until they stop.
func stressClients(t *testing.T, urls []string, qname string, args amqp091.Table, d time.Duration, seed uint64, churn func(context.Context, string)) {
	pick := rand.New(rand.NewPCG(seed, 99))
	var pickMu sync.Mutex
	dial := func() *amqp091.Connection {
		pickMu.Lock()
		url := urls[pick.IntN(len(urls))]
		pickMu.Unlock()
		c, err := amqp091.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	admin := dial()
	defer admin.Close()
	ach, err := admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ach.QueueDeclare(qname, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	led := &stressLedger{confirmed: map[string]bool{}, acked: map[string]bool{}}
	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()
	var wg sync.WaitGroup
	// Publishers with confirms.
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial()
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				t.Error(err)
				return
			}
			if err := ch.Confirm(false); err != nil {
				t.Error(err)
				return
			}
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf("p%d-%d", p, n)
				dc, err := ch.PublishWithDeferredConfirm("", qname, false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte(body)})
				if err != nil {
					t.Error(err)
					return
				}
				wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				ok, err := dc.WaitContext(wctx)
				cancel()
				if err != nil {
					t.Errorf("confirm of %s: %v", body, err)
					return
				}
				if ok {
					led.confirm(body)
				}
			}
		}()
	}
	if churn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			churn(ctx, qname)
		}()
	}
	// Consumers, each on connections and channels of its own, again and
	// again.
	for i := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				stressConsumer(t, ctx, dial(), qname, led, rng)
			}
		}()
	}
	wg.Wait()

	// Drain.
	c := dial()
	defer c.Close()
	t.Logf("draining through %s", c.RemoteAddr())
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(qname, "drain", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for !led.done() {
		select {
		case m := <-ds:
			led.ack(string(m.Body))
			m.Ack(false)
		case <-deadline:
			miss := led.missing()
			q, _ := ach.QueueDeclarePassive(qname, true, false, false, false, args)
			if stressState != nil {
				stressState(t, qname)
			}
			for _, b := range miss[:min(len(miss), 5)] {
				led.mu.Lock()
				t.Logf("%s: %v", b, led.events[b])
				for _, ev := range led.events[b] {
					// The consumers it was delivered to: how they ended.
					if f := strings.Fields(ev); len(f) > 2 && f[1] == "delivered" {
						t.Logf("  consumer %s: %v", f[2], led.events["consumer "+f[2]])
					}
				}
				led.mu.Unlock()
			}
			t.Fatalf("seed %d: %d confirmed messages never acked (the queue has %d ready, %d consumers), first %v",
				seed, len(miss), q.Messages, q.Consumers, miss[:min(len(miss), 10)])
		}
	}
	led.mu.Lock()
	t.Logf("seed %d: %d confirmed, all acked", seed, len(led.confirmed))
	if led.brokerCancels > 0 {
		// The queue stays: no consumer of it is cancelled, membership
		// changes or not (they move).
		t.Errorf("seed %d: the broker cancelled %d consumers", seed, led.brokerCancels)
	}
	led.mu.Unlock()
}

// stressConsumer is one consumer's life on connection c: it ends by a
// channel close, a connection close or a cancel, and closes c.
func stressConsumer(t *testing.T, ctx context.Context, c *amqp091.Connection, qname string, led *stressLedger, rng *rand.Rand) {
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Error(err)
		return
	}
	if rng.IntN(6) == 0 {
		// basic.get for a while.
		noAck := rng.IntN(3) == 0
		for range 1 + rng.IntN(20) {
			m, ok, err := ch.Get(qname, noAck)
			if err != nil {
				t.Error(err)
				return
			}
			if !ok {
				return
			}
			if noAck {
				led.ack(string(m.Body))
				continue
			}
			if rng.IntN(4) == 0 {
				m.Nack(false, true)
				continue
			}
			led.ack(string(m.Body))
			m.Ack(false)
		}
		return
	}
	// No no-ack consumer: what the broker sent one and the client had
	// not read when it closed is gone, as the protocol has it (no-ack
	// gets are above).
	const noAck = false
	if prefetch := rng.IntN(30); prefetch > 0 {
		if err := ch.Qos(prefetch, 0, false); err != nil {
			t.Error(err)
			return
		}
	}
	tag := fmt.Sprintf("c%x", rng.Uint64())
	cancels := ch.NotifyCancel(make(chan string, 1))
	ds, err := ch.Consume(qname, tag, noAck, false, false, false, nil)
	if err != nil {
		t.Error(err)
		return
	}
	defer func() {
		select {
		case _, ok := <-cancels:
			if ok { // closed with the channel otherwise
				led.mu.Lock()
				led.brokerCancels++
				led.mu.Unlock()
			}
		default:
		}
	}()
	var held []amqp091.Delivery
	settle := func(all bool) {
		n := len(held)
		if !all {
			n = rng.IntN(len(held) + 1)
		}
		if n == 0 {
			return
		}
		switch r := rng.IntN(10); {
		case r < 2 && !all:
			// Several at once: multiple ack of the newest of those.
			slices.SortFunc(held[:n], func(a, b amqp091.Delivery) int { return int(a.DeliveryTag) - int(b.DeliveryTag) })
			last := held[n-1].DeliveryTag
			var keep []amqp091.Delivery
			for _, m := range held {
				if m.DeliveryTag <= last {
					led.note(string(m.Body), fmt.Sprintf("acked by multiple %s %d", tag, m.DeliveryTag))
					led.ack(string(m.Body))
				} else {
					keep = append(keep, m)
				}
			}
			led.note(string(held[n-1].Body), fmt.Sprintf("multiple ack %s up to %d", tag, last))
			held[n-1].Ack(true)
			held = keep
			return
		case r < 3:
			led.note(string(held[0].Body), fmt.Sprintf("nack %s %d", tag, held[0].DeliveryTag))
			held[0].Nack(false, true)
			held = held[1:]
			return
		case r < 4:
			led.note(string(held[0].Body), fmt.Sprintf("reject %s %d", tag, held[0].DeliveryTag))
			held[0].Reject(true)
			held = held[1:]
			return
		}
		for _, m := range held[:n] {
			led.note(string(m.Body), fmt.Sprintf("ack %s %d", tag, m.DeliveryTag))
			led.ack(string(m.Body))
			m.Ack(false)
		}
		held = held[n:]
	}
	life := time.After(time.Duration(10+rng.IntN(300)) * time.Millisecond)
	for {
		select {
		case m, ok := <-ds:
			if !ok {
				return
			}
			if noAck {
				led.ack(string(m.Body))
				continue
			}
			led.note(string(m.Body), fmt.Sprintf("delivered %s tag %d redelivered %v", tag, m.DeliveryTag, m.Redelivered))
			held = append(held, m)
			if rng.IntN(3) == 0 {
				settle(false)
			}
			continue
		case <-ctx.Done():
		case <-life:
		}
		break
	}
	end := rng.IntN(3)
	led.note("consumer "+tag, fmt.Sprintf("on %s ends %d", c.RemoteAddr(), end))
	switch end {
	case 0:
		// basic.cancel: what it holds is acked afterwards.
		if err := ch.Cancel(tag, false); err != nil {
			return
		}
		for m := range ds {
			led.note(string(m.Body), fmt.Sprintf("delivered after cancel %s tag %d", tag, m.DeliveryTag))
			if noAck {
				led.ack(string(m.Body))
			} else {
				held = append(held, m)
			}
		}
		settle(true)
	case 1:
		for _, m := range held {
			led.note(string(m.Body), fmt.Sprintf("held at close %s %d", tag, m.DeliveryTag))
		}
		ch.Close() // what it holds goes back
	default:
		// the connection closes (deferred): what it holds goes back
		for _, m := range held {
			led.note(string(m.Body), fmt.Sprintf("held at conn close %s %d", tag, m.DeliveryTag))
		}
	}
}
