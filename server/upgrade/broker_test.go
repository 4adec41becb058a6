//go:build upgrade

package upgrade_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/internal/testaddr"
)

// Time bounds of the steps that wait on a process or a build.
const (
	buildTimeout = 10 * time.Minute // go build of cmd/warren, cold cache, 2 cores
	startTimeout = 2 * time.Minute  // a start that migrates and recovers a store
	stopTimeout  = time.Minute      // a SIGTERM until the process exits
)

// repoRoot is the top of the git work tree this package is in; the test
// skips without git or outside a work tree.
func repoRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("upgrade test: no git on PATH; it builds earlier commits of this repository")
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("upgrade test: not in a git work tree (%v); it builds earlier commits of this repository", err)
	}
	return strings.TrimSpace(string(out))
}

// resolveCommit is rev's full hash, or a skip saying why it is not in
// this clone's history.
func resolveCommit(t *testing.T, root, rev string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	why := "it is not in this clone's history"
	if sh, err := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(sh)) == "true" {
		why = "this is a shallow clone (git fetch --unshallow to run it)"
	}
	t.Skipf("upgrade test: commit %s is not available: %s", rev, why)
	return ""
}

// goBuild builds ./cmd/warren of the module in dir to out.
func goBuild(t *testing.T, dir, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/warren")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/warren in %s: %v\n%s", dir, err, b)
	}
	t.Logf("built %s in %s", out, time.Since(start).Round(100*time.Millisecond))
}

// buildAt builds cmd/warren as of commit (a full hash) into dir, from a
// detached worktree that is removed again before buildAt returns.
func buildAt(t *testing.T, root, commit, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src-"+commit[:12])
	out := filepath.Join(dir, "warren-"+commit[:12])
	if b, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", src, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", commit, err, b)
	}
	defer func() {
		if b, err := exec.Command("git", "-C", root, "worktree", "remove", "--force", src).CombinedOutput(); err != nil {
			t.Errorf("git worktree remove %s: %v\n%s", src, err, b)
		}
		exec.Command("git", "-C", root, "worktree", "prune").Run()
	}()
	goBuild(t, src, out)
	return out
}

