package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1, its
// files written to a temporary directory.
type testPKI struct {
	t                 *testing.T
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
	pool              *x509.CertPool
	certFile, keyFile string
	caFile            string
	serial            int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{t: t, pool: x509.NewCertPool()}
	p.ca, p.caKey = p.issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "warren test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil, nil)
	p.pool.AddCert(p.ca)
	srv, srvKey := p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ca, p.caKey)
	dir := t.TempDir()
	p.certFile = filepath.Join(dir, "server.pem")
	p.keyFile = filepath.Join(dir, "server.key")
	p.caFile = filepath.Join(dir, "ca.pem")
	writePEM(t, p.certFile, "CERTIFICATE", srv.Raw)
	writePEM(t, p.keyFile, "PRIVATE KEY", marshalKey(t, srvKey))
	writePEM(t, p.caFile, "CERTIFICATE", p.ca.Raw)
	return p
}

// issue signs tmpl with parent (self-signed when parent is nil).
func (p *testPKI) issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return cert, key
}

// clientCert is a client certificate with Common Name cn signed by the CA.
func (p *testPKI) clientCert(cn string) tls.Certificate {
	p.t.Helper()
	cert, key := p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"warren tests"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca, p.caKey)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// client is a TLS client configuration trusting the CA, with the given
// client certificates.
func (p *testPKI) client(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// startTLS runs a broker with an amqps listener on a random port and
// returns the listener's HOST:PORT. withCA turns client certificate
// verification on.
func startTLS(t *testing.T, p *testPKI, withCA bool, cfg server.Config) (*servertest.Broker, string) {
	t.Helper()
	cfg.TLSListen = "127.0.0.1:0"
	cfg.TLSCert, cfg.TLSKey = p.certFile, p.keyFile
	if withCA {
		cfg.TLSCA = p.caFile
	}
	b := servertest.StartBroker(t, cfg)
	srv := b.Server()
	if srv.TLSAddr() == nil {
		t.Fatal("no TLS listener")
	}
	return b, srv.TLSAddr().String()
}

// roundTrip publishes one message on conn and gets it back.
func roundTrip(t *testing.T, conn *amqp091.Connection) {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("over TLS")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d, ok, err := ch.Get(q.Name, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if string(d.Body) != "over TLS" {
				t.Fatalf("got %q", d.Body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("message not delivered")
		}
	}
}

func externalConfig(tc *tls.Config) amqp091.Config {
	return amqp091.Config{TLSClientConfig: tc, SASL: []amqp091.Authentication{&amqp091.ExternalAuth{}}}
}

// TestTLSPlainLogin checks a password login over amqps, with and without a
// client certificate, and that TLS 1.2 or later was negotiated.
func TestTLSPlainLogin(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startTLS(t, p, true, server.Config{})
	for name, tc := range map[string]*tls.Config{
		"no client cert":   p.client(),
		"with client cert": p.client(p.clientCert("guest")),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := amqp091.DialTLS("amqps://guest:guest@"+addr+"/", tc)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if v := conn.ConnectionState().Version; v < tls.VersionTLS12 {
				t.Fatalf("negotiated %s", tls.VersionName(v))
			}
			roundTrip(t, conn)
		})
	}
	// A wrong password over TLS is refused as over plain TCP.
	_, err := amqp091.DialTLS("amqps://guest:nope@"+addr+"/", p.client())
	if code := amqpCode(err); code != 403 {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestTLSExternal logs in with the client certificate: its Common Name is
// the user.
func TestTLSExternal(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startTLS(t, p, true, server.Config{})
	conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", p.client(p.clientCert("guest")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn)

	// The same through Config.SASL.
	conn2, err := amqp091.DialConfig("amqps://"+addr+"/", externalConfig(p.client(p.clientCert("guest"))))
	if err != nil {
		t.Fatal(err)
	}
	conn2.Close()
}

// TestTLSExternalUnknownUser: a verified certificate naming no user is
// refused with 403 ACCESS_REFUSED, like a wrong password.
func TestTLSExternalUnknownUser(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startTLS(t, p, true, server.Config{})
	_, err := amqp091.DialConfig("amqps://"+addr+"/", externalConfig(p.client(p.clientCert("mallory"))))
	if errors.Is(err, amqp091.ErrSASL) {
		t.Fatalf("EXTERNAL was not offered: %v", err)
	}
	if code := amqpCode(err); code != 403 {
		t.Fatalf("want 403, got %v", err)
	}
	// The broker keeps serving.
	conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", p.client(p.clientCert("guest")))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestTLSExternalNotOffered: EXTERNAL is offered only to a connection with
// a verified client certificate.
func TestTLSExternalNotOffered(t *testing.T) {
	p := newTestPKI(t)
	t.Run("no client cert", func(t *testing.T) {
		_, addr := startTLS(t, p, true, server.Config{})
		_, err := amqp091.DialConfig("amqps://"+addr+"/", externalConfig(p.client()))
		if !errors.Is(err, amqp091.ErrSASL) {
			t.Fatalf("want ErrSASL, got %v", err)
		}
	})
	t.Run("no CA configured", func(t *testing.T) {
		// Without --tls-ca no certificate is asked for, so none is verified.
		_, addr := startTLS(t, p, false, server.Config{})
		_, err := amqp091.DialConfig("amqps://"+addr+"/", externalConfig(p.client(p.clientCert("guest"))))
		if !errors.Is(err, amqp091.ErrSASL) {
			t.Fatalf("want ErrSASL, got %v", err)
		}
		conn, err := amqp091.DialTLS("amqps://guest:guest@"+addr+"/", p.client())
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
	})
}

// TestTLSUntrustedClientCert: a client certificate from another CA fails
// the TLS handshake.
func TestTLSUntrustedClientCert(t *testing.T) {
	p := newTestPKI(t)
	other := newTestPKI(t)
	_, addr := startTLS(t, p, true, server.Config{})
	conn, err := amqp091.DialTLS("amqps://guest:guest@"+addr+"/", p.client(other.clientCert("guest")))
	if err == nil {
		conn.Close()
		t.Fatal("a certificate from an unknown CA was accepted")
	}
}

// TestTLSOldVersionRefused: a client limited to TLS 1.1 cannot connect.
func TestTLSOldVersionRefused(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startTLS(t, p, true, server.Config{})
	tc := p.client()
	tc.MinVersion, tc.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tc)
	if err == nil {
		c.Close()
		t.Fatalf("TLS 1.1 handshake succeeded")
	}
	t.Logf("TLS 1.1 refused: %v", err)
	tc.MinVersion, tc.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	c, err = tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatalf("TLS 1.2: %v", err)
	}
	c.Close()
}

// TestTLSPortPlainClient: plain AMQP, garbage and silence on the amqps port
// are dropped without harm, no goroutine is left behind, and the broker
// keeps serving both listeners.
func TestTLSPortPlainClient(t *testing.T) {
	p := newTestPKI(t)
	b := servertest.StartBroker(t, server.Config{
		TLSListen: "127.0.0.1:0", TLSCert: p.certFile, TLSKey: p.keyFile, TLSCA: p.caFile,
		HandshakeTimeout: 500 * time.Millisecond,
	})
	srv, url := b.Server(), b.URL()
	addr := srv.TLSAddr().String()
	// Serve starts its accept loops and the alarm monitor on its own
	// goroutine: count once the number has settled.
	before := runtime.NumGoroutine()
	for settled := 0; settled < 10; settled++ {
		time.Sleep(20 * time.Millisecond)
		if n := runtime.NumGoroutine(); n != before {
			before, settled = n, 0
		}
	}

	for _, input := range []string{"AMQP\x00\x00\x09\x01", "GET / HTTP/1.0\r\n\r\n", ""} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if input != "" {
			if _, err := nc.Write([]byte(input)); err != nil {
				t.Fatal(err)
			}
		}
		// Silence is cut by the handshake timeout; the rest at once.
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, nc)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("input %q: connection left open", input)
		}
		nc.Close()
	}
	// A client that drops the TCP connection mid-handshake.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte{0x16, 0x03, 0x01})
	nc.Close()

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}

	conn, err := amqp091.DialTLS("amqps://guest:guest@"+addr+"/", p.client())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, conn)
	conn.Close()
	plain, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	plain.Close()
}

