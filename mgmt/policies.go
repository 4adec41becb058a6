package mgmt

import (
	"slices"

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

// setPolicy creates or replaces a policy from its JSON form.
func (s *Server) setPolicy(vhost string, p policyJSON) error { return setPolicy(s.broker, vhost, p) }

func setPolicy(broker *server.Server, vhost string, p policyJSON) error {
	def, err := tableFromJSON(p.Definition)
	if err != nil {
		return badRequest("definition: %v", err)
	}
	if p.Pattern == "" {
		return badRequest("[{error,{key_missing,pattern}}]")
	}
	if len(def) == 0 {
		return badRequest("[{error,{key_missing,definition}}]")
	}
	err = broker.SetPolicy(vhost, server.Policy{
		Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def,
	})
	if err != nil {
		return badRequest("%v", err)
	}
	return nil
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
	var p policyJSON
	if err := q.decode(&p); err != nil {
		return err
	}
	p.Name = name
	if err := s.setPolicy(vhost, p); err != nil {
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
