package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// Many raft groups that lose the same peer each log the same error: the
// node's log gets one warning with the group's fields, not an error per
// group; another message still gets its own line.
func TestRaftLoggerOneLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf).Level(zerolog.InfoLevel)
	l := NewRaftLogger(log, hclog.Error)
	for range 200 {
		l.Error("failed to make requestVote RPC", "target", "{Voter w1 127.0.0.1:25681}", "error", "connection refused")
	}
	l.Error("failed to appendEntries to", "peer", "w1")
	l.Warn("heartbeat timeout reached, starting election") // below hclog.Error: dropped
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"raft: failed to make requestVote RPC", "raft: failed to appendEntries to"} {
		if !strings.Contains(lines[i], `"level":"warn"`) || !strings.Contains(lines[i], want) {
			t.Fatalf("line %d: %s, want a warning %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[0], `"target":"{Voter w1 127.0.0.1:25681}"`) {
		t.Fatalf("the line lost raft's fields: %s", lines[0])
	}
}
