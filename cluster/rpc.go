package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// The RPC channel: request/response between nodes, a method name and
// bytes each way. A connection carries one call at a time; idle ones are
// pooled per address. Frames:
//
//	request   u32 length, u8 method length, method, body
//	response  u32 length, u8 status, body (status 0) or error text
//
// A length is checked against MaxRPCSize before anything is allocated.

// MaxRPCSize is the largest request or response body.
const MaxRPCSize = 64 << 20

// Handler serves one RPC method: from is the calling node's name. It runs
// on the goroutine of the caller's connection; an error goes back to the
// caller as a *RemoteError.
type Handler func(ctx context.Context, from string, req []byte) ([]byte, error)

// Response statuses.
const (
	rpcOK        = 0
	rpcError     = 1
	rpcNoMethod  = 2
	rpcNotLeader = 3
)

// RemoteError is an error a remote handler returned (or the remote's
// refusal of an unknown method).
type RemoteError struct {
	Node, Method string
	Msg          string
	code         byte
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("cluster: %s on node %s: %s", e.Method, e.Node, e.Msg)
}

// Is makes errors.Is(err, ErrNotLeader) and ErrNoMethod hold for the
// remote's own.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrNotLeader:
		return e.code == rpcNotLeader
	case ErrNoMethod:
		return e.code == rpcNoMethod
	}
	return false
}

var (
	// ErrNoMethod: the remote node has no handler for the method.
	ErrNoMethod = errors.New("cluster: no such RPC method")
	// ErrNotLeader: the node asked is not the group's leader; nothing was
	// done.
	ErrNotLeader = errors.New("cluster: not the leader")
)

// Handle registers h for method (replacing any before it). Methods named
// "cluster.*" are this package's own.
func (n *Node) Handle(method string, h Handler) {
	n.mu.Lock()
	n.handlers[method] = h
	n.mu.Unlock()
}

// serveRPC answers requests on c, one at a time, until it closes.
func (n *Node) serveRPC(c net.Conn, p peer) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		method, body, err := readFrame(r, true)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && n.ctx.Err() == nil {
				n.log.Debug().Err(err).Str("peer_node", p.name).Msg("cluster RPC connection ended")
			}
			return
		}
		n.mu.Lock()
		h := n.handlers[method]
		n.mu.Unlock()
		status, out := byte(rpcOK), []byte(nil)
		if h == nil {
			status, out = rpcNoMethod, []byte("no handler for "+method)
		} else if res, err := h(n.ctx, p.name, body); err != nil {
			status, out = rpcError, []byte(err.Error())
			if errors.Is(err, ErrNotLeader) {
				status = rpcNotLeader
			}
		} else {
			out = res
		}
		if len(out) > MaxRPCSize {
			status, out = rpcError, fmt.Appendf(nil, "response of %d bytes: over %d", len(out), MaxRPCSize)
		}
		if err := writeFrame(w, []byte{status}, out); err != nil {
			return
		}
	}
}

// readFrame reads one frame: a request (method and body) or a response
// (status as method[0], and body).
func readFrame(r *bufio.Reader, request bool) (string, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size < 1 {
		return "", nil, errors.New("cluster RPC: empty frame")
	}
	head := 1
	var method []byte
	if request {
		m := int(hdr[4])
		if uint32(m)+1 > size {
			return "", nil, errors.New("cluster RPC: method longer than its frame")
		}
		method = make([]byte, m)
		if _, err := io.ReadFull(r, method); err != nil {
			return "", nil, err
		}
		head += m
	} else {
		method = hdr[4:5:5]
	}
	n := size - uint32(head)
	if n > MaxRPCSize {
		return "", nil, fmt.Errorf("cluster RPC: body of %d bytes: over %d", n, MaxRPCSize)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", nil, err
	}
	return string(method), body, nil
}

// writeFrame writes head (a request's length-prefixed method, or a
// response's status) and body as one frame.
func writeFrame(w *bufio.Writer, head, body []byte) error {
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(head)+len(body)))
	w.Write(l[:])
	w.Write(head)
	w.Write(body)
	return w.Flush()
}

// rpcConn is a pooled client connection of the RPC channel.
type rpcConn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	name string // the peer's node name
}

// rpcPool keeps idle RPC connections per address.
type rpcPool struct {
	mu   sync.Mutex
	idle map[string][]*rpcConn
}

const maxIdleRPC = 2

