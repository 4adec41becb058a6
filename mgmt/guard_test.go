package mgmt_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// serveFrom sends req straight to the management handler as if it came
// from remote (no traffic leaves the process), with guest's credentials
// unless req has some, addressed to localhost:15672 unless it names
// another host.
func (e *env) serveFrom(remote string, req *http.Request) *httptest.ResponseRecorder {
	e.t.Helper()
	req.RemoteAddr = remote
	if req.Host == "example.com" { // httptest.NewRequest's default
		req.Host = "localhost:15672"
	}
	if _, _, ok := req.BasicAuth(); !ok {
		req.SetBasicAuth("guest", "guest")
	}
	rec := httptest.NewRecorder()
	e.m.ServeHTTP(rec, req)
	return rec
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// TestLoopbackUsersOnAPI checks RabbitMQ's loopback_users rule on the
// management API: guest from another address gets 401, as on AMQP.
func TestLoopbackUsersOnAPI(t *testing.T) {
	e := start(t)
	e.expect("PUT", "/api/users/ops", map[string]any{"password": "pw", "tags": "administrator"}, 201)
	const remote = "10.1.2.3:5555"
	rec := e.serveFrom(remote, httptest.NewRequest("GET", "/api/users", nil))
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), `"reason":"User can only log in via localhost"`) ||
		strings.Contains(rec.Body.String(), "password_hash") {
		t.Fatalf("guest from %s: %d %s", remote, rec.Code, rec.Body)
	}
	req := httptest.NewRequest("PUT", "/api/users/mallory", jsonBody(t, map[string]any{"password": "x", "tags": "administrator"}))
	req.Header.Set("Content-Type", "application/json")
	if rec := e.serveFrom(remote, req); rec.Code != 401 {
		t.Fatalf("guest from %s creates a user: %d %s", remote, rec.Code, rec.Body)
	}
	if _, ok := e.broker.Auth().User("mallory"); ok {
		t.Fatal("guest from a remote address created a user")
	}
	if rec := e.serveFrom(remote, httptest.NewRequest("GET", "/metrics/per-object", nil)); rec.Code != 401 {
		t.Fatalf("guest from %s reads per-object metrics: %d", remote, rec.Code)
	}
	for _, local := range []string{"127.0.0.1:5555", "127.3.4.5:1", "[::1]:5555"} {
		if rec := e.serveFrom(local, httptest.NewRequest("GET", "/api/users", nil)); rec.Code != 200 {
			t.Fatalf("guest from %s: %d %s", local, rec.Code, rec.Body)
		}
	}
	req = httptest.NewRequest("GET", "/api/users", nil)
	req.SetBasicAuth("ops", "pw")
	if rec := e.serveFrom(remote, req); rec.Code != 200 {
		t.Fatalf("ops from %s: %d %s", remote, rec.Code, rec.Body)
	}
	// A page of another site whose name was rebound to 127.0.0.1 reaches
	// the API from loopback, but under its own name.
	for host, want := range map[string]int{
		"evil.example:15672": 401, "127.0.0.1:15672": 200, "[::1]:15672": 200, "localhost": 200, "LOCALHOST.:15672": 200,
	} {
		req := httptest.NewRequest("GET", "/api/overview", nil)
		req.Host = host
		if rec := e.serveFrom("127.0.0.1:5555", req); rec.Code != want {
			t.Errorf("guest from loopback to Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

// TestCrossSiteRequestsCannotAct checks that a page of another site
// cannot make a browser that holds the API's credentials change anything:
// the <form enctype=text/plain> attack on /api/definitions, and its
// variants.
func TestCrossSiteRequestsCannotAct(t *testing.T) {
	e := start(t)
	e.expect("PUT", "/api/users/ops", map[string]any{"password": "pw", "tags": "administrator"}, 201)
	attack := `{"users":[{"name":"mallory","password":"x","tags":"administrator"}],"ignore":"="}`
	send := func(method, path, ctype, body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("guest", "guest")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	created := func() bool { _, ok := e.broker.Auth().User("mallory"); return ok }
	for _, c := range []struct {
		name, ctype string
		hdr         map[string]string
		want        int
	}{
		{"foreign Origin", "text/plain", map[string]string{"Origin": "http://evil.example"}, 403},
		{"foreign Origin, JSON", "application/json", map[string]string{"Origin": "http://evil.example"}, 403},
		{"null Origin", "application/json", map[string]string{"Origin": "null"}, 403},
		{"same host, other port", "application/json", map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"cross-site fetch without Origin", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site fetch without Origin", "application/json", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"foreign Referer", "application/json", map[string]string{"Referer": "http://evil.example/page"}, 403},
		{"same origin, text/plain", "text/plain", map[string]string{"Origin": e.base}, 415},
		{"no browser headers, form", "application/x-www-form-urlencoded", nil, 415},
		{"no browser headers, multipart", "multipart/form-data; boundary=x", nil, 415},
	} {
		if code, out := send("POST", "/api/definitions", c.ctype, attack, c.hdr); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, out, c.want)
		}
		if created() {
			t.Fatalf("%s: the cross-site request created an administrator", c.name)
		}
	}
	// The web UI: same origin, explicit credentials, JSON.
	if code, out := send("POST", "/api/definitions", "application/json; charset=utf-8", attack,
		map[string]string{"Origin": e.base, "Sec-Fetch-Site": "same-origin", "X-Requested-With": "XMLHttpRequest"}); code != 204 || !created() {
		t.Fatalf("same-origin JSON import: %d %s", code, out)
	}
	// Behind a TLS proxy that keeps the Host, or that says it in
	// X-Forwarded-Host.
	for _, hdr := range []map[string]string{
		{"Origin": "https://broker.example", "Host": "broker.example"},
		{"Origin": "https://broker.example", "X-Forwarded-Host": "broker.example"},
	} {
		req := httptest.NewRequest("PUT", "/api/vhosts/proxied", nil)
		req.SetBasicAuth("ops", "pw")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if h := hdr["Host"]; h != "" {
			req.Host = h
		}
		rec := e.serveFrom("127.0.0.1:1", req)
		if rec.Code/100 != 2 {
			t.Errorf("through a proxy %v: %d %s", hdr, rec.Code, rec.Body)
		}
	}
	// curl -X PUT without a body, and reads from anywhere, still work.
	if code, out := send("PUT", "/api/vhosts/bare", "", "", nil); code != 201 {
		t.Fatalf("PUT without a body: %d %s", code, out)
	}
	if code, out := send("GET", "/api/overview", "", "", map[string]string{"Origin": "http://evil.example"}); code != 200 {
		t.Fatalf("GET with a foreign Origin: %d %s", code, out)
	}
}

// TestNoBasicChallengeForBrowsers checks that a browser's request is never
// answered with a Basic challenge (so the browser does not prompt for and
// cache credentials that other sites' pages could then ride on), while
// other clients are still challenged.
func TestNoBasicChallengeForBrowsers(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		name      string
		hdr       map[string]string
		challenge bool
	}{
		{"XHR", map[string]string{"X-Requested-With": "XMLHttpRequest"}, false},
		{"fetch", map[string]string{"Sec-Fetch-Mode": "cors"}, false},
		{"browser", map[string]string{"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"}, false},
		{"curl", map[string]string{"User-Agent": "curl/8.5.0"}, true},
		{"Go", nil, true},
	} {
		for _, creds := range []bool{false, true} {
			req := httptest.NewRequest("GET", "/api/overview", nil)
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			if creds {
				req.SetBasicAuth("guest", "wrong")
			} else {
				req.Header.Set("Authorization", "")
			}
			req.RemoteAddr = "127.0.0.1:5555"
			rec := httptest.NewRecorder()
			e.m.ServeHTTP(rec, req)
			got := rec.Header().Get("WWW-Authenticate") != ""
			if rec.Code != 401 || got != c.challenge {
				t.Errorf("%s (credentials %v): %d, challenge %v, want 401, %v", c.name, creds, rec.Code, got, c.challenge)
			}
		}
	}
}

// countingReader is an endless JSON-ish body that counts what was read.
type countingReader struct {
	mu sync.Mutex
	n  int
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range p {
		p[i] = ' '
	}
	r.n += len(p)
	return len(p), nil
}

func (r *countingReader) read() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestRequestBodiesAreBounded checks the body limits (413, announced or
// not) and that a write naming a missing vhost, or one the user may not
// do, is refused before its body is read.
func TestRequestBodiesAreBounded(t *testing.T) {
	e := startWith(t, mgmt.Options{MaxBodySize: 4096})
	big := `{"durable":true,"x":"` + strings.Repeat("a", 2<<20) + `"}`
	if code, out := e.do("PUT", "/api/queues/%2F/q", json.RawMessage(big)); code != 413 {
		t.Fatalf("2 MiB queue body: %d %s", code, out)
	}
	defs := `{"queues":[],"x":"` + strings.Repeat("a", 8000) + `"}`
	if code, out := e.do("POST", "/api/definitions", json.RawMessage(defs)); code != 413 {
		t.Fatalf("8 kB definitions over a 4 kB limit: %d %s", code, out)
	}
	if code, out := e.do("POST", "/api/definitions", map[string]any{"queues": []any{}}); code != 204 {
		t.Fatalf("small definitions: %d %s", code, out)
	}
	// A chunked body (no Content-Length) is cut at the limit.
	body := &countingReader{}
	req := httptest.NewRequest("POST", "/api/definitions", io.LimitReader(body, 1<<20))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	if rec := e.serveFrom("127.0.0.1:1", req); rec.Code != 413 {
		t.Fatalf("chunked 1 MiB definitions: %d %s", rec.Code, rec.Body)
	}
	if n := body.read(); n > 64<<10 {
		t.Fatalf("read %d bytes of a body over a 4 kB limit", n)
	}
	// Writes into a vhost that does not exist, or that the user may not
	// make: refused before reading a byte.
	e.expect("PUT", "/api/users/carol", map[string]any{"password": "pw", "tags": "management"}, 201)
	e.expect("PUT", "/api/permissions/%2F/carol", map[string]any{"configure": "^carol-", "write": "^carol-", "read": ".*"}, 201)
	e.expect("PUT", "/api/queues/%2F/other", map[string]any{}, 201)
	for _, c := range []struct {
		user, method, path string
		want               int
	}{
		{"guest", "POST", "/api/definitions/nosuch", 404},
		{"guest", "PUT", "/api/queues/nosuch/q", 404},
		{"guest", "POST", "/api/exchanges/nosuch/amq.direct/publish", 404},
		{"guest", "PUT", "/api/policies/nosuch/p", 404},
		{"carol", "POST", "/api/exchanges/%2F/amq.direct/publish", 401},
		{"carol", "PUT", "/api/queues/%2F/other", 401},
		{"carol", "PUT", "/api/exchanges/%2F/other", 401},
		{"carol", "POST", "/api/bindings/%2F/e/amq.direct/q/other", 401},
	} {
		size := int64(60 << 20) // a missing vhost is answered before the size
		if c.user == "carol" {
			size = 1000
		}
		body := &countingReader{}
		req := httptest.NewRequest(c.method, c.path, io.LimitReader(body, size))
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/json")
		pw := "guest"
		if c.user == "carol" {
			pw = "pw"
		}
		req.SetBasicAuth(c.user, pw)
		rec := e.serveFrom("127.0.0.1:1", req)
		if rec.Code != c.want || body.read() != 0 {
			t.Errorf("%s %s as %s: %d after reading %d bytes, want %d before reading: %s", c.method, c.path, c.user, rec.Code, body.read(), c.want, rec.Body)
		}
	}
}

// TestBulkWritesRefusedDuringAlarm checks that while the memory alarm is
// on, definitions imports and publishes get 503, other requests as usual.
func TestBulkWritesRefusedDuringAlarm(t *testing.T) {
	e := startBroker(t, server.Config{}, mgmt.Options{}, servertest.WithAlarmInterval(10*time.Millisecond))
	e.broker.SetMemoryHighWatermark(1)
	waitFor(t, "memory alarm", func() bool { return e.broker.Alarms().Memory })
	publish := map[string]any{"routing_key": "q", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}}
	if code, out := e.do("POST", "/api/definitions", map[string]any{}); code != 503 || !strings.Contains(string(out), "memory alarm") {
		t.Fatalf("import during the alarm: %d %s", code, out)
	}
	if code, out := e.do("POST", "/api/exchanges/%2F/amq.default/publish", publish); code != 503 {
		t.Fatalf("publish during the alarm: %d %s", code, out)
	}
	e.expect("PUT", "/api/queues/%2F/q", map[string]any{"durable": false}, 201)
	e.expect("GET", "/api/overview", nil, 200)
	e.broker.SetMemoryHighWatermark(1 << 62)
	waitFor(t, "memory alarm cleared", func() bool { return !e.broker.Alarms().Memory })
	e.expect("POST", "/api/definitions", map[string]any{}, 204)
	e.expect("POST", "/api/exchanges/%2F/amq.default/publish", publish, 200)
}

// sleepLog records the delays the login throttle asked for, without
// sleeping.
type sleepLog struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *sleepLog) sleep(d time.Duration, _ <-chan struct{}) bool {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
	return true
}

func (l *sleepLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprint(l.ds)
	l.ds = nil
	return s
}

// TestHTTPLoginThrottle checks that repeated wrong passwords over HTTP are
// answered later each time, counted with AMQP's, and that a correct
// password from another address is answered at once.
func TestHTTPLoginThrottle(t *testing.T) {
	slept := &sleepLog{}
	th := auth.NewThrottle(auth.ThrottleConfig{Free: 1, Base: 100 * time.Millisecond, Max: 10 * time.Second, Sleep: slept.sleep})
	e := startBroker(t, server.Config{}, mgmt.Options{}, servertest.WithLoginThrottle(th))
	e.expect("PUT", "/api/users/ops", map[string]any{"password": "pw", "tags": "administrator"}, 201)
	for range 4 {
		if code, _ := e.doAs("guest", "wrong", "GET", "/api/overview", nil); code != 401 {
			t.Fatalf("wrong password: %d", code)
		}
	}
	if got := slept.take(); got != "[100ms 200ms 400ms]" {
		t.Fatalf("delays of four failures: %s", got)
	}
	// The same address over AMQP, at another user: the address's count
	// goes on.
	if _, err := e.dialAs("ops", "wrong", "/"); err == nil {
		t.Fatal("wrong AMQP password accepted")
	}
	if got := slept.take(); got != "[800ms]" {
		t.Fatalf("AMQP failure after four HTTP ones: delays %s", got)
	}
	req := httptest.NewRequest("GET", "/api/overview", nil)
	req.SetBasicAuth("ops", "pw")
	if rec := e.serveFrom("10.9.9.9:1", req); rec.Code != 200 {
		t.Fatalf("correct password from another address: %d %s", rec.Code, rec.Body)
	}
	e.expect("GET", "/api/overview", nil, 200)
	if got := slept.take(); got != "[]" {
		t.Fatalf("correct passwords held back: %s", got)
	}
}

// TestNamesTheAPICannotGiveBack checks that names longer than AMQP's short
// string or not UTF-8 are refused at creation with a clear 400.
func TestNamesTheAPICannotGiveBack(t *testing.T) {
	e := start(t)
	long := strings.Repeat("v", 256)
	for _, c := range []struct {
		path   string
		body   map[string]any
		reason string
	}{
		{"/api/vhosts/" + long, nil, "vhost name is 256 bytes long; at most 255 are allowed"},
		{"/api/vhosts/bad%FF", nil, "vhost name is not valid UTF-8"},
		{"/api/queues/%2F/" + long, map[string]any{}, "queue name is 256 bytes long; at most 255 are allowed"},
		{"/api/queues/%2F/bad%FF", map[string]any{}, "queue name is not valid UTF-8"},
		{"/api/exchanges/%2F/" + long, map[string]any{"type": "direct"}, "exchange name is 256 bytes long; at most 255 are allowed"},
		{"/api/exchanges/%2F/bad%C3", map[string]any{"type": "direct"}, "exchange name is not valid UTF-8"},
		{"/api/users/bad%FF", map[string]any{"password": "x", "tags": ""}, "user name is not valid UTF-8"},
		{"/api/policies/%2F/bad%FF", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": 1}}, "policy name is not valid UTF-8"},
	} {
		code, out := e.do("PUT", c.path, c.body)
		var reply map[string]string
		json.Unmarshal(out, &reply)
		if code != 400 || reply["reason"] != c.reason {
			t.Errorf("PUT %.40s: %d %s, want 400 %q", c.path, code, out, c.reason)
		}
	}
	e.expect("PUT", "/api/vhosts/"+long[:255], nil, 201)
	e.expect("PUT", "/api/vhosts/Z%C3%BCrich", nil, 201)
	// Through a definitions import too, and a routing key too long for
	// AMQP is a 400, not a 500.
	out := e.expect("POST", "/api/definitions", map[string]any{"vhosts": []any{map[string]any{"name": long}}}, 400)
	if !strings.Contains(string(out), "longer than 255") {
		t.Fatalf("import of a 256-byte vhost name: %s", out)
	}
	e.expect("POST", "/api/definitions", map[string]any{"queues": []any{map[string]any{"name": long, "vhost": "/"}}}, 400)
	e.expect("POST", "/api/exchanges/%2F/amq.default/publish",
		map[string]any{"routing_key": long, "payload": "x", "payload_encoding": "string", "properties": map[string]any{}}, 400)
}
