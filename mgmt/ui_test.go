package mgmt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestUIFiles: the UI is served at / and /ui/ from the binary, without
// authentication, with a Content-Security-Policy that keeps it to its own
// origin and forbids framing; only GET and HEAD; nothing outside ui/.
func TestUIFiles(t *testing.T) {
	e := start(t)
	get := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get(http.MethodGet, "/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<script type="module" src="/ui/js/app.js">`) {
		t.Fatalf("GET /: %d %.80q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET / Content-Type %q", ct)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers: %v", resp.Header)
	}
	for path, ct := range map[string]string{
		"/ui/js/app.js": "text/javascript; charset=utf-8", "/ui/css/warren.css": "text/css; charset=utf-8",
		"/ui/favicon.svg": "image/svg+xml", "/index.html": "text/html; charset=utf-8",
	} {
		resp, body := get(http.MethodGet, path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ct || body == "" {
			t.Errorf("GET %s: %d %q (%d bytes)", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	for _, path := range []string{"/ui/nope.js", "/ui/../ui.go", "/ui/%2e%2e/ui.go", "/ui/", "/ui/js", "/ui.go", "/favicon.ico"} {
		if resp, _ := get(http.MethodGet, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	if resp, body := get(http.MethodHead, "/ui/js/api.js"); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(http.MethodPost, "/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", resp.StatusCode)
	}
	// The API is still behind authentication.
	if resp, _ := get(http.MethodGet, "/api/overview"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/overview without credentials: %d", resp.StatusCode)
	}
}

// TestPagingLargeList pages, filters and sorts 2,000 queues by a top-level
// field and by a nested message_stats field, reading the items in place.
func TestPagingLargeList(t *testing.T) {
	e := start(t)
	a, err := e.broker.OpenAdmin("guest", "/")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 2000 {
		if err := a.DeclareQueue(server.QueueDecl{Name: fmt.Sprintf("big-%04d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		for range i + 1 {
			if _, err := a.Publish("", fmt.Sprintf("big-%04d", 10*i+5), amqp.Properties{}, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	type item struct {
		Name     string `json:"name"`
		Messages int    `json:"messages"`
	}
	var p struct {
		FilteredCount int    `json:"filtered_count"`
		TotalCount    int    `json:"total_count"`
		PageCount     int    `json:"page_count"`
		ItemCount     int    `json:"item_count"`
		Items         []item `json:"items"`
	}
	e.getJSON("/api/queues/%2F?page=3&page_size=500&sort=name", &p)
	if p.TotalCount != 2000 || p.PageCount != 4 || p.ItemCount != 500 || p.Items[0].Name != "big-1000" || p.Items[499].Name != "big-1499" {
		t.Errorf("page 3 by name: total %d pages %d items %d first %q last %q", p.TotalCount, p.PageCount, p.ItemCount, p.Items[0].Name, p.Items[len(p.Items)-1].Name)
	}
	e.getJSON("/api/queues/%2F?page=1&page_size=3&sort=messages&sort_reverse=true", &p)
	if got := fmt.Sprint(p.Items); got != "[{big-0025 3} {big-0015 2} {big-0005 1}]" {
		t.Errorf("by messages, reversed: %s", got)
	}
	e.getJSON("/api/queues/%2F?page=1&page_size=2&sort=message_stats.publish&sort_reverse=true&name=big-00.5$&use_regex=true", &p)
	if p.FilteredCount != 10 || fmt.Sprint(p.Items) != "[{big-0025 3} {big-0015 2}]" {
		t.Errorf("regex filter, nested sort: %d %v", p.FilteredCount, p.Items)
	}
}

// TestChannelModesAndTLS: what the UI's connection and channel pages show
// comes from the API: a channel's confirm and tx mode, and a connection's
// TLS protocol and cipher (null without TLS, as RabbitMQ sends them).
func TestChannelModesAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSignedCert(t, dir)
	broker := servertest.StartBroker(t, server.Config{
		TLSListen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile,
	})
	b := broker.Server()
	m := mgmt.New(b, mgmt.Options{Listen: "127.0.0.1:0"})
	if err := m.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{t: t, broker: b, amqp: broker.URL(), base: "http://" + m.Addr().String()}

	plain, err := amqp091.Dial(e.amqp)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	tlsConn, err := amqp091.DialTLS("amqps://guest:guest@"+b.TLSAddr().String()+"/", &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsConn.Close()
	// The API lists channels that have consumers.
	consume := func(c *amqp091.Connection, mode string) {
		t.Helper()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		switch mode {
		case "confirm":
			err = ch.Confirm(false)
		case "tx":
			err = ch.Tx()
		}
		if err != nil {
			t.Fatal(err)
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Consume(q.Name, mode, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	consume(plain, "confirm")
	consume(plain, "tx")
	consume(tlsConn, "none")

	var chans []struct {
		User          string `json:"user"`
		Confirm       bool   `json:"confirm"`
		Transactional bool   `json:"transactional"`
		Consumers     int    `json:"consumer_count"`
	}
	e.getJSON("/api/channels", &chans)
	got := map[string]int{}
	for _, c := range chans {
		switch {
		case c.Confirm && !c.Transactional:
			got["confirm"]++
		case c.Transactional && !c.Confirm:
			got["tx"]++
		case !c.Confirm && !c.Transactional:
			got["none"]++
		}
	}
	if got["confirm"] != 1 || got["tx"] != 1 || got["none"] != 1 || len(chans) != 3 {
		t.Errorf("channel modes: %+v", chans)
	}

	var conns []map[string]any
	e.getJSON("/api/connections", &conns)
	var sawTLS, sawPlain bool
	for _, c := range conns {
		if c["ssl"] == true {
			sawTLS = true
			if p, _ := c["ssl_protocol"].(string); !strings.HasPrefix(p, "tlsv1.") {
				t.Errorf("ssl_protocol %v", c["ssl_protocol"])
			}
			if s, _ := c["ssl_cipher"].(string); !strings.HasPrefix(s, "TLS_") {
				t.Errorf("ssl_cipher %v", c["ssl_cipher"])
			}
			if c["peer_cert_subject"] != nil {
				t.Errorf("peer_cert_subject without a client certificate: %v", c["peer_cert_subject"])
			}
		} else {
			sawPlain = true
			if c["ssl_protocol"] != nil || c["ssl_cipher"] != nil {
				t.Errorf("plain connection with TLS fields: %v %v", c["ssl_protocol"], c["ssl_cipher"])
			}
		}
	}
	if !sawTLS || !sawPlain {
		t.Errorf("connections: %v", conns)
	}
}

// selfSignedCert writes a certificate and key for 127.0.0.1 into dir.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
