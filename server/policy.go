package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"

	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// Policies are RabbitMQ's operator-side way to set queue limits: a policy
// names a regular expression of queue names, what it applies to, a
// priority and a definition, validated as RabbitMQ validates them
// (policy_validate.go). The matching policy with the highest priority
// applies (between equal priorities, the first name in byte order); one
// that applies to exchanges only never applies to a queue. For
// delivery-limit (quorum queues only) too the lower value wins. For message-ttl, expires, max-length and max-length-bytes the
// lower of the policy's value and the queue's own argument wins; for
// overflow, dead-letter-exchange and dead-letter-routing-key the queue's
// argument wins over the policy. Streams read max-age,
// stream-max-segment-size-bytes and max-length-bytes from the policy
// itself (Limits.Policy), where the policy wins (queue/stream).

// Policy is one policy of a vhost.
type Policy struct {
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"` // "queues", "exchanges" or "all"
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

type policyEntry struct {
	Policy
	re *regexp.Regexp
}

func policyBlobKey(vhost string) string { return "policies\x00" + vhost }

// SetPolicy creates or replaces a policy in vhost, stores it and applies it
// to the queues it matches. In a cluster it is a command of the metadata
// group, applied on every node.
func (s *Server) SetPolicy(vhost string, p Policy) error {
	v := s.vhost(vhost)
	if v == nil {
		return fmt.Errorf("no vhost %q", vhost)
	}
	if p.ApplyTo == "" {
		p.ApplyTo = "all"
	}
	if _, err := compilePolicy(p, true); err != nil {
		return err
	}
	if s.clustered() {
		_, err := s.propose(&metaCmd{Op: opPolicySet, VHost: vhost, Policy: &p})
		return err
	}
	return s.setPolicy(v, p)
}

// setPolicy is SetPolicy on this node.
func (s *Server) setPolicy(v *vhost, p Policy) error {
	e, err := compilePolicy(p, true)
	if err != nil {
		return err
	}
	v.mu.Lock()
	old := v.policies
	v.policies = append(withoutPolicy(v.policies, p.Name), e)
	sortPolicies(v.policies)
	if err := v.storePolicies(); err != nil {
		v.policies = old
		v.mu.Unlock()
		return err
	}
	v.mu.Unlock()
	v.applyPolicies()
	return nil
}

// DeletePolicy removes a policy; absent is not an error.
func (s *Server) DeletePolicy(vhost, name string) error {
	v := s.vhost(vhost)
	if v == nil {
		return fmt.Errorf("no vhost %q", vhost)
	}
	if s.clustered() {
		_, err := s.propose(&metaCmd{Op: opPolicyDelete, VHost: vhost, Name: name})
		return err
	}
	return s.deletePolicy(v, name)
}

// deletePolicy is DeletePolicy on this node.
func (s *Server) deletePolicy(v *vhost, name string) error {
	v.mu.Lock()
	old := v.policies
	v.policies = withoutPolicy(v.policies, name)
	if err := v.storePolicies(); err != nil {
		v.policies = old
		v.mu.Unlock()
		return err
	}
	v.mu.Unlock()
	v.applyPolicies()
	return nil
}

// Policies lists a vhost's policies, highest priority first.
func (s *Server) Policies(vhost string) []Policy {
	v := s.vhost(vhost)
	if v == nil {
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Policy, len(v.policies))
	for i, e := range v.policies {
		out[i] = e.Policy
	}
	return out
}

// compilePolicy checks p's definition (policy_validate.go; keys strictly
// for a new policy, leniently for a stored one; a whole float64 is an
// integer, as a Go caller or the store gives it) and compiles its pattern.
func compilePolicy(p Policy, strict bool) (policyEntry, error) {
	if lines := checkDefinition(p.Definition, strict, true); len(lines) > 0 {
		return policyEntry{}, &PolicyError{Lines: lines}
	}
	switch p.ApplyTo {
	case "queues", "exchanges", "all":
	default:
		return policyEntry{}, fmt.Errorf("invalid apply-to %q", p.ApplyTo)
	}
	re, err := regexp.Compile(p.Pattern)
	if err != nil {
		return policyEntry{}, fmt.Errorf("invalid pattern %q: %w", p.Pattern, err)
	}
	if _, err := policyLimits(p.Definition); err != nil {
		return policyEntry{}, err
	}
	return policyEntry{Policy: p, re: re}, nil
}

func withoutPolicy(ps []policyEntry, name string) []policyEntry {
	out := ps[:0:0]
	for _, e := range ps {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

func sortPolicies(ps []policyEntry) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Priority != ps[j].Priority {
			return ps[i].Priority > ps[j].Priority
		}
		return ps[i].Name < ps[j].Name
	})
}

// storePolicies writes the vhost's policies to the store. v.mu must be held.
func (v *vhost) storePolicies() error {
	ps := make([]Policy, len(v.policies))
	for i, e := range v.policies {
		ps[i] = e.Policy
	}
	b, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	return v.store.SaveBlob(policyBlobKey(v.name), b)
}

