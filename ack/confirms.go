package ack

import "sync"

// Confirms numbers a channel's publishes in confirm mode and releases their
// basic.ack/basic.nack in publish order: a message whose store write is
// still pending holds back the confirms of later ones, so that runs of acks
// go out as one basic.ack with multiple set. It is safe for concurrent use:
// Resolve is called from the channel and from the store's committer.
type Confirms struct {
	mu    sync.Mutex
	next  uint64  // last sequence number assigned
	base  uint64  // sequence number of state[0]
	state []uint8 // outcome of base, base+1, ...: pending, acked, nacked
	// send emits one confirm; it is called with the lock held, in order.
	send func(tag uint64, multiple, nack bool)
}

const (
	pending uint8 = iota
	acked
	nacked
)

// NewConfirms returns a tracker that emits confirms through send.
func NewConfirms(send func(tag uint64, multiple, nack bool)) *Confirms {
	return &Confirms{send: send, base: 1}
}

// Next assigns the next publish sequence number.
func (c *Confirms) Next() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.state = append(c.state, pending)
	return c.next
}

// Resolve records the outcome of publish seq and emits every confirm that
// is now due.
func (c *Confirms) Resolve(seq uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := seq - c.base
	if seq < c.base || i >= uint64(len(c.state)) || c.state[i] != pending {
		return
	}
	if ok {
		c.state[i] = acked
	} else {
		c.state[i] = nacked
	}
	n := 0
	for n < len(c.state) && c.state[n] != pending {
		if c.state[n] == nacked {
			c.send(c.base+uint64(n), false, true)
			n++
			continue
		}
		run := n
		for n < len(c.state) && c.state[n] == acked {
			n++
		}
		c.send(c.base+uint64(n-1), n-run > 1, false)
	}
	if n > 0 {
		rest := copy(c.state, c.state[n:])
		c.state = c.state[:rest]
		c.base += uint64(n)
	}
}
