package conformance

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestAgainstURL runs the suite against the broker named by
// CONFORMANCE_URL (for example RabbitMQ in CI). It is skipped when unset;
// the in-process Warren run lives in the server package's tests. With
// CONFORMANCE_RESTART_CMD (a shell command, e.g. "rabbitmqctl stop_app &&
// rabbitmqctl start_app") the restart cases run too.
func TestAgainstURL(t *testing.T) {
	u := os.Getenv("CONFORMANCE_URL")
	if u == "" {
		t.Skip("CONFORMANCE_URL not set")
	}
	target := Target{URL: u}
	if cmd := os.Getenv("CONFORMANCE_RESTART_CMD"); cmd != "" {
		target.Restart = func() error { return RestartWith(target, cmd) }
	}
	if ctl := os.Getenv("CONFORMANCE_RABBITMQCTL"); ctl != "" {
		target.SetPolicy = func(name, pattern, applyTo string, priority int, def map[string]any) error {
			js, err := json.Marshal(def)
			if err != nil {
				return err
			}
			out, err := exec.Command(ctl, "set_policy", "--apply-to", applyTo, "--priority", strconv.Itoa(priority), name, pattern, string(js)).CombinedOutput()
			if err != nil {
				return &restartError{err: err, out: string(out)}
			}
			return nil
		}
		target.Admin = RabbitmqctlAdmin(ctl)
		target.SetTracing = RabbitmqctlTracing(ctl, target.VHost())
		target.MemoryAlarm = func(on bool) error {
			w := "0.4"
			if on {
				w = "0.0000001"
			}
			out, err := exec.Command(ctl, "set_vm_memory_high_watermark", w).CombinedOutput()
			if err != nil {
				return &restartError{err: err, out: string(out)}
			}
			return nil
		}
		target.SetMaxMessageSize = func(n int) error {
			if n == 0 {
				n = 134217728
			}
			out, err := exec.Command(ctl, "eval", fmt.Sprintf("application:set_env(rabbit, max_message_size, %d).", n)).CombinedOutput()
			if err != nil {
				return &restartError{err: err, out: string(out)}
			}
			return nil
		}
		target.ClearPolicy = func(name string) error {
			out, err := exec.Command(ctl, "clear_policy", name).CombinedOutput()
			if err != nil {
				return &restartError{err: err, out: string(out)}
			}
			return nil
		}
	}
	Run(t, target)
}

// RestartWith runs a shell command that restarts the broker, then waits up
// to a minute for it to accept TCP connections again.
func RestartWith(target Target, command string) error {
	out, err := exec.Command("sh", "-c", command).CombinedOutput()
	if err != nil {
		return &restartError{err: err, out: string(out)}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", target.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type restartError struct {
	err error
	out string
}

func (e *restartError) Error() string { return e.err.Error() + ": " + e.out }
