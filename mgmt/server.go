// Package mgmt is Warren's management HTTP API: the endpoints of RabbitMQ's
// management plugin that operators and tools use most (/api/overview,
// /api/queues, /api/exchanges, /api/bindings, /api/connections,
// /api/definitions, ...), with RabbitMQ's JSON field names, plus Prometheus
// metrics at /metrics, and on a listener of their own as rabbitmq_prometheus
// serves them (prometheus.go). It reads and drives the broker only through
// the admin API of package server (server/admin.go).
package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
)

// Options configure a management server. The zero value of a field means
// its default (DefaultOptions).
type Options struct {
	// Listen is the HTTP listen address (default 0.0.0.0:15672, RabbitMQ's).
	Listen string
	// Log receives request errors (default: disabled).
	Log *zerolog.Logger
	// StatsInterval is how often message rates are sampled (default 5 s,
	// as RabbitMQ's collect_statistics_interval).
	StatsInterval time.Duration
	// MaxBodySize bounds the body of a definitions import or a publish
	// (default 20 MB, RabbitMQ's management.http_max_body_size); other
	// requests' bodies are bounded by 1 MiB. A larger body gets 413.
	MaxBodySize int64
	// MaxHeavyRequests bounds the requests that walk every object (lists,
	// the overview, definitions, publish, get, metrics) served at once
	// (default 4); more wait up to HeavyWait (default 10 s) for a turn,
	// then get 503.
	MaxHeavyRequests int
	HeavyWait        time.Duration
	// PerObjectMetricsLimit bounds the objects of each kind (queues,
	// channels, connections) /metrics/per-object and /metrics/detailed
	// report (default 10000).
	PerObjectMetricsLimit int
	// Environment is the broker's effective configuration, served to
	// administrators at /api/nodes/{node}/environment (warrenctl
	// environment); nil serves an empty list.
	Environment []Setting
	// PrometheusListen is the Prometheus listener's address, as
	// rabbitmq_prometheus's (":15692"); "" for none. Its endpoints need no
	// authentication (prometheus.go).
	PrometheusListen string
}

// DefaultOptions are the options a zero field of Options stands for: New
// fills every zero field from them, and cmd/warren's flags take their
// defaults from them.
func DefaultOptions() Options {
	return Options{
		Listen:                "0.0.0.0:15672",
		StatsInterval:         5 * time.Second,
		MaxBodySize:           20_000_000, // RabbitMQ's management.http_max_body_size
		MaxHeavyRequests:      4,
		HeavyWait:             10 * time.Second,
		PerObjectMetricsLimit: 10_000,
	}
}

// Server is the management HTTP server of one broker.
type Server struct {
	broker   *server.Server
	opts     Options
	log      zerolog.Logger
	ln       net.Listener
	http     *http.Server
	routes   []route
	prom     promHandlers // /metrics and /metrics/per-object (prometheus.go)
	promLn   net.Listener // the Prometheus listener, or nil
	promHTTP *http.Server
	sampler  *sampler
	heavy    chan struct{} // a token per heavy request in progress
	scrapes  chan struct{} // a token per unauthenticated /metrics scrape in progress
}

// New returns a management server for broker; Listen opens its socket.
func New(broker *server.Server, opts Options) *Server {
	d := DefaultOptions()
	if opts.Listen == "" {
		opts.Listen = d.Listen
	}
	if opts.StatsInterval <= 0 {
		opts.StatsInterval = d.StatsInterval
	}
	if opts.MaxBodySize <= 0 {
		opts.MaxBodySize = d.MaxBodySize
	}
	if opts.MaxHeavyRequests <= 0 {
		opts.MaxHeavyRequests = d.MaxHeavyRequests
	}
	if opts.HeavyWait <= 0 {
		opts.HeavyWait = d.HeavyWait
	}
	if opts.PerObjectMetricsLimit <= 0 {
		opts.PerObjectMetricsLimit = d.PerObjectMetricsLimit
	}
	s := &Server{broker: broker, opts: opts, sampler: newSampler(broker), heavy: make(chan struct{}, opts.MaxHeavyRequests), scrapes: make(chan struct{}, scrapeTurns)}
	if opts.Log != nil {
		s.log = *opts.Log
	} else {
		s.log = zerolog.Nop()
	}
	s.answerNodeCalls()
	s.routes = append(append(append(s.apiRoutes(), s.healthRoutes()...), s.streamRoutes()...), s.quorumRoutes()...)
	s.prom = s.newPromHandlers()
	// A client may not hold a connection (and, for a heavy request, one
	// of the few turns) for ever by sending or reading slowly.
	newHTTP := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
			WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute,
		}
	}
	s.http = newHTTP(s)
	s.promHTTP = newHTTP(s.PrometheusHandler())
	return s
}

