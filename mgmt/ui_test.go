package mgmt_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
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
