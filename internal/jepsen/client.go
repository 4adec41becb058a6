package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/amqpopen"
)

// Target is a node a client can connect to.
type Target struct {
	Node string
	Dial func() (*amqp091.Connection, error)
}

// Open dials t and opens a channel; closing the connection closes the
// channel too.
func (t Target) Open() (*amqp091.Connection, *amqp091.Channel, error) {
	return amqpopen.Channel(t.Dial)
}

// sessions runs session against each of targets in turn, from the
// first, while more says so; a session that failed is marked in h (as
// who's, when h is set) and followed by retryPause. A session's ctx.Err()
// once ctx is done is no failure.
func sessions(ctx context.Context, targets []Target, who string, h *History, more func() bool, session func(Target) error) {
	for i := 0; more(); i++ {
		t := targets[i%len(targets)]
		err := session(t)
		if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			continue
		}
		if h != nil {
			h.Mark(fmt.Sprintf("%s on %s: %v", who, t.Node, err))
		}
		sleep(ctx, retryPause)
	}
}

// retryPause is how long a client waits before it dials again after its
// connection failed.
const retryPause = 200 * time.Millisecond

// Publisher publishes persistent messages with confirms, each body a
// unique id (Name-000001, ...), recording each in History: sent, then
// confirmed, nacked, returned (mandatory, unroutable) or unknown when its
// channel closed first. After a failure it reconnects to the next of
// Targets.
type Publisher struct {
	Name     string
	Targets  []Target
	Exchange string
	Key      string
	History  *History
	// Window bounds the unconfirmed messages (default 16).
	Window int
	// Interval is the pause between two publishes (0: none).
	Interval time.Duration
	// Max bounds the messages sent in all (0: no bound).
	Max int
	// NackPause is the pause after a nack or a return, as a client backs
	// off when the broker refuses (default 5 ms): it bounds the messages a
	// refusing cluster is sent.
	NackPause time.Duration
	// ConfirmWait is how long Run waits for the outstanding confirms once
	// ctx is done (default 15 s); those still unconfirmed are unknown.
	ConfirmWait time.Duration

	n int // ids used
}

// Run publishes until ctx is done or Max messages were sent, then waits
// for the outstanding confirms.
func (p *Publisher) Run(ctx context.Context) {
	if p.Window <= 0 {
		p.Window = 16
	}
	if p.ConfirmWait <= 0 {
		p.ConfirmWait = 15 * time.Second
	}
	if p.NackPause <= 0 {
		p.NackPause = 5 * time.Millisecond
	}
	more := func() bool { return ctx.Err() == nil && (p.Max == 0 || p.n < p.Max) }
	sessions(ctx, p.Targets, "publisher "+p.Name, p.History, more, func(t Target) error { return p.session(ctx, t) })
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// session publishes on one connection until ctx is done, Max is reached
// or the connection fails; every message it leaves unconfirmed is unknown.
func (p *Publisher) session(ctx context.Context, t Target) error {
	conn, ch, err := t.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, p.Window+1))
	returns := ch.NotifyReturn(make(chan amqp091.Return, p.Window+1))
	ended := endings(conn, ch)
	pending := map[uint64]string{}
	returned := map[string]bool{}
	defer func() {
		for _, id := range pending {
			p.History.Settle(id, Unknown)
		}
	}()
	// A closed channel closes returns too (its confirms may still be
	// buffered in confirms): nothing more to drain then.
	drainReturns := func() {
		for {
			select {
			case r, ok := <-returns:
				if !ok {
					return
				}
				returned[string(r.Body)] = true
			default:
				return
			}
		}
	}
	refused := false
	settle := func(c amqp091.Confirmation) {
		id, ok := pending[c.DeliveryTag]
		if !ok {
			return
		}
		refused = refused || !c.Ack
		delete(pending, c.DeliveryTag)
		drainReturns() // a basic.return comes before its message's ack
		switch {
		case returned[id]:
			delete(returned, id)
			refused = true
			p.History.Settle(id, Returned)
		case c.Ack:
			p.History.Settle(id, Confirmed)
		default:
			p.History.Settle(id, Nacked)
		}
	}
	var stopAt <-chan time.Time
	for {
		publishing := ctx.Err() == nil && (p.Max == 0 || p.n < p.Max)
		if !publishing && len(pending) == 0 {
			return nil
		}
		if publishing && len(pending) < p.Window {
			p.n++
			id := fmt.Sprintf("%s-%06d", p.Name, p.n)
			seq := ch.GetNextPublishSeqNo()
			p.History.Send(id)
			pending[seq] = id
			err := ch.PublishWithContext(context.Background(), p.Exchange, p.Key, true, false, amqp091.Publishing{
				DeliveryMode: amqp091.Persistent, MessageId: id, Body: []byte(id)})
			if err != nil {
				return err
			}
			if p.Interval > 0 {
				sleep(ctx, p.Interval)
			}
			if refused {
				refused = false
				sleep(ctx, p.NackPause)
			}
			// Take the confirms that came meanwhile without waiting.
			for more := true; more; {
				select {
				case c, ok := <-confirms:
					if !ok {
						return ended()
					}
					settle(c)
				default:
					more = false
				}
			}
			continue
		}
		if !publishing && stopAt == nil {
			stopAt = time.After(p.ConfirmWait)
		}
		select {
		case c, ok := <-confirms:
			if !ok {
				return ended()
			}
			settle(c)
		case <-stopAt:
			return fmt.Errorf("%d confirms still outstanding after %v", len(pending), p.ConfirmWait)
		case <-ctx.Done():
			if stopAt == nil {
				stopAt = time.After(p.ConfirmWait)
			}
		}
	}
}

