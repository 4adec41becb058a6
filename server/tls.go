package server

// The amqps listener and the EXTERNAL authentication mechanism.
//
// The TLS listener accepts raw TCP connections and wraps each in a
// *tls.Conn; the TLS handshake runs on the connection's own goroutine under
// the handshake timeout (conn.tlsHandshake), so a slow or hostile client
// never holds up the accept loop. Client certificates are requested when
// Config.TLSCA is set and verified against it if given
// (tls.VerifyClientCertIfGiven): password logins keep working over TLS, as
// with RabbitMQ's fail_if_no_peer_cert = false. A connection that presented
// a verified certificate is offered EXTERNAL, whose user is the
// certificate subject's Common Name (RabbitMQ's rabbitmq_auth_mechanism_ssl
// with ssl_cert_login_from = common_name).

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/warrenmq/warren/amqp"
)

// mechExternal is the SASL mechanism a client picks to log in with its TLS
// client certificate.
const mechExternal = "EXTERNAL"

// newTLSConfig builds the amqps listener's TLS configuration from cfg, or
// returns nil when cfg.TLSListen is empty (no TLS listener). Validate has
// checked that a TLS listener has a certificate and a key.
func newTLSConfig(cfg *Config) (*tls.Config, error) {
	if cfg.TLSListen == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
	}
	tc := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if cfg.TLSCA != "" {
		pem, err := os.ReadFile(cfg.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in the file", cfg.TLSCA)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// listenTLS opens the amqps listener when one is configured.
func (s *Server) listenTLS() error {
	if s.tlsCfg == nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.TLSListen)
	if err != nil {
		return fmt.Errorf("TLS listener: %w", err)
	}
	s.tlsLn = ln
	return nil
}

// TLSAddr is the amqps listener's address once Listen has returned, or nil
// when no TLS listener is configured.
func (s *Server) TLSAddr() net.Addr {
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

// tlsHandshake runs the TLS handshake of a connection accepted on the amqps
// listener; it does nothing for a plain connection. The caller has set the
// handshake deadline. Reader goroutine only.
func (c *conn) tlsHandshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	if err := tc.Handshake(); err != nil {
		// A port scanner, a plain AMQP client on the amqps port, an old
		// TLS version or an unverifiable client certificate.
		ev := c.log.Info()
		if errors.Is(err, io.EOF) {
			ev = c.log.Debug()
		}
		ev.Err(err).Msg("TLS handshake failed")
		return err
	}
	st := tc.ConnectionState()
	ev := c.log.Debug().Str("tls_version", tls.VersionName(st.Version)).Str("cipher", tls.CipherSuiteName(st.CipherSuite))
	if cn, ok := c.peerCommonName(); ok {
		ev = ev.Str("peer_cn", cn)
	}
	ev.Msg("TLS handshake done")
	return nil
}

// peerCommonName is the subject Common Name of the client certificate the
// TLS handshake verified; ok is false for a plain connection or one without
// a verified client certificate.
func (c *conn) peerCommonName() (cn string, ok bool) {
	tc, isTLS := c.nc.(*tls.Conn)
	if !isTLS {
		return "", false
	}
	st := tc.ConnectionState()
	if !st.HandshakeComplete || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return "", false
	}
	return st.PeerCertificates[0].Subject.CommonName, true
}

// mechanisms is the space-separated list connection.start offers: EXTERNAL
// as well when the client presented a verified certificate.
func (c *conn) mechanisms() string {
	if _, ok := c.peerCommonName(); ok {
		return "AMQPLAIN PLAIN " + mechExternal
	}
	return "AMQPLAIN PLAIN"
}

// externalCredentials is the user an EXTERNAL login names: the verified
// client certificate's Common Name. The client's response is ignored, as
// RabbitMQ does. Without a verified certificate EXTERNAL was not offered
// and is an unknown mechanism, as in credentials.
func (c *conn) externalCredentials() (user string, err error) {
	cn, ok := c.peerCommonName()
	if !ok {
		return "", amqp.Errorf(amqp.CommandInvalid, amqp.ClassConnection, amqp.MethodConnectionStartOk, "unknown authentication mechanism '%s'", mechExternal)
	}
	return cn, nil
}

// externalUser reports whether name, taken from a verified client
// certificate, is a user allowed to log in with EXTERNAL: the user must
// exist; no password is checked.
func (s *Server) externalUser(name string) bool {
	_, ok := s.auth.User(name)
	return ok
}