// TestTLSShutdown: stopping the broker closes the amqps listener and its
// connections (320 CONNECTION_FORCED).
func TestTLSShutdown(t *testing.T) {
	p := newTestPKI(t)
	b, addr := startTLS(t, p, true, server.Config{})
	conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", p.client(p.clientCert("guest")))
	if err != nil {
		t.Fatal(err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	b.Stop()
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("closed with %v, want 320", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed by shutdown")
	}
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("amqps listener still open after shutdown")
	}
}

// TestTLSConfigErrors: bad certificate, key or CA paths fail New with an
// error naming the file.
func TestTLSConfigErrors(t *testing.T) {
	p := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name          string
		cert, key, ca string
		want          string
	}{
		{"no cert", "", p.keyFile, "", "certificate and a key"},
		{"missing cert", missing, p.keyFile, "", missing},
		{"missing key", p.certFile, missing, "", missing},
		{"key is not a key", p.certFile, p.certFile, "", p.certFile},
		{"missing CA", p.certFile, p.keyFile, missing, missing},
		{"CA is not a certificate", p.certFile, p.keyFile, p.keyFile, p.keyFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := server.New(server.Config{
				DataDir:   t.TempDir(),
				TLSListen: "127.0.0.1:0", TLSCert: tc.cert, TLSKey: tc.key, TLSCA: tc.ca,
			})
			if err == nil {
				srv.Close()
				t.Fatal("New accepted a bad TLS configuration")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// amqpCode is the reply code of an *amqp091.Error, or 0.
func amqpCode(err error) int {
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}
