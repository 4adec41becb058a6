package mgmt

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/auth"
)

// What a request must pass before its handler runs, in this order (see
// docs/management.md, "Request hardening"):
//
//  1. a state-changing request from a browser must come from the API's own
//     origin (checkOrigin), so that another web page cannot make the
//     browser act with credentials it holds;
//  2. HTTP basic authentication (authenticate), through the broker's login
//     throttle, with RabbitMQ's loopback_users rule;
//  3. the route's authorization (authorize) and, for writes naming a
//     vhost, its existence;
//  4. a body must be JSON (application/json) and within the route's size
//     limit, checked on Content-Length before anything is read;
//  5. bulk writes (definitions import, publish) are refused while a
//     resource alarm is in effect;
//  6. heavy requests (those that walk every object) wait for one of a few
//     turns.

// smallBody bounds the body of requests other than definitions imports
// and publishes: their JSON is a few fields.
const smallBody = 1 << 20

// scrapeTurns is how many unauthenticated /metrics scrapes are served at
// once.
const scrapeTurns = 2

// safeMethod reports whether method only reads.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// errCrossSite refuses a state-changing request sent by a browser on
// behalf of another site.
var errCrossSite = &httpError{http.StatusForbidden, "forbidden", "cross-origin request refused", nil}

// checkOrigin refuses a state-changing request that a browser sent from
// another origin: its Origin header (sent by browsers with every
// cross-origin request and every same-origin one that is not a GET) must
// name the host the request was sent to (its Host header, or the
// X-Forwarded-Host a reverse proxy set: a page cannot add that header to
// a cross-origin request without a CORS preflight, which the API never
// grants); without Origin, Sec-Fetch-Site must say same-origin (or none:
// the user typed it), and a Referer must be of this host. Requests without
// any of these headers (curl, rabbitmqadmin, client libraries) are not
// browsers' and pass.
func checkOrigin(r *http.Request) error {
	if safeMethod(r.Method) {
		return nil
	}
	// A Host without a port was sent to the default port of the scheme
	// the browser used, which is the Origin's (a TLS proxy in front of
	// this plain listener included).
	sameHost := func(u *url.URL) bool {
		for _, h := range []string{r.Host, r.Header.Get("X-Forwarded-Host")} {
			if h != "" && u.Host != "" && strings.EqualFold(hostPort(u.Scheme, u.Host), hostPort(u.Scheme, h)) {
				return true
			}
		}
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !sameHost(u) {
			return errCrossSite // "null" (a sandboxed frame, a file) included
		}
		return nil
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errCrossSite
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || !sameHost(u) {
			return errCrossSite
		}
	}
	return nil
}

// hostPort is host with its scheme's default port made explicit.
func hostPort(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// fromBrowser reports whether a request looks like one a browser's script
// sent: those get no WWW-Authenticate challenge, so that a browser never
// prompts for (and then caches and replays) Basic credentials for the API.
// Other clients are challenged as RabbitMQ challenges them.
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("X-Requested-With") != "" || r.Header.Get("Sec-Fetch-Mode") != "" ||
		strings.HasPrefix(r.Header.Get("User-Agent"), "Mozilla/")
}

// unauthorized answers 401 "Login failed", challenging clients that are
// not browsers.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	if !fromBrowser(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	}
	writeError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
}

