package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client talks to a management API.
type client struct {
	base     string
	user     string
	password string
	http     *http.Client
}

// apiError is an error answer: RabbitMQ's {"error": ..., "reason": ...}.
type apiError struct {
	Status int
	Err    string `json:"error"`
	Reason string `json:"reason"`
}

// Error shows the reason as a terminal should: RabbitMQ's management API
// escapes the HTML tag characters of some reasons (a policy's <<"key">>
// reads &lt;&lt;"key"&gt;&gt;), which rabbitmqctl prints plain.
func (e *apiError) Error() string {
	reason := strings.TrimRight(html.UnescapeString(e.Reason), "\n")
	switch {
	case reason != "" && e.Err != "":
		return fmt.Sprintf("%d %s: %s", e.Status, e.Err, reason)
	case reason != "":
		return fmt.Sprintf("%d: %s", e.Status, reason)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// path joins segments into an API path, escaping each (the vhost "/"
// becomes %2F).
func path(segs ...string) string {
	var b strings.Builder
	b.WriteString("/api")
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends a request with an optional JSON body and returns the response
// body of a 2xx answer.
func (c *client) do(method, p string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(c.base, "/")+p, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(out, e) != nil {
			e.Reason = strings.TrimSpace(string(out))
		}
		return nil, e
	}
	return out, nil
}

// get GETs p and decodes the JSON answer into v.
func (c *client) get(p string, v any) error {
	b, err := c.do(http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func newClient(base, user, password string) *client {
	return &client{base: base, user: user, password: password, http: &http.Client{Timeout: 60 * time.Second}}
}
