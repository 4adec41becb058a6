//go:build upgrade

package upgrade_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oldBuild is an earlier Warren, built from this repository's history,
// whose data directory the working tree's build must open without losing
// a confirmed message. Add a row before a change of an on-disk format
// (its parent commit) or at a release.
type oldBuild struct {
	name   string // the subtest's name
	commit string // a commit of this repository
	why    string // what of its on-disk layout later builds changed
}

var oldBuilds = []oldBuild{
	{
		name:   "raft-log-in-badger",
		commit: "0ed129f2e63dfa430bdd310c3ae6922f37509dc0",
		why: "the parent of 567ea8f, which added raftstore/wal.go and migrate.go: quorum queues' Raft log " +
			"entries are in Badger and are moved into the segmented log at the new build's open",
	},
	{
		name:   "quorum-snapshot-v2",
		commit: "287bee456aeacff01fe0eb8a3b5e8dbbc7f20c09",
		why: "the parent of e8ec56d, which made quorum snapshots version 3 (a message's body record): " +
			"the new build restores a version 2 snapshot",
	},
}

// stopMode is how the old broker stops before the new one opens its
// data directory.
type stopMode struct {
	name   string
	signal syscall.Signal
	// snapshot: the quorum queue is published to one message per Raft
	// entry until raft's snapshot threshold (8,192 entries) is passed, and
	// the old broker runs until raft has taken a snapshot (its check runs
	// every 30 s to 60 s), so that the new one restores a snapshot and
	// replays the log after it.
	snapshot bool
}

var stopModes = []stopMode{
	{name: "sigterm", signal: syscall.SIGTERM},
	{name: "sigkill", signal: syscall.SIGKILL},
	{name: "snapshot-sigkill", signal: syscall.SIGKILL, snapshot: true},
}

// TestUpgrade runs each old build on a fresh data directory, fills a
// durable classic queue, a quorum queue and a stream with confirmed
// persistent messages (part of them acked, part delivered and not acked
// at the stop), stops it by each stop mode, and opens the directory with
// the working tree's build, twice: every confirmed message not acked is
// there exactly once, the stream holds every one in order, the queues
// take new publishes, and the new broker logs no errors.
func TestUpgrade(t *testing.T) {
	root := repoRoot(t)
	bins := t.TempDir()
	newBin := filepath.Join(bins, "warren-new")
	goBuild(t, root, newBin)
	for _, ob := range oldBuilds {
		t.Run(ob.name, func(t *testing.T) {
			commit := resolveCommit(t, root, ob.commit)
			t.Logf("old build %s: %s", commit[:12], ob.why)
			oldBin := buildAt(t, root, commit, bins)
			for _, mode := range stopModes {
				t.Run(mode.name, func(t *testing.T) {
					start := time.Now()
					upgradeCase(t, "old "+commit[:7], oldBin, newBin, mode)
					t.Logf("case took %s", time.Since(start).Round(100*time.Millisecond))
				})
			}
		})
	}
}

// keepEnv names a directory where each case's data directories and
// broker logs are kept (in <dir>/<test name>/) for a look after a failure;
// without it they go with the test.
const keepEnv = "WARREN_UPGRADE_KEEP"

// caseDir is the case's directory: a temporary one, or under $keepEnv.
func caseDir(t *testing.T) string {
	keep := os.Getenv(keepEnv)
	if keep == "" {
		return t.TempDir()
	}
	dir := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept in %s", dir)
	return dir
}

// upgradeCase is one old build stopped one way, then the new build
// started twice on its data directory.
func upgradeCase(t *testing.T, oldName, oldBin, newBin string, mode stopMode) {
	dir := caseDir(t)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}

	old := startBroker(t, oldName, oldBin, data, filepath.Join(dir, "old.log"))
	qs, oldConn := fill(t, old, mode.snapshot)
	if mode.snapshot && qs[quorumKind] != nil {
		waitSnapshot(t, old, data, snapshotThreshold, 3*time.Minute)
	}
	old.stop(mode.signal) // the unacked deliveries' channel still open
	oldConn.Close()

	clean := mode.signal == syscall.SIGTERM
	nb := startBroker(t, "new", newBin, data, filepath.Join(dir, "new.log"))
	checkFirst(t, nb, qs, clean)
	nb.stop(syscall.SIGTERM)
	nb.checkLog()

	nb2 := startBroker(t, "new, restarted", newBin, data, filepath.Join(dir, "new2.log"))
	checkAgain(t, nb2, qs)
	nb2.stop(syscall.SIGTERM)
	nb2.checkLog()
}
