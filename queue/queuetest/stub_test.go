package queuetest_test

import (
	"testing"

	"github.com/warrenmq/warren/queue/queuetest"
)

func TestStubType(t *testing.T) {
	queuetest.Run(t, queuetest.Harness{Type: &queuetest.StubType{Name: "stub"}})
}
