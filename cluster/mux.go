package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// The one listener of a node carries every inter-node connection. The
// handshake names each connection's channel: "rpc" goes to the RPC server
// (rpc.go), "raft" and "raftsnap/<group>" to the Raft groups' transports
// (raftmux.go). So the metadata group and one group per quorum queue
// share one port, one TLS setup and one secret, and every group's
// requests to a peer share one connection.

const channelRPC = "rpc"

// listen opens the node's listener (or takes Options.Listener).
func (n *Node) listen() error {
	ln := n.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.Listen); err != nil {
			return fmt.Errorf("cluster listener: %w", err)
		}
	}
	n.ln = ln
	return nil
}

// loadTLS reads the TLS files of cfg into server and client configs.
func loadTLS(c TLSConfig) (server, client *tls.Config, err error) {
	for _, f := range []struct{ field, path string }{{"TLS.Cert", c.Cert}, {"TLS.Key", c.Key}, {"TLS.CA", c.CA}} {
		if _, err := os.Stat(f.path); err != nil {
			return nil, nil, &ConfigError{f.field, f.path, "want a readable PEM file: " + err.Error()}
		}
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, nil, &ConfigError{"TLS.Cert", c.Cert, "want a PEM certificate that matches the key " + c.Key + ": " + err.Error()}
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, nil, &ConfigError{"TLS.CA", c.CA, "want a readable PEM file: " + err.Error()}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, &ConfigError{"TLS.CA", c.CA, "want PEM CA certificates: none in it"}
	}
	// The peer's chain is verified against the CA by hand: host names are
	// not checked (TLSConfig's comment says why).
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the peer presented no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		})
		return err
	}
	server = &tls.Config{
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: verify,
		MinVersion:       tls.VersionTLS12,
	}
	client = &tls.Config{
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, // verified by VerifyConnection, without host names
		VerifyConnection:   verify,
		MinVersion:         tls.VersionTLS12,
	}
	return server, client, nil
}

// acceptLoop accepts connections until the listener closes; each is
// handled by its own goroutine, counted in n.wg.
func (n *Node) acceptLoop() {
	defer n.wg.Done()
	var delay time.Duration
	for {
		c, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			n.log.Warn().Err(err).Dur("retry_in", delay).Msg("cluster accept failed")
			select {
			case <-time.After(delay):
			case <-n.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		if !n.track(c) {
			c.Close()
			return
		}
		n.wg.Add(1)
		go n.handleConn(c)
	}
}

// track adds c to the connections Close closes; false once closing.
func (n *Node) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Node) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

// handleConn runs the acceptor's handshake on c and hands it to its
// channel.
func (n *Node) handleConn(raw net.Conn) {
	defer n.wg.Done()
	c := raw
	_ = c.SetDeadline(time.Now().Add(n.timing.IOTimeout))
	if n.tlsServer != nil {
		tc := tls.Server(c, n.tlsServer)
		if err := tc.HandshakeContext(n.ctx); err != nil {
			n.refusals.log(n.log.Warn(), raw.RemoteAddr().String(), "").Err(err).Msg("cluster connection refused: TLS handshake failed")
			n.untrack(raw)
			raw.Close()
			return
		}
		c = tc
	}
	var snap *GroupTransport
	p, channel, err := serverHandshake(c, n.secret, n.self(), func(ch string) string {
		if ch == channelRPC || ch == channelRaft {
			return ""
		}
		if g, ok := strings.CutPrefix(ch, channelSnapshot); ok {
			if snap = n.groupTransport(g); snap != nil {
				return ""
			}
			return fmt.Sprintf("no Raft group %q on node %s", g, n.cfg.NodeName)
		}
		return fmt.Sprintf("unknown channel %q", ch)
	})
	if err != nil {
		var rf *refusal
		if errors.As(err, &rf) {
			n.refusals.log(n.log.Warn(), raw.RemoteAddr().String(), p.name).Str("reason", rf.Error()).Msg("cluster connection refused")
		} else if n.ctx.Err() == nil {
			n.log.Debug().Err(err).Str("remote", raw.RemoteAddr().String()).Msg("cluster handshake failed")
		}
		n.untrack(raw)
		raw.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	n.sawPeer(p)
	switch channel {
	case channelRPC:
		n.serveRPC(c, p)
	case channelRaft:
		n.serveRaft(c, p)
	default:
		n.serveSnapshot(c, p, snap)
		n.untrack(raw)
		c.Close()
		return
	}
	n.untrack(raw)
	c.Close()
	n.connLost(p.name)
}

// trackedConn leaves the node's connection set when closed.
type trackedConn struct {
	net.Conn
	once sync.Once
	done func()
}

// NetConn is the connection c tracks (peerClosed looks through it).
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

func (c *trackedConn) Close() error {
	c.once.Do(c.done)
	return c.Conn.Close()
}

// dial opens a connection to addr for channel and runs the dialler's
// handshake, within ctx (and at most Timing.IOTimeout).
func (n *Node) dial(ctx context.Context, addr, channel string) (net.Conn, peer, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timing.IOTimeout)
	defer cancel()
	raw, err := n.opts.Dial(ctx, addr)
	if err != nil {
		return nil, peer{}, err
	}
	c := raw
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Now()) })
	defer stop()
	if n.tlsClient != nil {
		tc := tls.Client(c, n.tlsClient)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			n.refusals.log(n.log.Warn(), addr, "").Err(err).Msg("cluster connection refused: TLS handshake failed")
			return nil, peer{}, fmt.Errorf("%w: TLS handshake with %s: %v", ErrRefused, addr, err)
		}
		c = tc
	}
	p, err := clientHandshake(c, n.secret, n.self(), channel)
	if err != nil {
		raw.Close()
		var oe *net.OpError
		if n.tlsClient != nil && errors.As(err, &oe) && oe.Op == "remote error" {
			// TLS 1.3: the peer refuses this node's certificate after the
			// client's side of the handshake is done, with an alert read
			// here.
			n.refusals.log(n.log.Warn(), addr, "").Err(err).Msg("cluster connection refused: TLS handshake failed")
			return nil, p, fmt.Errorf("%w: TLS handshake with %s: %v", ErrRefused, addr, err)
		}
		var rf *refusal
		if errors.As(err, &rf) {
			n.refusals.log(n.log.Warn(), addr, p.name).Str("reason", rf.Error()).Msg("cluster connection refused")
			return nil, p, fmt.Errorf("cluster connection to %s: %w", addr, err)
		}
		return nil, p, fmt.Errorf("cluster handshake with %s: %w", addr, err)
	}
	if !stop() {
		raw.Close()
		return nil, p, ctx.Err()
	}
	_ = c.SetDeadline(time.Time{})
	if p.name == n.cfg.NodeName && p.instance != n.instance {
		c.Close()
		return nil, p, fmt.Errorf("cluster: %s is another node named %s, as this one: node names must be unique", addr, p.name)
	}
	n.sawPeer(p)
	// Tracked as accepted ones are: Close closes the connections of
	// every group's pool too (a NetworkTransport's Close leaves them).
	if !n.track(raw) {
		c.Close()
		return nil, p, ErrClosed
	}
	return &trackedConn{Conn: c, done: func() { n.untrack(raw) }}, p, nil
}
