// Package clustertest is the test support of package cluster: Net, a
// fault-injecting network between in-process nodes, and Cluster, a
// harness that starts N nodes on 127.0.0.1 random ports over it.
package clustertest

import (
	"context"
	"net"
	"os"
	"sync"
	"time"
)

// Net is a fault-injecting network between named nodes. Every connection
// a node dials goes through it (cluster.Options.Dial = Net.Dialer(name)),
// and both directions of it are controlled on the dialling side:
//
//   - Drop(from, to): nothing from `from` reaches `to`, as over a link
//     that loses every packet without a reset: on a connection `from`
//     dialled its writes stall, on one `to` dialled the bytes are held
//     before `to` reads them; a new connection's handshake stalls until
//     its deadline.
//   - Delay(from, to, d): each write from `from` to `to` arrives d later.
//   - Partition(a, b): Drop both ways between every node of a and of b.
//   - Heal: every link works again; what was held goes through.
//
// A dropped direction stalls its bytes rather than discarding them (TCP
// retransmits until the link heals or the connection times out), so a
// stream is never corrupted: a blocked write or read returns a timeout at
// its deadline, as over a dead link.
type Net struct {
	mu     sync.Mutex
	names  map[string]string // listener address -> node name
	cut    map[link]bool
	delay  map[link]time.Duration
	change chan struct{} // closed and replaced at every change
	dials  map[string]int
}

type link struct{ from, to string }

// NewNet is a network with every link working.
func NewNet() *Net {
	return &Net{names: map[string]string{}, cut: map[link]bool{}, delay: map[link]time.Duration{},
		change: make(chan struct{}), dials: map[string]int{}}
}

// Register names the node listening at addr.
func (nt *Net) Register(name, addr string) {
	nt.mu.Lock()
	nt.names[addr] = name
	nt.mu.Unlock()
}

func (nt *Net) changed() {
	close(nt.change)
	nt.change = make(chan struct{})
}

// Drop stops every byte from `from` to `to` (one direction).
func (nt *Net) Drop(from, to string) {
	nt.mu.Lock()
	nt.cut[link{from, to}] = true
	nt.changed()
	nt.mu.Unlock()
}

// Partition drops both directions between every node of a and every node
// of b.
func (nt *Net) Partition(a, b []string) {
	nt.mu.Lock()
	for _, x := range a {
		for _, y := range b {
			nt.cut[link{x, y}] = true
			nt.cut[link{y, x}] = true
		}
	}
	nt.changed()
	nt.mu.Unlock()
}

// Delay makes each write from `from` to `to` arrive d later (0: none).
func (nt *Net) Delay(from, to string, d time.Duration) {
	nt.mu.Lock()
	nt.delay[link{from, to}] = d
	nt.changed()
	nt.mu.Unlock()
}

// Heal undoes every Drop, Partition and Delay.
func (nt *Net) Heal() {
	nt.mu.Lock()
	clear(nt.cut)
	clear(nt.delay)
	nt.changed()
	nt.mu.Unlock()
}

// Dials counts the connections dialled to addr so far.
func (nt *Net) Dials(addr string) int {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	return nt.dials[addr]
}

// state is whether from->to is cut, its delay, and a channel closed at
// the next change.
func (nt *Net) state(from, to string) (bool, time.Duration, <-chan struct{}) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	return nt.cut[link{from, to}], nt.delay[link{from, to}], nt.change
}

// Dialer is node from's cluster.Options.Dial.
func (nt *Net) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nt.mu.Lock()
		nt.dials[addr]++
		to, known := nt.names[addr]
		nt.mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil || !known || to == from {
			return c, err
		}
		return &faultConn{Conn: c, nt: nt, local: from, remote: to, closed: make(chan struct{}), dl: make(chan struct{})}, nil
	}
}

// faultConn is the dialling side of a connection between two nodes.
type faultConn struct {
	net.Conn
	nt            *Net
	local, remote string

	closeOnce sync.Once
	closed    chan struct{}

	mu       sync.Mutex
	rdl, wdl time.Time
	dl       chan struct{} // closed and replaced when a deadline changes

	rmu     sync.Mutex // one Read at a time
	pending []byte     // read from the socket, held while remote->local is cut
	rbuf    []byte
}

// wait blocks while from->to is cut, within deadline (read or write) and
// until the conn closes; then it sleeps the link's delay.
func (c *faultConn) wait(from, to string, write bool) error {
	for {
		cut, delay, change := c.nt.state(from, to)
		c.mu.Lock()
		deadline, dlc := c.rdl, c.dl
		if write {
			deadline = c.wdl
		}
		c.mu.Unlock()
		var timer <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			if !cut && delay > d {
				delay = d
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timer = t.C
		}
		if !cut {
			if delay > 0 {
				select {
				case <-time.After(delay):
				case <-c.closed:
					return net.ErrClosed
				}
			}
			return nil
		}
		select {
		case <-change:
		case <-dlc:
		case <-timer:
			return os.ErrDeadlineExceeded
		case <-c.closed:
			return net.ErrClosed
		}
	}
}

func (c *faultConn) Write(p []byte) (int, error) {
	if err := c.wait(c.local, c.remote, true); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if len(c.pending) == 0 {
		if c.rbuf == nil {
			c.rbuf = make([]byte, 32<<10)
		}
		n, err := c.Conn.Read(c.rbuf)
		if n == 0 {
			return 0, err
		}
		c.pending = c.rbuf[:n]
	}
	if err := c.wait(c.remote, c.local, false); err != nil {
		return 0, err
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// NetConn is the socket under c (as tls.Conn's), for a peek that must
// not go through the fault injection.
func (c *faultConn) NetConn() net.Conn { return c.Conn }

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *faultConn) setDL(r, w *time.Time, t time.Time) {
	c.mu.Lock()
	if r != nil {
		*r = t
	}
	if w != nil {
		*w = t
	}
	close(c.dl)
	c.dl = make(chan struct{})
	c.mu.Unlock()
}

func (c *faultConn) SetDeadline(t time.Time) error {
	c.setDL(&c.rdl, &c.wdl, t)
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	c.setDL(&c.rdl, nil, t)
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.setDL(nil, &c.wdl, t)
	return c.Conn.SetWriteDeadline(t)
}