// Consumer consumes Queue with manual acks (prefetch Prefetch, default
// 32), recording every delivery and ack in History. After a failure or a
// server basic.cancel it reconnects to the next of Targets.
type Consumer struct {
	Name     string
	Targets  []Target
	Queue    string
	Prefetch int
	History  *History
}

// Run consumes until ctx is done.
func (c *Consumer) Run(ctx context.Context) {
	if c.Prefetch <= 0 {
		c.Prefetch = 32
	}
	more := func() bool { return ctx.Err() == nil }
	sessions(ctx, c.Targets, "consumer "+c.Name, c.History, more, func(t Target) error { return c.session(ctx, t) })
}

func (c *Consumer) session(ctx context.Context, t Target) error {
	conn, ch, err := t.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := ch.Qos(c.Prefetch, 0, false); err != nil {
		return err
	}
	ended := endings(conn, ch)
	ds, err := ch.Consume(c.Queue, c.Name, false, false, false, false, nil)
	if err != nil {
		return err
	}
	for {
		select {
		case d, ok := <-ds:
			if !ok {
				return ended()
			}
			i := c.History.Deliver(Delivery{ID: string(d.Body), Consumer: c.Name, Node: t.Node,
				Redelivered: d.Redelivered, Count: deliveryCount(d.Headers)})
			if d.Ack(false) == nil {
				c.History.Ack(i)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endings watches how a session can end, and returns what says which
// did once its deliveries or confirms stopped: the broker's basic.cancel,
// the channel's or the connection's close (with the broker's reason, or
// the client's own, as a missed heartbeat), each told by amqp091-go
// about when it closes the deliveries.
func endings(conn *amqp091.Connection, ch *amqp091.Channel) func() error {
	connClosed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	cancelled := ch.NotifyCancel(make(chan string, 1))
	return func() error {
		// amqp091-go closes all three as the channel ends: a closed one
		// (nothing received) tells nothing; the others may yet.
		timeout := time.After(time.Second)
		for cancelled != nil || chClosed != nil || connClosed != nil {
			select {
			case tag, ok := <-cancelled:
				if ok {
					return fmt.Errorf("consumer %q cancelled by the broker", tag)
				}
				cancelled = nil
			case err, ok := <-chClosed:
				if ok && err != nil {
					return fmt.Errorf("channel closed: %v", err)
				}
				chClosed = nil
			case err, ok := <-connClosed:
				if ok && err != nil {
					return fmt.Errorf("connection closed: %v", err)
				}
				connClosed = nil
			case <-timeout:
				return errors.New("deliveries ended, and neither a cancel nor a close was told")
			}
		}
		return errors.New("deliveries ended: the channel closed without a reason")
	}
}

func deliveryCount(h amqp091.Table) int {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return int(v)
	case int32:
		return int(v)
	case int16:
		return int(v)
	case int8:
		return int(v)
	case int:
		return v
	case uint8:
		return int(v)
	}
	return -1
}

// Declarer declares durable queues Prefix-1, Prefix-2, ... one after the
// other (with Args), and remembers those whose declare-ok came. After a
// failure it reconnects to the next of Targets.
type Declarer struct {
	Prefix   string
	Targets  []Target
	Args     amqp091.Table
	Interval time.Duration
	History  *History // events only

	mu  sync.Mutex
	ok  []string
	n   int
	err error
}

// OK returns the queues whose declare was answered with declare-ok.
func (d *Declarer) OK() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ok...)
}

// Tried is how many declares were sent.
func (d *Declarer) Tried() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// Run declares until ctx is done.
func (d *Declarer) Run(ctx context.Context) {
	more := func() bool { return ctx.Err() == nil }
	sessions(ctx, d.Targets, "declarer "+d.Prefix, d.History, more, func(t Target) error { return d.session(ctx, t) })
}

func (d *Declarer) session(ctx context.Context, t Target) error {
	conn, ch, err := t.Open()
	if err != nil {
		return err
	}
	defer conn.Close()
	for ctx.Err() == nil {
		d.mu.Lock()
		d.n++
		name := fmt.Sprintf("%s-%04d", d.Prefix, d.n)
		d.mu.Unlock()
		if _, err := ch.QueueDeclare(name, true, false, false, false, d.Args); err != nil {
			return fmt.Errorf("declare %s: %w", name, err)
		}
		d.mu.Lock()
		d.ok = append(d.ok, name)
		d.mu.Unlock()
		if d.Interval > 0 {
			sleep(ctx, d.Interval)
		}
	}
	return nil
}
