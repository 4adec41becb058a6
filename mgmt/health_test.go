package mgmt_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestHealthChecks: the probes' endpoints answer with RabbitMQ 3.10's
// status codes and bodies (checked against a RabbitMQ 3.10 broker).
func TestHealthChecks(t *testing.T) {
	e := start(t)
	_, amqpPort, _ := net.SplitHostPort(e.broker.ListenAddr())
	_, httpPort, _ := net.SplitHostPort(strings.TrimPrefix(e.base, "http://"))
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/api/health/checks/port-listener/" + amqpPort, 200, `{"port":` + amqpPort + `,"status":"ok"}`},
		{"/api/health/checks/port-listener/" + httpPort, 200, `{"port":` + httpPort + `,"status":"ok"}`},
		{"/api/health/checks/port-listener/1", 503, `{"missing":1,"ports":[` + amqpPort + `,` + httpPort + `],"reason":"No active listener","status":"failed"}`},
		{"/api/health/checks/port-listener/abc", 400, `{"error":"bad_request","reason":"Invalid port"}`},
		{"/api/health/checks/protocol-listener/amqp", 200, `{"protocol":"amqp","status":"ok"}`},
		{"/api/health/checks/protocol-listener/AMQP091", 200, `{"protocol":"amqp","status":"ok"}`},
		{"/api/health/checks/protocol-listener/management", 200, `{"protocol":"http","status":"ok"}`},
		{"/api/health/checks/protocol-listener/amqps", 503, `{"missing":"amqp/ssl","protocols":["amqp","http"],"reason":"No active listener","status":"failed"}`},
		{"/api/health/checks/protocol-listener/mqtt", 503, `{"missing":"mqtt","protocols":["amqp","http"],"reason":"No active listener","status":"failed"}`},
		{"/api/health/checks/virtual-hosts", 200, `{"status":"ok"}`},
		{"/api/health/checks/node-is-quorum-critical", 200, `{"reason":"single node cluster","status":"ok"}`},
		{"/api/health/checks/node-is-mirror-sync-critical", 200, `{"reason":"single node cluster","status":"ok"}`},
		{"/api/health/checks/certificate-expiration/1/months", 200, `{"status":"ok"}`},
		{"/api/health/checks/certificate-expiration/1/lightyears", 400, `{"error":"bad_request","reason":"Time unit not recognised. Supported units: days, weeks, months, years."}`},
		{"/api/health/checks/certificate-expiration/x/days", 400, `{"error":"bad_request","reason":"Invalid expiration value."}`},
		{"/api/extensions", 200, `[]`},
	} {
		status, body := e.do("GET", c.path, nil)
		if status != c.status || strings.TrimSpace(string(body)) != c.body {
			t.Errorf("GET %s: %d %s, want %d %s", c.path, status, body, c.status, c.body)
		}
	}
	if status, _ := e.doAs("nobody", "x", "GET", "/api/health/checks/virtual-hosts", nil); status != 401 {
		t.Errorf("health check without credentials: %d", status)
	}
	var flags []map[string]any
	e.getJSON("/api/feature-flags", &flags)
	states := map[string]any{}
	for _, f := range flags {
		states[f["name"].(string)] = f["state"]
	}
	if states["quorum_queue"] != "enabled" || states["stream_queue"] != "enabled" || len(flags) != 9 {
		t.Errorf("feature flags: %v", states)
	}
}

// TestHealthTLS: with an amqps listener, its port and protocol pass, and a
// certificate expiring within the period fails the expiration check.
func TestHealthTLS(t *testing.T) {
	certFile, keyFile := selfSignedCert(t, t.TempDir()) // valid for an hour
	b := servertest.StartBroker(t, server.Config{
		TLSListen: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile,
	}).Server()
	m := mgmt.New(b, mgmt.Options{Listen: "127.0.0.1:0"})
	if err := m.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{t: t, broker: b, base: "http://" + m.Addr().String()}
	tlsPort := strconv.Itoa(b.TLSAddr().(*net.TCPAddr).Port)
	e.expect("GET", "/api/health/checks/port-listener/"+tlsPort, nil, 200)
	e.expect("GET", "/api/health/checks/protocol-listener/amqps", nil, 200)
	e.expect("GET", "/api/health/checks/certificate-expiration/0/days", nil, 200)
	var failed map[string]any
	if err := json.Unmarshal(e.expect("GET", "/api/health/checks/certificate-expiration/1/days", nil, 503), &failed); err != nil {
		t.Fatal(err)
	}
	expired, _ := failed["expired"].([]any)
	if failed["status"] != "failed" || failed["reason"] != "Certificates expiring" || len(expired) != 1 {
		t.Fatalf("certificate-expiration: %v", failed)
	}
}