// loadPolicies reads the vhost's stored policies at start-up.
func (v *vhost) loadPolicies() error {
	b, err := v.store.LoadBlob(policyBlobKey(v.name))
	if err != nil {
		if errors.Is(err, persist.ErrNotFound) {
			return nil
		}
		return err
	}
	var ps []Policy
	if err := json.Unmarshal(b, &ps); err != nil {
		return err
	}
	for _, p := range ps {
		e, err := compilePolicy(p, false)
		if err != nil {
			v.log.Warn().Err(err).Str("policy", p.Name).Msg("stored policy no longer valid; skipped")
			continue
		}
		v.policies = append(v.policies, e)
	}
	sortPolicies(v.policies)
	return nil
}

// queuePolicy is the policy that applies to queue name, if any. v.mu must
// be held.
func (v *vhost) queuePolicy(name string) *Policy {
	for i := range v.policies {
		e := &v.policies[i]
		if e.ApplyTo != "exchanges" && e.re.MatchString(name) {
			return &e.Policy
		}
	}
	return nil
}

// effectiveLimits combines a queue's arguments with its policy. v.mu must
// be held.
func (v *vhost) effectiveLimits(name string, args map[string]any) (queue.Limits, error) {
	l, err := queue.ParseArgs(args)
	if err != nil {
		return l, err
	}
	p := v.queuePolicy(name)
	if p == nil {
		return l, nil
	}
	pl, _ := policyLimits(p.Definition)
	l.Policy = &queue.Policy{Name: p.Name, Definition: p.Definition}
	if pl.HasMessageTTL && (!l.HasMessageTTL || pl.MessageTTL < l.MessageTTL) {
		l.MessageTTL, l.HasMessageTTL = pl.MessageTTL, true
	}
	if pl.Expires > 0 && (l.Expires == 0 || pl.Expires < l.Expires) {
		l.Expires = pl.Expires
	}
	if pl.MaxLength >= 0 && (l.MaxLength < 0 || pl.MaxLength < l.MaxLength) {
		l.MaxLength = pl.MaxLength
	}
	if pl.MaxLengthBytes >= 0 && (l.MaxLengthBytes < 0 || pl.MaxLengthBytes < l.MaxLengthBytes) {
		l.MaxLengthBytes = pl.MaxLengthBytes
	}
	if _, set := args["x-overflow"]; !set {
		l.Overflow = pl.Overflow
	}
	if !l.HasDLX && pl.HasDLX {
		l.DeadLetterExchange, l.HasDLX = pl.DeadLetterExchange, true
	}
	if !l.HasDLRK && pl.HasDLRK {
		l.DeadLetterRoutingKey, l.HasDLRK = pl.DeadLetterRoutingKey, true
	}
	// delivery-limit is a quorum queue's (RabbitMQ's classic queues
	// ignore it); the lower of the policy's and the argument's wins.
	if args["x-queue-type"] == "quorum" && pl.HasDeliveryLimit && (!l.HasDeliveryLimit || pl.DeliveryLimit < l.DeliveryLimit) {
		l.DeliveryLimit, l.HasDeliveryLimit = pl.DeliveryLimit, true
	}
	return l, nil
}

// policyLimits reads a policy definition with the queue argument parser.
func policyLimits(def map[string]any) (queue.Limits, error) {
	args := map[string]any{}
	for k, v := range def {
		switch k {
		case "message-ttl", "expires", "max-length", "max-length-bytes", "delivery-limit":
			f, ok := v.(float64) // JSON numbers
			if !ok {
				if n, isInt := v.(int64); isInt {
					f, ok = float64(n), true
				}
			}
			if !ok || f != math.Trunc(f) {
				return queue.Limits{}, fmt.Errorf("policy %s: %v is not an integer", k, v)
			}
			args["x-"+k] = int64(f)
		case "overflow", "dead-letter-exchange", "dead-letter-routing-key":
			args["x-"+k] = v
		}
	}
	if _, ok := args["x-dead-letter-routing-key"]; ok {
		if _, ok := args["x-dead-letter-exchange"]; !ok {
			// Only a policy's routing key: it takes effect with the queue's
			// own dead-letter exchange.
			delete(args, "x-dead-letter-routing-key")
			l, err := queue.ParseArgs(args)
			l.DeadLetterRoutingKey, l.HasDLRK = def["dead-letter-routing-key"].(string)
			return l, err
		}
	}
	l, err := queue.ParseArgs(args)
	if err != nil {
		return l, fmt.Errorf("policy definition: %w", err)
	}
	return l, nil
}

// applyPolicies recomputes every queue's limits after a policy change.
func (v *vhost) applyPolicies() {
	v.mu.RLock()
	type change struct {
		q queue.LimitSetter
		l queue.Limits
	}
	var changes []change
	for name, q := range v.queues {
		ls, ok := q.(queue.LimitSetter)
		if !ok {
			continue
		}
		if l, err := v.effectiveLimits(name, q.Decl().Args); err == nil {
			changes = append(changes, change{ls, l})
		}
	}
	v.mu.RUnlock()
	for _, c := range changes {
		c.q.SetLimits(c.l)
	}
}
