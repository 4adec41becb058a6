package mgmt_test

import (
	"encoding/json"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// warrenKeys is the line Warren adds after a refused key.
const warrenKeys = "Warren applies dead-letter-exchange, dead-letter-routing-key, delivery-limit, expires, max-age, max-length, " +
	"max-length-bytes, message-ttl, overflow, stream-max-segment-size-bytes; it accepts without effect ha-mode, ha-params, ha-promote-on-failure, " +
	"ha-promote-on-shutdown, ha-sync-batch-size, ha-sync-mode, initial-cluster-size, max-in-memory-bytes, " +
	"max-in-memory-length, queue-leader-locator, queue-master-locator, queue-mode, queue-version\n"

// TestPolicyValidation: a policy is refused with 400 and RabbitMQ 3.10's
// reason (rabbit_policy, rabbit_policies, rabbit_parameter_validation:
// "Validation failed", a blank line, an error a line, HTML tag characters
// escaped as its management plugin escapes them).
func TestPolicyValidation(t *testing.T) {
	e := start(t)
	def := func(d map[string]any) map[string]any { return map[string]any{"pattern": "^v\\.", "definition": d} }
	cases := []struct {
		name   string
		body   any
		reason string
	}{
		{"unknown keys", def(map[string]any{"nosuch": 1, "alsonot": "x", "max-length": 3}),
			"Validation failed\n\n[{&lt;&lt;\"alsonot\"&gt;&gt;,&lt;&lt;\"x\"&gt;&gt;},{&lt;&lt;\"nosuch\"&gt;&gt;,1}] are not recognised policy settings\n" + warrenKeys},
		{"a RabbitMQ key Warren does not apply", def(map[string]any{"alternate-exchange": "ae"}),
			"Validation failed\n\n[{&lt;&lt;\"alternate-exchange\"&gt;&gt;,&lt;&lt;\"ae\"&gt;&gt;}] are RabbitMQ policy settings that Warren does not apply\n" + warrenKeys},
		{"string TTL", def(map[string]any{"message-ttl": "abc"}), "Validation failed\n\n&lt;&lt;\"abc\"&gt;&gt; is not a valid message TTL\n"},
		{"float TTL", def(map[string]any{"message-ttl": 1.5}), "Validation failed\n\n1.5 is not a valid message TTL\n"},
		{"negative max-length", def(map[string]any{"max-length": -1}), "Validation failed\n\n-1 is not a valid maximum length\n"},
		{"zero expires", def(map[string]any{"expires": 0}), "Validation failed\n\n0 is not a valid queue expiry\n"},
		{"bool max-length-bytes", def(map[string]any{"max-length-bytes": true}), "Validation failed\n\ntrue is not a valid maximum length in bytes\n"},
		{"overflow", def(map[string]any{"overflow": "drop-tail"}), "Validation failed\n\n&lt;&lt;\"drop-tail\"&gt;&gt; is not a valid overflow value\n"},
		{"numeric DLX", def(map[string]any{"dead-letter-exchange": 5}), "Validation failed\n\n5 is not a valid dead letter exchange name\n"},
		{"null delivery-limit", def(map[string]any{"delivery-limit": nil}), "Validation failed\n\nnull is not a valid delivery limit\n"},
		{"queue-mode", def(map[string]any{"queue-mode": "eager"}), "Validation failed\n\n&lt;&lt;\"eager\"&gt;&gt; is not a valid queue-mode value\n"},
		{"ha-sync-mode without ha-mode", def(map[string]any{"ha-sync-mode": "automatic"}),
			"Validation failed\n\nha-mode must be specified to specify ha-params, ha-sync-mode or ha-promote-on-shutdown\n"},
		// A bad value is reported before unknown keys, and alone.
		{"bad value and unknown key", def(map[string]any{"max-length": "x", "nosuch": 1}), "Validation failed\n\n&lt;&lt;\"x\"&gt;&gt; is not a valid maximum length\n"},
		{"empty definition", def(map[string]any{}), "Validation failed\n\nno policy provided\n"},
		// Every part's error, in RabbitMQ's order.
		{"several errors", map[string]any{"pattern": 7, "definition": map[string]any{"max-length": "x"}, "apply-to": "queues-only", "priority": "high"},
			"Validation failed\n\n&lt;&lt;\"x\"&gt;&gt; is not a valid maximum length\n" +
				"apply-to 'queues-only' unrecognised; should be 'queues', 'exchanges' or 'all'\n" +
				"pattern should be a binary but was 7\n" +
				"priority should be a number, actually was &lt;&lt;\"high\"&gt;&gt;\n"},
		{"null priority", map[string]any{"pattern": ".", "definition": map[string]any{"max-length": 1}, "priority": nil}, ""},
		{"missing pattern", map[string]any{"definition": map[string]any{"max-length": 1}}, "[{error,{key_missing,pattern}}]"},
		{"definition not an object", map[string]any{"pattern": ".", "definition": "x"},
			"Validation failed\n\ndefinition must be a dictionary: &lt;&lt;\"x\"&gt;&gt;\n"},
	}
	for _, c := range cases {
		body := e.expect("PUT", "/api/policies/%2F/v", c.body, 400)
		if c.reason == "" { // null priority: RabbitMQ's number check refuses null too
			errorIs(t, body, "bad_request", "Validation failed\n\npriority should be a number, actually was null\n")
			continue
		}
		var got struct{ Error, Reason string }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %s: %v", c.name, body, err)
		}
		if got.Error != "bad_request" || got.Reason != c.reason {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got.Reason, c.reason)
		}
	}
	if ps := e.broker.Policies("/"); len(ps) != 0 {
		t.Fatalf("refused policies were set: %+v", ps)
	}
	// What RabbitMQ takes, Warren takes: its keys with valid values, the
	// ones without effect here, a float priority that is whole.
	for i, d := range []map[string]any{
		{"max-length": 10, "max-length-bytes": 0, "message-ttl": 0, "expires": 1, "overflow": "reject-publish-dlx",
			"dead-letter-exchange": "dlx", "dead-letter-routing-key": "rk", "delivery-limit": 3},
		{"ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic", "queue-mode": "lazy", "queue-version": 2,
			"queue-master-locator": "min-masters", "queue-leader-locator": "balanced", "initial-cluster-size": 3},
	} {
		e.expect("PUT", "/api/policies/%2F/ok"+string(rune('a'+i)), map[string]any{"pattern": ".", "definition": d, "priority": 2.0}, 201)
	}
	var got map[string]any
	e.getJSON("/api/policies/%2F/okb", &got)
	if got["definition"].(map[string]any)["ha-mode"] != "exactly" || got["apply-to"] != "all" || got["priority"] != 2.0 {
		t.Errorf("accepted policy reads back as %v", got)
	}
}

