package quorum_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// The stress tests drive a quorum queue as channels do, all at once and
// at random: publishers with confirms; consumers that attach, take
// deliveries, refuse some (a full connection, no credit left), ack,
// requeue and nack them, cancel (keeping what they hold, acked later) or
// close (what they hold goes back), and attach again; on a replicated
// queue, consumers and publishers on every replica and the leadership
// handed over now and then. Then every consumer closes and one drains
// the queue: every confirmed message must have been acked. What they
// check is what the jepsen scenarios check, on one process and without
// faults, where a race in the queue's own bookkeeping shows up in
// seconds: a delivery the machine checked out that no consumer got stays
// out for good, and the drain misses it.

// ledger is what the clients saw: bodies confirmed, and acked.
type ledger struct {
	mu        sync.Mutex
	confirmed map[string]bool
	acked     map[string]bool
}

func (l *ledger) confirm(b string) {
	l.mu.Lock()
	l.confirmed[b] = true
	l.mu.Unlock()
}

func (l *ledger) ack(es []queue.Entry) {
	l.mu.Lock()
	for _, e := range es {
		l.acked[string(e.Msg.Body)] = true
	}
	l.mu.Unlock()
}

// missing lists the confirmed bodies not acked, sorted.
func (l *ledger) missing() []string {
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

// stressChan is a channel's consumer: its deliveries wait in unacked for
// the test to settle them; busy, it refuses as a full connection does;
// with a prefetch, it refuses for want of credit.
type stressChan struct {
	led      *ledger
	q        queue.Queue // the replica it consumes from
	tag      string
	noAck    bool
	prefetch int

	mu      sync.Mutex
	busy    bool
	closed  bool
	unacked []queue.Entry
}

func (c *stressChan) Deliver(_ queue.Queue, e queue.Entry, _ any) queue.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.busy {
		return queue.Refused
	}
	if c.noAck {
		c.led.ack([]queue.Entry{e})
		return queue.Settled
	}
	if c.prefetch > 0 && len(c.unacked) >= c.prefetch {
		return queue.Refused
	}
	c.unacked = append(c.unacked, e)
	return queue.Pending
}

// RefusedBusy implements queue.Busy.
func (c *stressChan) RefusedBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy && !c.closed
}

// take removes up to n of what the consumer holds, at random.
func (c *stressChan) take(rng *rand.Rand, n int) []queue.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rng != nil {
		rng.Shuffle(len(c.unacked), func(i, j int) { c.unacked[i], c.unacked[j] = c.unacked[j], c.unacked[i] })
	}
	n = min(n, len(c.unacked))
	out := slices.Clone(c.unacked[:n])
	c.unacked = c.unacked[n:]
	return out
}

func (c *stressChan) setBusy(b bool) {
	c.mu.Lock()
	c.busy = b
	c.mu.Unlock()
}

// settle settles some of what c holds, as its client does.
func (c *stressChan) settle(rng *rand.Rand) {
	es := c.take(rng, 1+rng.IntN(8))
	if len(es) == 0 {
		return
	}
	switch r := rng.IntN(10); {
	case r < 7:
		c.led.ack(es)
		c.q.Settle(es, queue.Ack)
	case r < 9:
		c.q.Settle(es, queue.Requeue)
	default:
		c.q.Settle(es, queue.Nack)
	}
	c.q.Kick(nil) // credit freed
}

// closeChan is a channel closing: the consumer goes, what it holds goes
// back.
func (c *stressChan) closeChan() {
	c.mu.Lock()
	c.closed = true
	es := c.unacked
	c.unacked = nil
	c.mu.Unlock()
	c.q.RemoveConsumer(c.tag, c)
	c.q.Settle(es, queue.Requeue)
}

