package server_test

import (
	"testing"

	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestPoliciesPersist checks that policies survive a restart and that bad
// definitions are refused.
func TestPoliciesPersist(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{})
	srv := b.Server()
	p := server.Policy{Name: "limits", Pattern: "^orders\\.", ApplyTo: "queues", Priority: 1,
		Definition: map[string]any{"max-length": int64(10), "dead-letter-exchange": "dlx"}}
	if err := srv.SetPolicy("/", p); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetPolicy("/", server.Policy{Name: "bad", Pattern: "(", ApplyTo: "queues"}); err == nil {
		t.Fatal("a policy with an invalid pattern was accepted")
	}
	if err := srv.SetPolicy("/", server.Policy{Name: "bad", Pattern: ".", Definition: map[string]any{"max-length": "ten"}}); err == nil {
		t.Fatal("a policy with a string max-length was accepted")
	}
	b.Restart()
	srv = b.Server()
	got := srv.Policies("/")
	if len(got) != 1 || got[0].Name != "limits" || got[0].Definition["dead-letter-exchange"] != "dlx" {
		t.Fatalf("policies after restart: %+v", got)
	}
	if err := srv.DeletePolicy("/", "limits"); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	srv = b.Server()
	if got := srv.Policies("/"); len(got) != 0 {
		t.Fatalf("deleted policy came back: %+v", got)
	}
}
