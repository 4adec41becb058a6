package amqp

import (
	"encoding/hex"
	"strings"
	"testing"
)

// unhex decodes hex written with spaces, newlines and // comments.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func wantCode(t testing.TB, err error, code uint16) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %v (%T), want *Error code %d", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("error code %d (%v), want %d", e.Code, e, code)
	}
	return e
}

// allMethods returns a zero value of every generated method, in id order.
func allMethods() []Method {
	var ms []Method
	for c := 0; c < 1<<8; c++ {
		for m := 0; m < 1<<8; m++ {
			if x := newMethod(uint16(c), uint16(m)); x != nil {
				ms = append(ms, x)
			}
		}
	}
	return ms
}
