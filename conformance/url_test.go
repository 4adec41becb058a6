package conformance

import (
	"os"
	"testing"
)

// TestAgainstURL runs the suite against the broker named by
// CONFORMANCE_URL (for example RabbitMQ in CI). It is skipped when unset;
// the in-process Warren run lives in the server package's tests.
func TestAgainstURL(t *testing.T) {
	u := os.Getenv("CONFORMANCE_URL")
	if u == "" {
		t.Skip("CONFORMANCE_URL not set")
	}
	Run(t, Target{URL: u})
}
