package conformance

import (
	"fmt"
	"regexp"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Policies set queue limits from the operator's side. These cases need a
// target that can set policies (rabbitmqctl set_policy on RabbitMQ).

// polQueue declares a fresh queue governed by a new policy with def, and
// returns the queue's name. Both are removed when the case ends.
func polQueue(t T, tg Target, ch *amqp.Channel, def map[string]any, args amqp.Table) string {
	t.Helper()
	name := clUniq("pol")
	pname := "conf-policy-" + name
	if err := tg.SetPolicy(pname, "^"+regexp.QuoteMeta(name)+"$", "queues", 10, def); err != nil {
		t.Fatalf("set policy: %v", err)
	}
	t.Cleanup(func() { tg.ClearPolicy(pname) })
	clCleanupQueue(t, tg, name)
	if _, err := ch.QueueDeclare(name, false, false, false, false, args); err != nil {
		t.Fatalf("queue.declare: %v", err)
	}
	return name
}

func init() {
	register(
		Case{
			// A policy's max-length applies to a queue without arguments.
			Name: "policy/max-length",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				q := polQueue(t, tg, ch, map[string]any{"max-length": 2}, nil)
				pub := clConfirmChan(t, conn)
				for i := 1; i <= 5; i++ {
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(i)))
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[4 5]" {
					t.Fatalf("queue holds %v, want [4 5]: the policy's max-length drops from the head", got)
				}
			},
		},
		Case{
			// The lower of the policy's max-length and the queue's own wins.
			Name: "policy/lower-max-length-wins",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				q := polQueue(t, tg, ch, map[string]any{"max-length": 3}, amqp.Table{"x-max-length": int32(1)})
				pub := clConfirmChan(t, conn)
				for i := 1; i <= 4; i++ {
					clPublishConfirmed(t, pub, "", q, clBody(fmt.Sprint(i)))
				}
				if got := clGetAll(t, ch, q); fmt.Sprint(got) != "[4]" {
					t.Fatalf("queue holds %v, want [4]", got)
				}
			},
		},
		Case{
			// A policy's dead-letter-exchange receives rejected messages.
			Name: "policy/dead-letter-exchange",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				dlx := clDeclareExchange(t, tg, ch, "fanout", nil)
				dlq := clDeclareQueue(t, tg, ch, "dlq", nil)
				clBindQueue(t, ch, dlq, "", dlx, nil)
				q := polQueue(t, tg, ch, map[string]any{"dead-letter-exchange": dlx}, nil)
				clPublishConfirmed(t, clConfirmChan(t, conn), "", q, clBody("m"))
				d := clGetWait(t, ch, q, false)
				if err := d.Reject(false); err != nil {
					t.Fatalf("reject: %v", err)
				}
				dd := clGetWait(t, ch, dlq, true)
				if string(dd.Body) != "m" {
					t.Fatalf("dead letter %q", dd.Body)
				}
				deaths, _ := dd.Headers["x-death"].([]any)
				if len(deaths) != 1 {
					t.Fatalf("x-death %v", dd.Headers["x-death"])
				}
			},
		},
		Case{
			// A policy applies to a queue declared before it.
			Name: "policy/applies-to-existing-queue",
			Run: func(t T, tg Target) {
				if tg.SetPolicy == nil {
					return
				}
				conn, ch := clDialChan(t, tg)
				name := clUniq("pol-late")
				clCleanupQueue(t, tg, name)
				if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
					t.Fatalf("queue.declare: %v", err)
				}
				pname := "conf-policy-" + name
				if err := tg.SetPolicy(pname, "^"+regexp.QuoteMeta(name)+"$", "queues", 10, map[string]any{"max-length": 1}); err != nil {
					t.Fatalf("set policy: %v", err)
				}
				t.Cleanup(func() { tg.ClearPolicy(pname) })
				pub := clConfirmChan(t, conn)
				// RabbitMQ applies a new policy to existing queues shortly
				// after set_policy returns: publish until it bites.
				n := 0
				clEventually(t, "the policy's max-length applies", func() bool {
					n++
					clPublishConfirmed(t, pub, "", name, clBody(fmt.Sprint(n)))
					q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
					return err == nil && q.Messages == 1
				})
			},
		},
	)
}
