package mgmt

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestFailureLogKeepsEncodedPath: a failed request is logged with its path
// as sent, the vhost "/" still %2F, so the log names the object.
func TestFailureLogKeepsEncodedPath(t *testing.T) {
	var buf bytes.Buffer
	s := &Server{log: zerolog.New(&buf)}
	r := httptest.NewRequest("GET", "/api/queues/%2F/a%2Fb", nil)
	s.fail(httptest.NewRecorder(), r, errors.New("boom"))
	if !strings.Contains(buf.String(), `"path":"/api/queues/%2F/a%2Fb"`) {
		t.Fatalf("log: %s", buf.String())
	}
}