// TestPolicyApplyToAndPriority: apply-to decides what a policy applies to
// and the highest priority among the matching ones wins.
func TestPolicyApplyToAndPriority(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	for _, q := range []string{"ap.a", "ap.b"} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	// An exchanges-only policy never limits a queue.
	e.expect("PUT", "/api/policies/%2F/xonly", map[string]any{"pattern": "^ap\\.", "apply-to": "exchanges", "priority": 9,
		"definition": map[string]any{"max-length": 1}}, 201)
	e.expect("PUT", "/api/policies/%2F/low", map[string]any{"pattern": "^ap\\.", "apply-to": "queues", "priority": 1,
		"definition": map[string]any{"max-length": 3}}, 201)
	e.expect("PUT", "/api/policies/%2F/high", map[string]any{"pattern": "^ap\\.b$", "apply-to": "all", "priority": 5,
		"definition": map[string]any{"max-length": 2}}, 201)
	for range 5 {
		for _, q := range []string{"ap.a", "ap.b"} {
			if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]struct {
		ready  int
		policy string
	}{"ap.a": {3, "low"}, "ap.b": {2, "high"}}
	for q, w := range want {
		waitFor(t, q+" at its policy's max-length", func() bool {
			qi, err := e.broker.Queue("/", q)
			return err == nil && qi.Ready == w.ready
		})
		var got map[string]any
		e.getJSON("/api/queues/%2F/"+q, &got)
		if got["policy"] != w.policy {
			t.Errorf("%s: policy %v, want %s", q, got["policy"], w.policy)
		}
	}
	// The exchanges-only policy, raised above the others, still does not
	// apply to queues; lowered to all, the lower one wins for ap.a.
	e.expect("PUT", "/api/policies/%2F/xonly", map[string]any{"pattern": "^ap\\.a$", "apply-to": "all", "priority": 9,
		"definition": map[string]any{"max-length": 1}}, 204)
	waitFor(t, "ap.a cut to 1 by the policy now applying to all", func() bool {
		qi, err := e.broker.Queue("/", "ap.a")
		return err == nil && qi.Ready == 1 && qi.Policy == "xonly"
	})
}

// TestPolicyDeliveryLimit: delivery-limit from a policy drops a quorum
// queue's message returned more often than it allows, and leaves classic
// queues alone, as RabbitMQ 3.10.
func TestPolicyDeliveryLimit(t *testing.T) {
	e := start(t)
	_, ch := e.dial()
	if _, err := ch.QueueDeclare("dl.q", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("dl.c", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	e.expect("PUT", "/api/policies/%2F/dl", map[string]any{"pattern": "^dl\\.", "definition": map[string]any{"delivery-limit": 1}}, 201)
	for _, q := range []string{"dl.q", "dl.c"} {
		if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte(q)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, q+" has its message", func() bool {
			qi, err := e.broker.Queue("/", q)
			return err == nil && qi.Ready == 1
		})
		for i := range 2 {
			m, ok, err := ch.Get(q, false)
			if err != nil || !ok {
				t.Fatalf("%s get %d: %v %v", q, i, ok, err)
			}
			if err := m.Nack(false, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the quorum queue's message dropped after two returns", func() bool {
		qi, err := e.broker.Queue("/", "dl.q")
		return err == nil && qi.Ready == 0 && qi.Unacked == 0
	})
	if qi, err := e.broker.Queue("/", "dl.c"); err != nil || qi.Ready+qi.Unacked != 1 {
		t.Fatalf("the classic queue's message: %+v %v", qi, err)
	}
}

// TestPolicyImport: a definitions import checks its policies as a PUT
// does; one without apply-to applies to all, and RabbitMQ's mirroring
// settings import (without effect).
func TestPolicyImport(t *testing.T) {
	e := start(t)
	defs := func(def map[string]any) map[string]any {
		return map[string]any{"policies": []any{map[string]any{"vhost": "/", "name": "imp", "pattern": "^imp\\.", "definition": def}}}
	}
	body := e.expect("POST", "/api/definitions", defs(map[string]any{"max-lenght": 5}), 400)
	errorIs(t, body, "bad_request", "Validation failed\n\n[{&lt;&lt;\"max-lenght\"&gt;&gt;,5}] are not recognised policy settings\n"+warrenKeys)
	e.expect("POST", "/api/definitions", defs(map[string]any{"ha-mode": "all", "max-length": 5}), 204)
	ps := e.broker.Policies("/")
	if len(ps) != 1 || ps[0].ApplyTo != "all" || ps[0].Definition["ha-mode"] != "all" {
		t.Fatalf("imported policies: %+v", ps)
	}
}
