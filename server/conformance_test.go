package server_test

import (
	"testing"

	"github.com/warrenmq/warren/conformance"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// TestConformance runs the black-box suite against an in-process broker.
func TestConformance(t *testing.T) {
	url := servertest.Start(t, server.Config{})
	conformance.Run(t, conformance.Target{URL: url})
}