// helpFlag matches a flag's line in the usage --help prints.
var helpFlag = regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)`)

// flagsOf is the set of flags bin's --help lists.
func flagsOf(t *testing.T, bin string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput() // exits 0 or 2 by version
	fs := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		fs[m[1]] = true
	}
	for _, need := range []string{"listen", "data-dir"} {
		if !fs[need] {
			t.Fatalf("%s --help lists no --%s:\n%s", bin, need, out)
		}
	}
	return fs
}

// broker is one warren process on loopback, in its own process group.
type broker struct {
	t       *testing.T
	name    string // for messages: "old 0ed129f", "new", ...
	addr    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // the process's exit, once exited is closed
}

// startBroker starts bin on data and waits until its AMQP port accepts.
// The process is killed (its whole group) at the test's end if still up.
func startBroker(t *testing.T, name, bin, data, logPath string) *broker {
	t.Helper()
	flags := flagsOf(t, bin)
	addr := freeAddr(t)
	args := []string{"--listen", addr, "--data-dir", data}
	for _, f := range [][2]string{
		{"mgmt-listen", "off"},
		{"prometheus-listen", "off"},
		{"log-format", "json"},
	} {
		if flags[f[0]] {
			args = append(args, "--"+f[0], f[1])
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, kv := range os.Environ() { // the test's own WARREN_* settings are not the broker's
		if !strings.HasPrefix(kv, "WARREN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	b := &broker{t: t, name: name, addr: addr, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		b.waitErr = cmd.Wait()
		logf.Close()
		close(b.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-b.exited:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-b.exited
		}
		if t.Failed() {
			t.Logf("%s's log (%s), its end:\n%s", name, logPath, b.logTail(30))
		}
	})
	t.Logf("%s: %s %s", name, filepath.Base(bin), strings.Join(args, " "))
	start := time.Now()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-b.exited:
			t.Fatalf("%s exited at start (%v); its log:\n%s", name, b.waitErr, b.logTail(60))
		case <-time.After(50 * time.Millisecond): // the poll's period
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not accepting after %s; its log:\n%s", name, addr, startTimeout, b.logTail(60))
		}
	}
	t.Logf("%s: accepting on %s after %s", name, addr, time.Since(start).Round(10*time.Millisecond))
	return b
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return testaddr.Free(t)
}

func (b *broker) url() string { return "amqp://guest:guest@" + b.addr + "/" }

// stop sends sig to the broker's process group and waits for it to exit:
// after SIGTERM it must exit by itself, with status 0, within stopTimeout.
func (b *broker) stop(sig syscall.Signal) {
	b.t.Helper()
	start := time.Now()
	syscall.Kill(-b.cmd.Process.Pid, sig)
	select {
	case <-b.exited:
	case <-time.After(stopTimeout):
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
		b.t.Fatalf("%s did not exit within %s of %v; its log:\n%s", b.name, stopTimeout, sig, b.logTail(40))
	}
	if sig == syscall.SIGTERM && b.waitErr != nil {
		b.t.Errorf("%s exited with %v after SIGTERM; its log:\n%s", b.name, b.waitErr, b.logTail(40))
	}
	b.t.Logf("%s: stopped by %v in %s", b.name, sig, time.Since(start).Round(10*time.Millisecond))
}

// logTail is the last n lines of the broker's log.
func (b *broker) logTail(n int) string {
	data, _ := os.ReadFile(b.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// storeWords mark a warning about durable state, which the test shows.
var storeWords = regexp.MustCompile(`(?i)store|raft|badger|wal|log|segment|snapshot|migrat|damage|corrupt|recover|repair|torn`)

// checkLog fails the test on every error (or worse) line of the broker's
// log and shows its warnings about durable state. The log is JSON
// (--log-format json) or, from a build without it, zerolog's console form.
func (b *broker) checkLog() {
	b.t.Helper()
	f, err := os.Open(b.logPath)
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	var bad []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		level := ""
		var rec struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			level = rec.Level
		} else {
			for _, l := range [][2]string{{" ERR ", "error"}, {" FTL ", "fatal"}, {" PNC ", "panic"}, {" WRN ", "warn"}} {
				if strings.Contains(line, l[0]) {
					level = l[1]
				}
			}
			if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
				level = "panic"
			}
		}
		switch level {
		case "error", "fatal", "panic":
			bad = append(bad, line)
		case "warn":
			if storeWords.MatchString(line) {
				b.t.Logf("%s warns: %s", b.name, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		b.t.Errorf("%s: reading its log: %v", b.name, err)
	}
	if len(bad) > 0 {
		b.t.Errorf("%s logged %d error lines (%s):\n%s", b.name, len(bad), b.logPath, strings.Join(bad, "\n"))
	}
}

// snapshotMeta is the part of raft's FileSnapshotStore meta.json read here.
type snapshotMeta struct {
	ID    string
	Index uint64
}

// waitSnapshot waits until a raft snapshot at an index of at least min is
// under data (quorum/raft/snapshots/<group>/<id>/meta.json; any depth, so
// that a layout moved by some build is found too). raft checks every
// SnapshotInterval (30 s) to twice that.
func waitSnapshot(t *testing.T, b *broker, data string, min uint64, timeout time.Duration) snapshotMeta {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		var found snapshotMeta
		filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "meta.json" || !strings.Contains(p, string(filepath.Separator)+"snapshots"+string(filepath.Separator)) {
				return nil
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return nil // being written
			}
			if strings.HasSuffix(filepath.Dir(p), ".tmp") {
				return nil // raft's snapshot being written
			}
			var m snapshotMeta
			if json.NewDecoder(bytes.NewReader(raw)).Decode(&m) == nil && m.Index >= min && m.Index > found.Index {
				found = m
			}
			return nil
		})
		if found.ID != "" {
			t.Logf("%s: raft snapshot %s (index %d) after %s", b.name, found.ID, found.Index, time.Since(start).Round(100*time.Millisecond))
			return found
		}
		select {
		case <-b.exited:
			t.Fatalf("%s exited while waiting for a snapshot (%v); its log:\n%s", b.name, b.waitErr, b.logTail(40))
		case <-time.After(200 * time.Millisecond): // the poll's period
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no raft snapshot at index >= %d under %s within %s", b.name, min, data, timeout)
		}
	}
}

var errTimeout = errors.New("timed out")

// within runs f until it returns nil or timeout passes; f's last error is
// in the result.
func within(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s: %w", errTimeout, timeout, err)
		}
		time.Sleep(100 * time.Millisecond) // the poll's period, not a wait for an event
	}
}