// get takes an idle connection to addr that has not ended, nil if none.
func (p *rpcPool) get(addr string) *rpcConn {
	for {
		p.mu.Lock()
		l := p.idle[addr]
		if len(l) == 0 {
			p.mu.Unlock()
			return nil
		}
		c := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		p.mu.Unlock()
		if !c.stale() {
			return c
		}
		c.c.Close()
	}
}

func (p *rpcPool) put(addr string, c *rpcConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		return false // closed
	}
	if len(p.idle[addr]) >= maxIdleRPC {
		return false
	}
	p.idle[addr] = append(p.idle[addr], c)
	return true
}

func (p *rpcPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.idle {
		for _, c := range l {
			c.c.Close()
		}
	}
	p.idle = nil
}

// CallAddr calls method on the node listening at addr with req and
// returns its response. Without a deadline in ctx a call is bounded by
// Timing.IOTimeout. A handler's error is a *RemoteError.
func (n *Node) CallAddr(ctx context.Context, addr, method string, req []byte) ([]byte, error) {
	if len(method) > 255 || len(req) > MaxRPCSize {
		return nil, fmt.Errorf("cluster: call %s: method over 255 bytes or body over %d", method, MaxRPCSize)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.timing.IOTimeout)
		defer cancel()
	}
	c := n.pool.get(addr)
	pooled := c != nil
	for {
		if c == nil {
			nc, p, err := n.dial(ctx, addr, channelRPC)
			if err != nil {
				return nil, &NotSentError{Addr: addr, Err: err}
			}
			c = &rpcConn{c: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), name: p.name}
		}
		status, body, sent, err := c.call(ctx, method, req)
		if err == nil {
			if !n.pool.put(addr, c) {
				c.c.Close()
			}
			if status != rpcOK {
				return nil, &RemoteError{Node: c.name, Method: method, Msg: string(body), code: status}
			}
			return body, nil
		}
		c.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("cluster: %s on %s: %w", method, addr, cerr)
		} else if pastDeadline(ctx, err) {
			return nil, fmt.Errorf("cluster: %s on %s: %w", method, addr, context.DeadlineExceeded)
		}
		if pooled && !sent && closedByPeer(err) {
			// An idle connection the peer closed (it restarted) while the
			// request was written: it did not reach a handler; again on a
			// new one. Once the request is written it may have been
			// handled (the peer died before its answer): never sent
			// again, so that a call that is not idempotent (a publish, a
			// delivery) takes effect at most once; the caller decides.
			c, pooled = nil, false
			continue
		}
		return nil, fmt.Errorf("cluster: %s on %s: %w", method, addr, err)
	}
}

// call makes one call on c within ctx; sent is whether the request was
// written whole.
func (c *rpcConn) call(ctx context.Context, method string, req []byte) (status byte, body []byte, sent bool, err error) {
	dl, _ := ctx.Deadline()
	_ = c.c.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Now()) })
	head := append([]byte{byte(len(method))}, method...)
	err = writeFrame(c.w, head, req)
	var st string
	if err == nil {
		sent = true
		st, body, err = readFrame(c.r, false)
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return 0, nil, sent, err
	}
	_ = c.c.SetDeadline(time.Time{})
	return st[0], body, true, nil
}

// stale reports whether the idle connection c has ended (the peer closed
// it: it restarted), so it is not used. A response that never came is
// not waiting on it: a call that fails closes its connection.
func (c *rpcConn) stale() bool { return c.r.Buffered() > 0 || peerClosed(c.c) }

// closedByPeer: err says the peer had closed the connection before any of
// the response arrived.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Call calls method on the member named node (its address from the
// metadata group's configuration); see CallAddr.
func (n *Node) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	addr, ok := n.memberAddr(node)
	if !ok {
		return nil, fmt.Errorf("cluster: call %s: %w: %s", method, ErrUnknownNode, node)
	}
	return n.CallAddr(ctx, addr, method, req)
}

// ErrUnknownNode: the name is not a member of the cluster.
var ErrUnknownNode = errors.New("cluster: no such node")

// pastDeadline reports whether err is the I/O timeout of ctx's deadline,
// which a connection given that deadline reports a moment before ctx.
func pastDeadline(ctx context.Context, err error) bool {
	var ne net.Error
	dl, ok := ctx.Deadline()
	return ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl)
}

// NotSentError: a call's connection could not be opened (the node is
// down, unreachable, or refused this one), so the request was not sent.
type NotSentError struct {
	Addr string
	Err  error
}

func (e *NotSentError) Error() string { return "cluster: not sent to " + e.Addr + ": " + e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }
