package server

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue/stream"
	"github.com/warrenmq/warren/queue/stream/group"
)

// Policy validation as RabbitMQ 3.10 validates a policy (rabbit_policy's
// policy_validation, rabbit_policies' validate_policy and
// rabbit_parameter_validation), with its messages: a definition key must
// be one a validator knows and its value of the right type and range, the
// pattern a regular expression, apply-to one of queues, exchanges or all,
// the priority a number. A definition's values are JSON's, decoded as the
// management API decodes them: int64 for an integer literal, float64 for
// any other number, string, bool, nil, []any and amqp.Table.
//
// Warren sorts the keys RabbitMQ knows into three sets:
//
//   - policyApplied: validated and applied to the queues the policy matches;
//   - policyInert: validated as RabbitMQ validates them and kept (a
//     definitions export gives them back), with no effect on one Warren
//     node: mirroring, leader placement, queue modes and versions, quorum
//     queues' in-memory limits;
//   - policyNotApplied: RabbitMQ's, but with an effect a client would see
//     that Warren does not have; refused, so that nobody relies on it.
//
// Any other key is refused with RabbitMQ's "are not recognised policy
// settings".

var (
	policyApplied = []string{"dead-letter-exchange", "dead-letter-routing-key", "delivery-limit", "expires",
		"max-age", "max-length", "max-length-bytes", "message-ttl", "overflow", "stream-max-segment-size-bytes"}
	policyInert = []string{"ha-mode", "ha-params", "ha-promote-on-failure", "ha-promote-on-shutdown",
		"ha-sync-batch-size", "ha-sync-mode", "initial-cluster-size", "max-in-memory-bytes", "max-in-memory-length",
		"queue-leader-locator", "queue-master-locator", "queue-mode", "queue-version"}
	policyNotApplied = []string{"alternate-exchange", "dead-letter-strategy"}
)

// PolicyKeys lists the definition keys Warren applies and those it accepts
// without effect.
func PolicyKeys() (applied, inert []string) {
	return slices.Clone(policyApplied), slices.Clone(policyInert)
}

// PolicyError is a policy refused by validation: RabbitMQ's messages, one
// per line, in its order (definition, apply-to, pattern, priority).
type PolicyError struct {
	Lines []string
}

func (e *PolicyError) Error() string { return strings.Join(e.Lines, "; ") }

// PolicyRequest is a policy as the management API receives it: priority
// and apply-to as sent (nil when absent, JSONNull when null).
type PolicyRequest struct {
	Name       string
	Pattern    any
	ApplyTo    any
	Priority   any
	Definition map[string]any
}

// JSONNull is a JSON null that was sent, unlike a nil for a key absent.
type JSONNull struct{}

// CheckPolicy validates r as RabbitMQ does and returns it as a Policy
// (apply-to "all" and priority 0 when absent), or a *PolicyError.
func CheckPolicy(r PolicyRequest) (Policy, error) {
	p := Policy{Name: r.Name, ApplyTo: "all", Definition: r.Definition}
	var lines []string
	lines = append(lines, checkDefinition(r.Definition, true, false)...)
	switch a := r.ApplyTo.(type) {
	case nil:
	case string:
		p.ApplyTo = a
		if a != "queues" && a != "exchanges" && a != "all" {
			lines = append(lines, fmt.Sprintf("apply-to '%s' unrecognised; should be 'queues', 'exchanges' or 'all'", a))
		}
	default:
		lines = append(lines, fmt.Sprintf("apply-to '%s' unrecognised; should be 'queues', 'exchanges' or 'all'", erlangTerm(a)))
	}
	if pat, ok := r.Pattern.(string); !ok {
		lines = append(lines, fmt.Sprintf("pattern should be a binary but was %s", erlangTerm(r.Pattern)))
	} else if _, err := regexp.Compile(pat); err != nil {
		lines = append(lines, fmt.Sprintf("pattern should be regular expression but is invalid: %s", strconv.Quote(err.Error())))
	} else {
		p.Pattern = pat
	}
	switch n := r.Priority.(type) {
	case nil:
	case int64:
		p.Priority = int(n)
	case float64:
		// RabbitMQ takes any number; Warren orders policies by whole
		// priorities.
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			lines = append(lines, fmt.Sprintf("priority should be a whole number in Warren, actually was %s", erlangTerm(n)))
		}
		p.Priority = int(n)
	default:
		lines = append(lines, fmt.Sprintf("priority should be a number, actually was %s", erlangTerm(n)))
	}
	if len(lines) > 0 {
		return Policy{}, &PolicyError{Lines: lines}
	}
	return p, nil
}

// checkDefinition validates a definition. With strictKeys (a new policy)
// unknown keys are refused; without (a stored one, so that a policy stored
// by an older Warren still loads) they are ignored. With wholeFloats a
// float64 without a fraction counts as an integer (a Go caller's or the
// store's numbers); without, only int64 does, as RabbitMQ tells a JSON
// 2.0 from a 2.
func checkDefinition(def map[string]any, strictKeys, wholeFloats bool) []string {
	strict := strictKeys
	if len(def) == 0 {
		return []string{"no policy provided"}
	}
	keys := make([]string, 0, len(def))
	for k := range def {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var unknown, notApplied []string
	for _, k := range keys {
		v := def[k]
		if wholeFloats {
			if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				v = int64(f)
			}
		}
		switch {
		case slices.Contains(policyApplied, k) || slices.Contains(policyInert, k):
			if msg := checkPolicyValue(k, v, def); msg != "" {
				return []string{msg} // RabbitMQ reports the first bad value alone
			}
		case slices.Contains(policyNotApplied, k):
			notApplied = append(notApplied, pairTerm(k, v))
		default:
			unknown = append(unknown, pairTerm(k, v))
		}
	}
	if !strict {
		return nil
	}
	var lines []string
	if len(unknown) > 0 {
		lines = append(lines, "["+strings.Join(unknown, ",")+"] are not recognised policy settings")
	}
	if len(notApplied) > 0 {
		lines = append(lines, "["+strings.Join(notApplied, ",")+"] are RabbitMQ policy settings that Warren does not apply")
	}
	if len(lines) > 0 {
		lines = append(lines, "Warren applies "+strings.Join(policyApplied, ", ")+
			"; it accepts without effect "+strings.Join(policyInert, ", "))
	}
	return lines
}