// stress runs the clients on the replicas qs for d, with seed's
// randomness; handOver (nil: none) is called now and then.
func stress(t *testing.T, qs []queue.Queue, d time.Duration, seed uint64, handOver func()) {
	led := &ledger{confirmed: map[string]bool{}, acked: map[string]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var unconfirmed sync.WaitGroup
	// Publishers, one per replica.
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("p%d-%d", i, n)
				unconfirmed.Add(1)
				q.Type().Publish(&queue.Message{Body: []byte(body), Persistent: true}, []queue.Queue{q}, nil, func(err error) {
					if err == nil {
						led.confirm(body)
					}
					unconfirmed.Done()
				})
				if n%4 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// Channels, two per replica, each attaching consumers in turn.
	var mu sync.Mutex
	var held []*stressChan // cancelled consumers whose client still settles
	for i := range 2 * len(qs) {
		q := qs[i%len(qs)]
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := 0; ; gen++ {
				c := &stressChan{led: led, q: q, tag: fmt.Sprintf("c%d-%d", i, gen), noAck: rng.IntN(5) == 0}
				if rng.IntN(3) > 0 {
					c.prefetch = 1 + rng.IntN(20)
				}
				if err := q.AddConsumer(queue.ConsumeOptions{Tag: c.tag, Consumer: c, NoAck: c.noAck, Prefetch: uint16(c.prefetch)}); err != nil {
					t.Errorf("consume %s: %v", c.tag, err)
					return
				}
				for range 5 + rng.IntN(50) {
					select {
					case <-stop:
						c.closeChan()
						return
					default:
					}
					switch r := rng.IntN(10); {
					case r < 6:
						c.settle(rng)
					case r < 7:
						c.setBusy(true)
					case r < 8:
						c.setBusy(false)
						q.Kick(nil)
					}
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				}
				c.setBusy(false)
				if rng.IntN(2) == 0 {
					c.closeChan()
					continue
				}
				// basic.cancel: it keeps what it holds; its client
				// settles it later (or its channel closes).
				q.RemoveConsumer(c.tag, c)
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	// The cancelled consumers' clients settle what they hold, some late.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1000))
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			mu.Lock()
			if len(held) == 0 {
				mu.Unlock()
				continue
			}
			c := held[rng.IntN(len(held))]
			mu.Unlock()
			if rng.IntN(4) == 0 {
				c.closeChan()
			} else {
				c.settle(rng)
			}
		}
	}()
	if handOver != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(300 * time.Millisecond):
				}
				handOver()
			}
		}()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	unconfirmed.Wait()
	for _, c := range held {
		c.closeChan()
	}
	// One consumer drains what is left.
	drain := &stressChan{led: led, q: qs[0], tag: "drain"}
	if err := qs[0].AddConsumer(queue.ConsumeOptions{Tag: drain.tag, Consumer: drain}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		es := drain.take(nil, 1<<30)
		if len(es) > 0 {
			led.ack(es)
			drain.q.Settle(es, queue.Ack)
		}
		miss := led.missing()
		if len(miss) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for i, q := range qs {
				t.Logf("replica %d: %+v %+v", i, q.Stats(), q.(*quorum.Queue).Replica())
			}
			t.Fatalf("seed %d: %d confirmed messages never acked, first %v", seed, len(miss), miss[:min(len(miss), 10)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	led.mu.Lock()
	t.Logf("seed %d: %d confirmed, all acked", seed, len(led.confirmed))
	led.mu.Unlock()
}

// stressSeed is the run's seed, logged so that a failure can be rerun.
func stressSeed() uint64 { return uint64(time.Now().UnixNano()) }

func TestStressSingleNode(t *testing.T) {
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir(), NoSync: true})
	t.Cleanup(func() { typ.Close() })
	x, err := typ.New(queue.Decl{VHost: "/", Name: "stress", Durable: true}, replLimits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	stress(t, []queue.Queue{x}, 2*time.Second, stressSeed(), nil)
}

func TestStressReplicated(t *testing.T) {
	r, p, _, qs := newGroup(t, 21, "stress")
	handOver := func() {
		for _, n := range r.names {
			if err := r.typ(n).HandOver(p.Group); err != nil {
				t.Logf("hand over on %s: %v", n, err)
			}
		}
	}
	stress(t, []queue.Queue{qs["a"], qs["b"], qs["c"]}, 3*time.Second, stressSeed(), handOver)
}
