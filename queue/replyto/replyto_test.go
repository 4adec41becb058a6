package replyto_test

import (
	"strings"
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/replyto"
)

// TestPseudoQueue: a reply name routes to its consumer while it lives, a
// reply the consumer cannot take is not routed, and the name stops
// routing once the consumer goes and the pseudo-queue is deleted.
func TestPseudoQueue(t *testing.T) {
	typ := replyto.NewType()
	q := typ.Open("/")
	name := q.Decl().Name
	if !strings.HasPrefix(name, replyto.Prefix) {
		t.Fatalf("reply name %q", name)
	}
	if _, err := typ.New(queue.Decl{Name: "x"}, queue.Limits{}, queue.Hooks{}); err == nil {
		t.Fatal("a direct reply-to queue was declared")
	}
	c := queuetest.NewRecorder(1, true)
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "r", Consumer: c}); err != nil {
		t.Fatal(err)
	}
	if err := q.AddConsumer(queue.ConsumeOptions{Tag: "r2", Consumer: c}); err != replyto.ErrConsumerSet {
		t.Fatalf("a second consumer: %v", err)
	}
	got, ok := typ.Lookup(name)
	if !ok || got != q {
		t.Fatal("the reply name does not route to its pseudo-queue")
	}
	if _, ok := typ.Lookup(replyto.Prefix + "nosuch"); ok {
		t.Fatal("an unknown reply name routes")
	}
	m := &queue.Message{Body: []byte("reply")}
	if routed, _ := typ.Publish(m, []queue.Queue{q}, nil, nil); !routed {
		t.Fatal("the reply was not delivered")
	}
	if routed, _ := typ.Publish(m, []queue.Queue{q}, nil, nil); routed {
		t.Fatal("a reply the consumer refused counts as routed")
	}
	if b := queuetest.Bodies(c.Take()); len(b) != 1 || b[0] != "reply" {
		t.Fatalf("consumer got %q", b)
	}
	if !q.RemoveConsumer("r", c) {
		t.Fatal("the pseudo-queue is not to be deleted with its consumer gone")
	}
	if _, _, err := q.Delete(true, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := typ.Lookup(name); ok || typ.Len() != 0 || !q.Deleted() {
		t.Fatal("the reply name still routes after the pseudo-queue was deleted")
	}
}