// checkPolicyValue is rabbit_policies' (and rabbit_mirror_queue_misc's)
// check of one value: "" when it is valid.
func checkPolicyValue(k string, v any, def map[string]any) string {
	n, isInt := v.(int64)
	s, isStr := v.(string)
	bad := func(what string) string { return fmt.Sprintf("%s is not a valid %s", erlangTerm(v), what) }
	oneOf := func(what string, values ...string) string {
		if isStr && slices.Contains(values, s) {
			return ""
		}
		return bad(what)
	}
	atLeast := func(min int64, what string) string {
		if isInt && n >= min {
			return ""
		}
		return bad(what)
	}
	if strings.HasPrefix(k, "ha-") && k != "ha-mode" {
		if _, ok := def["ha-mode"]; !ok {
			return "ha-mode must be specified to specify ha-params, ha-sync-mode or ha-promote-on-shutdown"
		}
	}
	switch k {
	case "alternate-exchange":
		if !isStr {
			return bad("alternate exchange name")
		}
	case "dead-letter-exchange":
		if !isStr {
			return bad("dead letter exchange name")
		}
	case "dead-letter-routing-key":
		if !isStr {
			return bad("dead letter routing key")
		}
	case "message-ttl":
		return atLeast(0, "message TTL")
	case "expires":
		return atLeast(1, "queue expiry")
	case "max-length":
		return atLeast(0, "maximum length")
	case "max-length-bytes":
		return atLeast(0, "maximum length in bytes")
	case "max-in-memory-length", "max-in-memory-bytes":
		return atLeast(0, "maximum memory in bytes")
	case "delivery-limit":
		return atLeast(0, "delivery limit")
	case "max-age":
		// RabbitMQ 3.10 reads a string only (check_max_age).
		if _, err := group.ParseInterval(k, s); !isStr || err != nil {
			return bad("max age")
		}
	case "stream-max-segment-size-bytes":
		if !isInt || n < 0 || n > stream.MaxSegmentSize {
			return bad("segment size")
		}
	case "initial-cluster-size":
		return atLeast(0, "cluster size")
	case "overflow":
		return oneOf("overflow value", "drop-head", "reject-publish", "reject-publish-dlx")
	case "queue-mode":
		return oneOf("queue-mode value", "default", "lazy")
	case "queue-version":
		if isInt && (n == 1 || n == 2) {
			return ""
		}
		return bad("queue-version value")
	case "queue-leader-locator":
		return oneOf("queue leader locator value", "client-local", "balanced", "random", "least-leaders")
	case "queue-master-locator":
		if isStr && slices.Contains([]string{"min-masters", "client-local", "random"}, s) {
			return ""
		}
		return fmt.Sprintf("%s invalid queue-master-locator value", erlangTerm(v))
	case "ha-mode":
		return oneOf("ha-mode value", "all", "exactly", "nodes")
	case "ha-sync-mode":
		if !isStr || (s != "manual" && s != "automatic") {
			return fmt.Sprintf("ha-sync-mode must be \"manual\" or \"automatic\", got %s", erlangTerm(v))
		}
	case "ha-sync-batch-size":
		if !isInt || n <= 0 {
			return fmt.Sprintf("ha-sync-batch-size takes an integer greater than 0, %s given", erlangTerm(v))
		}
	case "ha-promote-on-shutdown", "ha-promote-on-failure":
		if !isStr || (s != "always" && s != "when-synced") {
			return fmt.Sprintf("%s must be \"always\" or \"when-synced\", got %s", k, erlangTerm(v))
		}
	}
	return ""
}

// pairTerm is {<<"k">>,v}, as Erlang prints a definition's pair.
func pairTerm(k string, v any) string { return "{" + erlangTerm(k) + "," + erlangTerm(v) + "}" }

// erlangTerm prints a JSON value as Erlang's ~p prints the term RabbitMQ
// decodes it to: strings as binaries, null, true and false as atoms, lists
// and maps (RabbitMQ wraps long terms across lines; this does not).
func erlangTerm(v any) string {
	switch v := v.(type) {
	case nil, JSONNull:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		return erlangFloat(v)
	case string:
		return erlangBinary(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = erlangTerm(x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case amqp.Table:
		return erlangMap(v)
	case map[string]any:
		return erlangMap(v)
	}
	return fmt.Sprint(v)
}

func erlangMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = erlangBinary(k) + " => " + erlangTerm(m[k])
	}
	return "#{" + strings.Join(parts, ",") + "}"
}

// erlangBinary prints <<"text">> for printable ASCII, else the bytes.
func erlangBinary(s string) string {
	printable := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			printable = false
			break
		}
	}
	if printable {
		r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
		return `<<"` + r.Replace(s) + `">>`
	}
	parts := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		parts[i] = strconv.Itoa(int(s[i]))
	}
	return "<<" + strings.Join(parts, ",") + ">>"
}

// erlangFloat prints a float as Erlang's shortest form: 1.5, 1.0, 1.0e20.
func erlangFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		return mant + "e" + strconv.Itoa(e)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// ErlangTerm prints a JSON value (as the management API decodes it) the
// way RabbitMQ's messages print the term: <<"text">>, null, [1,2], #{...}.
func ErlangTerm(v any) string { return erlangTerm(v) }
