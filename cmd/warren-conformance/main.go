// Command warren-conformance runs the conformance suite against a broker
// outside `go test`:
//
//	warren-conformance --url amqp://guest:guest@127.0.0.1:5672/ [--run REGEXP]
//	    [--mgmt-url http://guest:guest@127.0.0.1:15672] [--consumer-timeout 5s]
//
// With --mgmt-url the access-control cases create their users, vhosts and
// permissions through that management HTTP API; without it they are
// skipped. With --consumer-timeout (the broker's consumer_timeout) the
// consumer-timeout cases wait for it; without it they are skipped.
//
// It prints one line per case ("PASS name (12ms)" or "FAIL name: first
// error"), then "N passed, M failed", and exits 1 if any case failed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sync"
	"time"

	"github.com/warrenmq/warren/conformance"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("warren-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP URL of the broker under test")
	pattern := fs.String("run", "", "run only cases whose name matches this regular expression")
	timeout := fs.Duration("timeout", 60*time.Second, "per-case timeout")
	verbose := fs.Bool("v", false, "print every error and log line of failed cases")
	consumerTimeout := fs.Duration("consumer-timeout", 0, "the broker's consumer acknowledgement timeout (RabbitMQ's consumer_timeout, e.g. 5s); the consumer-timeout cases wait for it, and are skipped without it")
	mgmtURL := fs.String("mgmt-url", "", "management HTTP API with credentials (http://user:pass@host:port) through which the access cases set up users, vhosts and permissions; without it they are skipped")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	var re *regexp.Regexp
	if *pattern != "" {
		var err error
		if re, err = regexp.Compile(*pattern); err != nil {
			fmt.Fprintf(stderr, "bad --run pattern: %v\n", err)
			return 2
		}
	}

	target := conformance.Target{URL: *url, ConsumerTimeout: *consumerTimeout}
	if *mgmtURL != "" {
		admin := conformance.HTTPAdmin{Base: *mgmtURL}
		target.Admin = admin
		target.SetTracing = func(on bool) error { return admin.SetTracing(target.VHost(), on) }
	}
	passed, failed := 0, 0
	for _, c := range conformance.Cases() {
		if re != nil && !re.MatchString(c.Name) {
			continue
		}
		limit := *timeout
		if c.MinTimeout != nil {
			limit = max(limit, c.MinTimeout(target))
		}
		res := runCase(c, target, limit)
		if res.failed {
			failed++
			fmt.Fprintf(stdout, "FAIL %s: %s\n", c.Name, res.first)
			if *verbose {
				for _, l := range res.log {
					fmt.Fprintf(stdout, "    %s\n", l)
				}
			}
		} else {
			passed++
			fmt.Fprintf(stdout, "PASS %s (%dms)\n", c.Name, res.elapsed.Milliseconds())
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// result is the outcome of one case.
type result struct {
	failed  bool
	first   string
	log     []string
	elapsed time.Duration
}

// caseT implements conformance.T for one case.
type caseT struct {
	mu       sync.Mutex
	failed   bool
	first    string
	log      []string
	cleanups []func()
}

var _ conformance.T = (*caseT)(nil)

func (t *caseT) Helper() {}

func (t *caseT) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = append(t.log, fmt.Sprintf(format, args...))
}

func (t *caseT) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failed {
		t.failed = true
		t.first = msg
	}
	t.log = append(t.log, msg)
}

func (t *caseT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *caseT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *caseT) FailNow() {
	t.fail("FailNow called")
	runtime.Goexit()
}

func (t *caseT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *caseT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// takeCleanups removes and returns the registered cleanups, so that they run
// at most once.
func (t *caseT) takeCleanups() []func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.cleanups
	t.cleanups = nil
	return cs
}

// runCleanups runs the cleanups last-registered-first, each in its own
// goroutine so that one calling Fatalf (Goexit) or panicking does not stop
// the others. A cleanup may register further cleanups; they run too.
func (t *caseT) runCleanups(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		cs := t.takeCleanups()
		if len(cs) == 0 {
			return
		}
		for i := len(cs) - 1; i >= 0; i-- {
			if !t.guarded(cs[i], time.Until(deadline)) {
				t.fail("cleanup timed out")
				return
			}
		}
	}
}

// guarded runs f in a new goroutine, recording a panic as a failure. It
// reports false if f did not finish within limit.
func (t *caseT) guarded(f func(), limit time.Duration) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				t.fail(fmt.Sprintf("panic: %v", r))
			}
		}()
		f()
	}()
	if limit <= 0 {
		limit = time.Millisecond
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// runCase runs c in its own goroutine, then its cleanups.
func runCase(c conformance.Case, target conformance.Target, timeout time.Duration) result {
	t := &caseT{}
	start := time.Now()
	if !t.guarded(func() { c.Run(t, target) }, timeout) {
		t.fail(fmt.Sprintf("timed out after %v", timeout))
	}
	elapsed := time.Since(start)
	// Cleanups close connections, which also unblocks a timed-out case.
	t.runCleanups(timeout)
	t.mu.Lock()
	defer t.mu.Unlock()
	return result{failed: t.failed, first: t.first, log: append([]string(nil), t.log...), elapsed: elapsed}
}
