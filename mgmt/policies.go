package mgmt

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/warrenmq/warren/server"
)

// policyJSON is a policy as RabbitMQ's API and definitions show it.
type policyJSON struct {
	VHost      string         `json:"vhost,omitempty"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

func toPolicy(vhost string, p server.Policy) policyJSON {
	return policyJSON{
		VHost: vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Definition: tableJSON(p.Definition), Priority: p.Priority,
	}
}

// policies lists the policies of vhost ("" for all).
func (s *Server) policies(vhost string) ([]policyJSON, error) {
	names := s.broker.VHostNames()
	if vhost != "" {
		if !slices.Contains(names, vhost) {
			return nil, notFound()
		}
		names = []string{vhost}
	}
	out := []policyJSON{}
	for _, v := range names {
		for _, p := range s.broker.Policies(v) {
			out = append(out, toPolicy(v, p))
		}
	}
	return out, nil
}

func (s *Server) getPolicies(q *request) error {
	ps, err := s.policies(q.param("vhost"))
	if err != nil {
		return err
	}
	return q.replyList(ps)
}

func (s *Server) getPolicy(q *request) error {
	ps, err := s.policies(q.param("vhost"))
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Name == q.param("name") {
			return q.reply(p)
		}
	}
	return notFound()
}

// setPolicy creates or replaces a policy from its JSON form (a
// definitions import's).
func setPolicy(broker *server.Server, vhost string, p policyJSON) error {
	def, err := tableFromJSON(p.Definition)
	if err != nil {
		return badRequest("definition: %v", err)
	}
	if p.Pattern == "" {
		return badRequest("[{error,{key_missing,pattern}}]")
	}
	if p.Definition == nil {
		return badRequest("[{error,{key_missing,definition}}]")
	}
	r := server.PolicyRequest{Name: p.Name, Pattern: p.Pattern, Priority: int64(p.Priority), Definition: def}
	if p.ApplyTo != "" {
		r.ApplyTo = p.ApplyTo
	}
	return applyPolicy(broker, vhost, r)
}

// applyPolicy validates r as RabbitMQ does and sets it. A refusal is 400
// with RabbitMQ's reason: "Validation failed", a blank line, one line per
// error, with the HTML tag characters escaped as RabbitMQ's management
// plugin escapes them (so <<"x">> reads &lt;&lt;"x"&gt;&gt;).
func applyPolicy(broker *server.Server, vhost string, r server.PolicyRequest) error {
	p, err := server.CheckPolicy(r)
	if err == nil {
		err = broker.SetPolicy(vhost, p)
	}
	var pe *server.PolicyError
	if errors.As(err, &pe) {
		reason := "Validation failed\n\n" + strings.Join(pe.Lines, "\n") + "\n"
		return &httpError{http.StatusBadRequest, "bad_request", htmlEscaper.Replace(reason), nil}
	}
	if err != nil {
		return badRequest("%v", err)
	}
	return nil
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// policyBody reads a PUT /api/policies body as RabbitMQ does: pattern and
// definition must be there; priority and apply-to are optional; every
// value's type is checked by validation, with RabbitMQ's messages.
func policyBody(q *request, name string) (server.PolicyRequest, error) {
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return server.PolicyRequest{}, err
	}
	for _, k := range []string{"pattern", "definition"} {
		if _, ok := body[k]; !ok {
			return server.PolicyRequest{}, badRequest("[{error,{key_missing,%s}}]", k)
		}
	}
	r := server.PolicyRequest{Name: name, Pattern: body["pattern"]}
	// A null sent is not a key left out: RabbitMQ checks it, and refuses it.
	sent := func(k string) (any, error) {
		v, ok := body[k]
		if ok && v == nil {
			return server.JSONNull{}, nil
		}
		return valueFromJSON(v)
	}
	var err error
	if r.ApplyTo, err = sent("apply-to"); err != nil {
		return r, badRequest("apply-to: %v", err)
	}
	if r.Priority, err = sent("priority"); err != nil {
		return r, badRequest("priority: %v", err)
	}
	if r.Pattern, err = sent("pattern"); err != nil {
		return r, badRequest("pattern: %v", err)
	}
	def, ok := body["definition"].(map[string]any)
	if !ok {
		v, _ := valueFromJSON(body["definition"])
		return r, &httpError{http.StatusBadRequest, "bad_request",
			htmlEscaper.Replace("Validation failed\n\ndefinition must be a dictionary: " + server.ErlangTerm(v) + "\n"), nil}
	}
	if r.Definition, err = tableFromJSON(def); err != nil {
		return r, badRequest("definition: %v", err)
	}
	if r.Definition == nil {
		r.Definition = map[string]any{}
	}
	return r, nil
}

func (s *Server) putPolicy(q *request) error {
	vhost, name := q.param("vhost"), q.param("name")
	if err := checkName("policy", name, 0); err != nil {
		return err
	}
	existing, err := s.policies(vhost)
	if err != nil {
		return err
	}
	r, err := policyBody(q, name)
	if err != nil {
		return err
	}
	if err := applyPolicy(s.broker, vhost, r); err != nil {
		return err
	}
	for _, e := range existing {
		if e.Name == name {
			return q.noContent(false)
		}
	}
	return q.noContent(true)
}

func (s *Server) deletePolicy(q *request) error {
	vhost, name := q.param("vhost"), q.param("name")
	ps, err := s.policies(vhost)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Name == name {
			if err := s.broker.DeletePolicy(vhost, name); err != nil {
				return err
			}
			return q.noContent(false)
		}
	}
	return notFound()
}