// Listen opens the management API's HTTP listener.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// ListenPrometheus opens the Prometheus listener, when
// Options.PrometheusListen is set. Serve serves it, with or without the
// management listener.
func (s *Server) ListenPrometheus() error {
	if s.opts.PrometheusListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.PrometheusListen)
	if err != nil {
		return err
	}
	s.promLn = ln
	return nil
}

// Addr is the management listener's address, once Listen has returned.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// PrometheusAddr is the Prometheus listener's address, or nil when it is
// not open.
func (s *Server) PrometheusAddr() net.Addr {
	if s.promLn == nil {
		return nil
	}
	return s.promLn.Addr()
}

// Serve answers requests until ctx is done, then shuts the HTTP servers
// down (in-flight requests get five seconds). It opens the management
// listener if Listen has not (and Options.Listen is set); the Prometheus
// listener is served when ListenPrometheus opened it. With neither, it
// only samples the message rates until ctx is done.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil && s.opts.Listen != "" {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	promDone := make(chan struct{})
	if s.promLn != nil {
		s.log.Info().Str("listen", s.promLn.Addr().String()).Msg("Prometheus metrics listening")
		go func() {
			defer close(promDone)
			if err := s.promHTTP.Serve(s.promLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error().Err(err).Msg("Prometheus listener stopped")
			}
		}()
	} else {
		close(promDone)
	}
	defer func() { <-promDone }()
	stopped := make(chan struct{})
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s.sampler.run(sampleCtx, s.opts.StatsInterval)
	}()
	defer func() { stopSampling(); <-sampled }()
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.promHTTP.Shutdown(sctx)
		s.http.Shutdown(sctx)
	}()
	if s.ln == nil {
		<-stopped
		return nil
	}
	s.log.Info().Str("listen", s.ln.Addr().String()).Msg("management API listening")
	err := s.http.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return err
}

// ServeHTTP routes a request: /metrics and the web UI's files (ui.go)
// without authentication, /api/..., /metrics/per-object and
// /metrics/detailed with HTTP basic
// authentication against the broker's users, after the checks of
// guard.go.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case path == "/metrics":
		s.servePrometheus(w, r, path, s.scrapes)
		return
	case path == "/metrics/per-object" || path == "/metrics/detailed":
		// The management listener names objects to monitoring users only;
		// the Prometheus listener (PrometheusHandler) serves them to all,
		// as RabbitMQ's does.
		if u, ok := s.authenticate(w, r); !ok {
			return
		} else if !isMonitor(u) {
			writeError(w, http.StatusUnauthorized, "not_authorised", "Not monitor user")
			return
		}
		s.servePrometheus(w, r, path, s.heavy)
		return
	case isUIPath(path):
		serveUI(w, r)
		return
	case !strings.HasPrefix(path, "/api/") && path != "/api":
		writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
		return
	}
	if err := checkOrigin(r); err != nil {
		s.log.Warn().Str("method", r.Method).Str("path", r.URL.EscapedPath()).Str("origin", r.Header.Get("Origin")).
			Str("referer", r.Header.Get("Referer")).Msg("cross-origin management request refused")
		s.fail(w, r, err)
		return
	}
	u, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if !hasAnyTag(u, managementTags...) {
		writeError(w, http.StatusUnauthorized, "not_authorised", "Not management user")
		return
	}
	segs, err := splitPath(strings.TrimPrefix(path, "/api"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	methodMismatch := false
	for _, rt := range s.routes {
		params, ok := rt.match(segs)
		if !ok {
			continue
		}
		if rt.method != r.Method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
			methodMismatch = true
			continue
		}
		req := &request{s: s, r: r, w: w, user: u.Name, u: u, p: params, db: s.broker.Auth(), scope: rt.scope}
		if err := s.admit(req, rt); err != nil {
			s.fail(w, r, err)
			return
		}
		if rt.heavy {
			release, err := s.turn(r, s.heavy)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			defer release()
		}
		if err := rt.h(req); err != nil {
			s.fail(w, r, err)
		}
		return
	}
	if methodMismatch {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed")
		return
	}
	writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
}

// serveMetrics serves a Prometheus scrape in one of pool's turns.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, h http.Handler, pool chan struct{}) {
	release, err := s.turn(r, pool)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer release()
	h.ServeHTTP(w, r)
}

// splitPath splits an escaped path into unescaped segments, so that "%2F"
// (the vhost "/") stays inside its segment.
func splitPath(p string) ([]string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil, nil
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, err
		}
		segs[i] = u
	}
	return segs, nil
}

