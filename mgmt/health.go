package mgmt

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The health checks RabbitMQ's management plugin serves for probes
// (/api/health/checks/...; alarms and local-alarms are in api.go): 200 {"status":"ok"} when healthy, 503
// {"status":"failed","reason":...} with the details when not, 400 for a
// malformed parameter; bodies as RabbitMQ 3.10 writes them. Any
// management user may call them.

func (s *Server) healthRoutes() []route {
	r := func(pattern string, h func(*request) error) route {
		return route{method: http.MethodGet, pattern: strings.Split(pattern, "/"), h: h}
	}
	return []route{
		r("health/checks/port-listener/{port}", s.checkPortListener),
		r("health/checks/protocol-listener/{protocol}", s.checkProtocolListener),
		r("health/checks/virtual-hosts", s.checkOK),
		r("health/checks/node-is-quorum-critical", s.checkQuorumCritical),
		r("health/checks/node-is-mirror-sync-critical", s.checkSingleNode),
		r("health/checks/certificate-expiration/{within}/{unit}", s.checkCertificates),
		r("feature-flags", s.getFeatureFlags),
	}
}

func healthFailed(q *request, reason string, extra map[string]any) error {
	body := map[string]any{"status": "failed", "reason": reason}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(q.w, http.StatusServiceUnavailable, body)
	return nil
}

func healthOK(q *request, extra map[string]any) error {
	body := map[string]any{"status": "ok"}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(q.w, http.StatusOK, body)
	return nil
}

// listeners are the broker's listening sockets as RabbitMQ names their
// protocols: amqp, amqp/ssl, http.
func (s *Server) listeners() []struct {
	protocol string
	port     int
} {
	var out []struct {
		protocol string
		port     int
	}
	add := func(protocol string, a net.Addr) {
		if ta, ok := a.(*net.TCPAddr); ok {
			out = append(out, struct {
				protocol string
				port     int
			}{protocol, ta.Port})
		}
	}
	if _, p, err := net.SplitHostPort(s.broker.ListenAddr()); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			add("amqp", &net.TCPAddr{Port: n})
		}
	}
	if a := s.broker.TLSAddr(); a != nil {
		add("amqp/ssl", a)
	}
	if s.ln != nil {
		add("http", s.ln.Addr())
	}
	return out
}

func (s *Server) checkPortListener(q *request) error {
	port, err := strconv.Atoi(q.p["port"])
	if err != nil {
		writeError(q.w, http.StatusBadRequest, "bad_request", "Invalid port")
		return nil
	}
	ports := []int{}
	for _, l := range s.listeners() {
		if l.port == port {
			return healthOK(q, map[string]any{"port": port})
		}
		ports = append(ports, l.port)
	}
	return healthFailed(q, "No active listener", map[string]any{"missing": port, "ports": ports})
}

// healthProtocol maps the names RabbitMQ accepts for a protocol onto the one
// it reports.
func healthProtocol(p string) string {
	p = strings.ToLower(p)
	switch p {
	case "amqp", "amqp091", "amqp0-9-1", "amqp0.9.1", "amqp10", "amqp1.0", "amqp1-0":
		return "amqp"
	case "amqps", "amqp/ssl", "amqp091/ssl", "amqps0-9-1", "amqp10/ssl", "amqps1.0":
		return "amqp/ssl"
	case "http", "management", "http1", "http1.1", "http/1.1":
		return "http"
	case "https", "management/ssl", "http/ssl":
		return "https"
	case "mqtts":
		return "mqtt/ssl"
	case "stomps":
		return "stomp/ssl"
	}
	return p
}

func (s *Server) checkProtocolListener(q *request) error {
	want := healthProtocol(q.p["protocol"])
	protocols := []string{}
	for _, l := range s.listeners() {
		if l.protocol == want {
			return healthOK(q, map[string]any{"protocol": want})
		}
		protocols = append(protocols, l.protocol)
	}
	return healthFailed(q, "No active listener", map[string]any{"missing": want, "protocols": protocols})
}

// checkOK is a check that cannot fail in Warren: every vhost runs in the
// broker process, so none is ever down on its own.
func (s *Server) checkOK(q *request) error { return healthOK(q, nil) }

