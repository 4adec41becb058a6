package server

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Limits that keep one client from exhausting the broker. The vhost's
// max-connections and max-queues are in access.go.

// refusedLog rate-limits the log line for connections refused at the
// global limit: a flood must not become a flood of log lines.
type refusedLog struct {
	last    atomic.Int64 // unix nanoseconds of the last line
	skipped atomic.Int64
}

func (r *refusedLog) note(s *Server, peer net.Addr) {
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(time.Second) || !r.last.CompareAndSwap(last, now) {
		r.skipped.Add(1)
		return
	}
	s.log.Warn().Str("peer", peer.String()).Int("limit", s.cfg.MaxConnections).
		Int64("refused_since_last_line", r.skipped.Swap(0)+1).
		Msg("connection refused: the broker's connection limit is reached")
}

// admitSocket reports whether a new socket may become a connection under
// Config.MaxConnections; a refused socket is closed at once, before any
// buffer or goroutine is spent on it. s.connsMu must be held.
func (s *Server) admitSocket(nc net.Conn) bool {
	if s.cfg.MaxConnections <= 0 || len(s.conns) < s.cfg.MaxConnections {
		return true
	}
	s.refused.note(s, nc.RemoteAddr())
	return false
}

// admitUser refuses a connection over the user's max-connections limit,
// with RabbitMQ's 530 and text.
func (c *conn) admitUser() *amqp.Error {
	u, _ := c.srv.auth.User(c.user)
	limit, ok := u.Limits["max-connections"]
	if !ok {
		return nil
	}
	n := 0
	c.srv.connsMu.Lock()
	for other := range c.srv.conns {
		if info := other.info.Load(); info != nil && info.User == c.user {
			n++
		}
	}
	c.srv.connsMu.Unlock()
	if int64(n) >= limit {
		return amqp.Errorf(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "Connection refused for user '%s': user connection limit (%d) is reached", c.user, limit)
	}
	return nil
}

// unackedFull reports whether the connection holds as many unacknowledged
// deliveries as Config.MaxUnackedPerConnection allows; consumers then get
// nothing more until some are settled, whatever their prefetch.
func (c *conn) unackedFull() bool {
	return c.unackedCount.Load() >= int64(c.srv.cfg.MaxUnackedPerConnection)
}

// unackedChanged adds delta to the connection's unacked count and, when
// that frees room under the cap, re-offers messages to its consumers. It
// must be called without channel locks held.
func (c *conn) unackedChanged(delta int) {
	if delta == 0 {
		return
	}
	n := c.unackedCount.Add(int64(delta))
	max := int64(c.srv.cfg.MaxUnackedPerConnection)
	if delta < 0 && n < max && n-int64(delta) >= max {
		c.kickConsumers()
	}
}

// outMaxBuffered is how many bytes may wait in a connection's outbound
// buffer before its reader stops taking frames: a client that sends
// requests without reading the replies is paced to its own reading speed
// instead of growing the broker's memory. Deliveries stop earlier, at
// outHighWater. Server.outMaxBuffered starts with it (tests lower it).
const outMaxBuffered = 16 << 20

// waitRoom blocks while more than limit bytes wait to be written, until
// the writer makes room, the outbox closes or quit is closed.
func (o *outbox) waitRoom(limit int, quit <-chan struct{}, fs *flushSet) error {
	for {
		o.mu.Lock()
		n, closed := len(o.buf), o.closed
		o.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		if n <= limit {
			return nil
		}
		if fs.pending() {
			// This outbox may be among the deferred ones.
			fs.flush()
			continue
		}
		select {
		case <-o.room:
		case <-o.flushed:
			return net.ErrClosed
		case <-quit:
			return errClosed
		}
	}
}

// admitChannel refuses channel.open over the user's max-channels limit,
// which counts the user's channels on all its connections, with RabbitMQ's
// connection-level 530.
func (c *conn) admitChannel() *amqp.Error {
	u, _ := c.srv.auth.User(c.user)
	limit, ok := u.Limits["max-channels"]
	if !ok {
		return nil
	}
	n := 0
	c.srv.connsMu.Lock()
	for other := range c.srv.conns {
		if info := other.info.Load(); info != nil && info.User == c.user {
			other.chanMu.Lock()
			n += len(other.channels)
			other.chanMu.Unlock()
		}
	}
	c.srv.connsMu.Unlock()
	if int64(n) >= limit {
		return amqp.Errorf(amqp.NotAllowed, 0, 0,
			"number of channels opened for user '%s' has reached the maximum allowed user limit of (%d)", c.user, limit)
	}
	return nil
}