type route struct {
	method  string
	pattern []string // literal segments and {name} wildcards
	h       func(*request) error
	access  access    // what the user needs beyond a management login
	scope   listScope // how lists are filtered for users who may not see all
	heavy   bool      // walks every object: served in one of a few turns
	bulk    bool      // a large body (MaxBodySize), refused during an alarm
	// ownVHostCheck: the handler answers a vhost that does not exist
	// itself (with RabbitMQ's answer for it); other writes naming a vhost
	// get 404 before their body is read.
	ownVHostCheck bool
}

func (rt route) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rt.pattern) {
		return nil, false
	}
	var params map[string]string
	for i, p := range rt.pattern {
		if strings.HasPrefix(p, "{") {
			if params == nil {
				params = map[string]string{}
			}
			params[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// request is one authenticated API request.
type request struct {
	s     *Server
	r     *http.Request
	w     http.ResponseWriter
	user  string
	u     auth.User // the authenticated user
	p     map[string]string
	db    *auth.DB
	scope listScope
}

func (q *request) param(name string) string { return q.p[name] }

// exchangeParam is the exchange name in the path: RabbitMQ addresses the
// default exchange as "amq.default".
func (q *request) exchangeParam(name string) string {
	if v := q.p[name]; v != "amq.default" {
		return v
	}
	return ""
}

func (q *request) boolQuery(name string) bool {
	v := q.r.URL.Query().Get(name)
	return v == "true" || v == "1"
}

// decode reads a JSON body into v; an empty body leaves v as it is. The
// body is bounded by the route's limit (admit).
func (q *request) decode(v any) error {
	dec := json.NewDecoder(q.r.Body)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, errEOF) {
			return nil
		}
		if limit, ok := isTooLarge(err); ok {
			return tooLarge(limit)
		}
		return badRequest("%s", err.Error())
	}
	return nil
}

// reply writes v as JSON with status 200.
func (q *request) reply(v any) error {
	writeJSON(q.w, http.StatusOK, v)
	return nil
}

// noContent answers 204, or 201 when created.
func (q *request) noContent(created bool) error {
	if created {
		q.w.WriteHeader(http.StatusCreated)
	} else {
		q.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// admin opens an admin session as the request's user on vhost.
func (s *Server) admin(q *request, vhost string) (*server.AdminSession, error) {
	return s.broker.OpenAdmin(q.user, vhost)
}

// httpError is an error with its HTTP status and RabbitMQ error word.
type httpError struct {
	status int
	word   string
	reason string
	detail any // when set, the JSON reason instead of the text (RabbitMQ sends Erlang terms as lists)
}

func (e *httpError) Error() string { return e.reason }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, "bad_request", sprintf(format, args...), nil}
}

func notFound() error {
	return &httpError{http.StatusNotFound, "Object Not Found", "Not Found", nil}
}

// fail writes err as RabbitMQ's {"error": ..., "reason": ...}. AMQP errors
// from the broker map to HTTP statuses by reply code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var ae *amqp.Error
	switch {
	case errors.As(err, &he):
		if he.detail != nil {
			writeJSON(w, he.status, map[string]any{"error": he.word, "reason": he.detail})
			break
		}
		writeError(w, he.status, he.word, he.reason)
	case errors.Is(err, amqp.ErrStringTooLong):
		// A name or routing key longer than an AMQP short string.
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.As(err, &ae):
		switch ae.Code {
		case amqp.NotFound:
			writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
		case amqp.AccessRefused:
			if strings.HasPrefix(ae.Text, "access to ") {
				// A permission refusal, answered as RabbitMQ's management
				// plugin answers it.
				writeError(w, http.StatusUnauthorized, "not_authorised", "Access refused.")
				break
			}
			writeError(w, http.StatusForbidden, "access_refused", ae.Text)
		case amqp.PreconditionFailed, amqp.ResourceLocked, amqp.CommandInvalid, amqp.NotAllowed,
			amqp.FrameError, amqp.SyntaxError, amqp.NotImplemented:
			writeError(w, http.StatusBadRequest, "bad_request", ae.Text)
		default:
			s.log.Error().Err(err).Str("path", r.URL.EscapedPath()).Msg("management request failed")
			writeError(w, http.StatusInternalServerError, "internal_server_error", ae.Error())
		}
	default:
		s.log.Error().Err(err).Str("path", r.URL.EscapedPath()).Msg("management request failed")
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, word, reason string) {
	writeJSON(w, status, map[string]string{"error": word, "reason": reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "internal_server_error", "reason": err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	w.Write(b)
}