// checkSingleNode answers the cluster checks of one node, as RabbitMQ
// answers them on a single node.
// checkQuorumCritical fails, in a cluster, when a quorum queue with a
// replica on this node would lose its majority if this node stopped (its
// other running replicas are not a majority), as RabbitMQ 3.10's check.
func (s *Server) checkQuorumCritical(q *request) error {
	if s.broker.Cluster() == nil {
		return s.checkSingleNode(q)
	}
	self := s.broker.NodeName()
	qs, err := s.broker.Queues("")
	if err != nil {
		return err
	}
	var critical []map[string]any
	for _, qi := range qs {
		if !slices.Contains(qi.Members, self) {
			continue
		}
		others := 0
		for _, m := range qi.Online {
			if m != self {
				others++
			}
		}
		if others < len(qi.Members)/2+1 {
			critical = append(critical, map[string]any{"name": qi.Name, "virtual_host": qi.VHost,
				"readable_name": "queue '" + qi.Name + "' in vhost '" + qi.VHost + "'", "node": self,
				"members": qi.Members, "running_members": qi.Online})
		}
	}
	if len(critical) > 0 {
		return healthFailed(q, "There are quorum queues that would lose their quorum if the target node is shut down", map[string]any{"queues": critical})
	}
	return healthOK(q, nil)
}

func (s *Server) checkSingleNode(q *request) error {
	return healthOK(q, map[string]any{"reason": "single node cluster"})
}

var certUnits = map[string]time.Duration{
	"days": 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"months": 30 * 24 * time.Hour, "years": 365 * 24 * time.Hour,
}

// checkCertificates fails when a certificate of the amqps listener expires
// within the period (or has expired).
func (s *Server) checkCertificates(q *request) error {
	n, err := strconv.Atoi(q.p["within"])
	if err != nil {
		writeError(q.w, http.StatusBadRequest, "bad_request", "Invalid expiration value.")
		return nil
	}
	unit, ok := certUnits[q.p["unit"]]
	if !ok {
		writeError(q.w, http.StatusBadRequest, "bad_request", "Time unit not recognised. Supported units: days, weeks, months, years.")
		return nil
	}
	limit := time.Now().Add(time.Duration(n) * unit)
	var expiring []map[string]any
	for _, c := range s.broker.TLSCertificates() {
		if c.NotAfter.Before(limit) {
			expiring = append(expiring, map[string]any{
				"node": s.broker.NodeName(), "protocol": "amqp/ssl", "subject": c.Subject.String(),
				"expiry_date": c.NotAfter.UTC().Format(time.RFC3339),
			})
		}
	}
	if len(expiring) == 0 {
		return healthOK(q, nil)
	}
	return healthFailed(q, "Certificates expiring", map[string]any{"expired": expiring})
}

// featureFlag is one entry of /api/feature-flags: RabbitMQ 3.10's flags,
// each in the state that matches what Warren does.
type featureFlag struct {
	Name       string `json:"name"`
	Desc       string `json:"desc"`
	DocURL     string `json:"doc_url"`
	State      string `json:"state"`
	Stability  string `json:"stability"`
	ProvidedBy string `json:"provided_by"`
}

var featureFlags = []featureFlag{
	{"classic_mirrored_queue_version", "Queue version of classic mirrored queues can be set", "", "enabled", "stable", "rabbit"},
	{"drop_unroutable_metric", "Unroutable publishes that are dropped are counted", "", "disabled", "stable", "rabbitmq_management_agent"},
	{"empty_basic_get_metric", "basic.get on an empty queue is counted", "", "disabled", "stable", "rabbitmq_management_agent"},
	{"implicit_default_bindings", "Default exchange bindings are implicit, not stored", "", "enabled", "stable", "rabbit"},
	{"maintenance_mode_status", "Maintenance mode status", "", "enabled", "stable", "rabbit"},
	{"quorum_queue", "Queues of type quorum (run as classic queues by Warren)", "https://www.rabbitmq.com/quorum-queues.html", "enabled", "stable", "rabbit"},
	{"stream_queue", "Queues of type stream (over AMQP 0-9-1; no stream protocol listener)", "https://www.rabbitmq.com/stream.html", "enabled", "stable", "rabbit"},
	{"user_limits", "Connection and channel limits per user", "", "enabled", "stable", "rabbit"},
	{"virtual_host_metadata", "Virtual host metadata (description, tags)", "", "enabled", "stable", "rabbit"},
}

func (s *Server) getFeatureFlags(q *request) error {
	writeJSON(q.w, http.StatusOK, featureFlags)
	return nil
}