// authenticate checks the request's basic credentials through the login
// throttle and the loopback rule, answering the refusal itself.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (auth.User, bool) {
	name, pass, ok := r.BasicAuth()
	if !ok {
		unauthorized(w, r)
		return auth.User{}, false
	}
	source := auth.SourceOf(r.RemoteAddr)
	th := s.broker.LoginThrottle()
	try := th.Begin(source)
	defer try.End()
	if try.Refused {
		if ok, n := th.LogRefusal(); ok {
			s.log.Warn().Str("user", name).Str("address", source).Int("not_logged_since", n).
				Msg("HTTP login refused unchecked: too many failed logins in flight from this address")
		}
		w.Header().Set("Retry-After", "3")
		writeError(w, http.StatusTooManyRequests, "too_many_requests", "Too many failed logins from this address")
		return auth.User{}, false
	}
	u, ok := s.broker.Auth().Authenticate(name, pass)
	if !ok {
		f := try.Failed(name)
		s.log.Warn().Str("user", name).Str("address", source).Int("address_failures", f.SourceFailures).
			Int("user_failures", f.UserFailures).Dur("delay", f.Delay).Msg("HTTP access denied: login failed")
		th.Sleep(f.Delay, r.Context().Done())
		unauthorized(w, r)
		return auth.User{}, false
	}
	// A loopback user must also have addressed the API by a loopback
	// name: a page of another site that rebinds its own name to 127.0.0.1
	// sends its name as Host, and must not get in with guest/guest.
	if s.broker.LoopbackOnly(u.Name) && (!isLoopback(r.RemoteAddr) || !loopbackHost(r.Host)) {
		s.log.Warn().Str("user", name).Str("address", source).Str("host", r.Host).
			Msg("HTTP access denied: user can only log in via localhost")
		writeError(w, http.StatusUnauthorized, "not_authorised", "User can only log in via localhost")
		return auth.User{}, false
	}
	return u, true
}

// isLoopback reports whether a request's remote address (host:port) is a
// loopback one.
func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackHost reports whether a Host header names a loopback address:
// localhost (or a name under .localhost), or a loopback IP.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return isLoopback(host)
}

// admit applies steps 3 to 5 to a matched route.
func (s *Server) admit(q *request, rt route) error {
	if err := s.authorize(q, rt); err != nil {
		return err
	}
	r := q.r
	if v, ok := q.p["vhost"]; ok && !safeMethod(r.Method) && !rt.ownVHostCheck {
		if _, exists := s.broker.Auth().VHost(v); !exists {
			return notFound()
		}
	}
	if !safeMethod(r.Method) && hasBody(r) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return &httpError{http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json", nil}
		}
	}
	limit := int64(smallBody)
	if rt.bulk {
		limit = s.opts.MaxBodySize
	}
	if r.ContentLength > limit {
		return tooLarge(limit)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.Body = http.MaxBytesReader(q.w, r.Body, limit)
	if rt.bulk {
		if al := s.broker.Alarms(); al.Memory || al.Disk {
			what := "memory"
			if !al.Memory {
				what = "disk"
			}
			return &httpError{http.StatusServiceUnavailable, "service_unavailable",
				fmt.Sprintf("a %s alarm is in effect: bulk writes are refused until it clears", what), nil}
		}
	}
	return nil
}

// hasBody reports whether r carries a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

func tooLarge(limit int64) error {
	return &httpError{http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("request body larger than %d bytes", limit), nil}
}

// errBusy answers a heavy request that found no turn in time.
var errBusy = &httpError{http.StatusServiceUnavailable, "service_unavailable", "too many concurrent requests; retry later", nil}

// turn waits for one of the turns of pool (Server.heavy, or
// Server.scrapes for unauthenticated scrapes, which therefore cannot
// starve the API), for at most Options.HeavyWait; release gives it back.
func (s *Server) turn(r *http.Request, pool chan struct{}) (release func(), err error) {
	select {
	case pool <- struct{}{}:
		return func() { <-pool }, nil
	default:
	}
	t := time.NewTimer(s.opts.HeavyWait)
	defer t.Stop()
	select {
	case pool <- struct{}{}:
		return func() { <-pool }, nil
	case <-t.C:
		return nil, errBusy
	case <-r.Context().Done():
		return nil, errBusy
	}
}

// isTooLarge reports whether err is a body cut at its limit.
func isTooLarge(err error) (int64, bool) {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return mb.Limit, true
	}
	return 0, false
}

// checkName refuses, at creation, a name the broker could not give back
// unchanged: longer than limit bytes (255, AMQP's short string, for
// vhosts, queues and exchanges; no limit when 0), or not UTF-8, which
// JSON (every list, a definitions export) would alter. Objects already
// holding such names (declared over AMQP) can still be read and deleted.
func checkName(kind, name string, limit int) error {
	if limit > 0 && len(name) > limit {
		return badRequest("%s name is %d bytes long; at most %d are allowed", kind, len(name), limit)
	}
	if !utf8.ValidString(name) {
		return badRequest("%s name is not valid UTF-8", kind)
	}
	return nil
}
