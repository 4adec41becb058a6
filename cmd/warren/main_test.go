package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/conformance"
	"github.com/warrenmq/warren/internal/testaddr"
)

// logLines is a writer that hands each complete line to a channel.
type logLines struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func newLogLines() *logLines { return &logLines{lines: make(chan string, 1000)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case l.lines <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
}

// waitFor returns the first JSON line whose message is msg.
func (l *logLines) waitFor(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line := <-l.lines:
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q log line", msg)
		}
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "warren ") || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "commit ") {
		t.Fatalf("--version: %d %q", code, out)
	}
}

func TestHelpExitsZero(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "-frame-max") || !strings.Contains(out, "Usage: warren") {
		t.Fatalf("--help: %d %q", code, out)
	}
}

func TestPositionalArgumentRefused(t *testing.T) {
	code, out, errOut := runCLI(t, "--data-dir", t.TempDir(), "version")
	if code != 1 || out != "" || !strings.Contains(errOut, `unexpected argument \"version\"`) {
		t.Fatalf("warren version: %d %q %q", code, out, errOut)
	}
}

// TestBadValuesRefused: each bad value is refused before anything starts,
// with an error naming the flag (or its source), the value and the form.
func TestBadValuesRefused(t *testing.T) {
	dir := t.TempDir()
	conf := func(body string) string {
		p := filepath.Join(dir, strings.NewReplacer(" ", "", "=", "", ".", "", "/", "").Replace(body)+".conf")
		if err := os.WriteFile(p, []byte(body+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--frame-max", "1000"}, []string{"-frame-max", `\"1000\"`, "from 4096"}},
		{[]string{"--heartbeat", "soon"}, []string{"-heartbeat", `\"soon\"`, "seconds (60)"}},
		{[]string{"--heartbeat", "-5s"}, []string{"-heartbeat", `\"-5s\"`}},
		{[]string{"--consumer-timeout", "soon"}, []string{"-consumer-timeout", `\"soon\"`, "milliseconds (1800000)"}},
		{[]string{"--log-format", "xml"}, []string{"-log-format", `\"xml\"`, "console, json"}},
		{[]string{"--log-level", "loud"}, []string{"-log-level", `\"loud\"`, "debug, info"}},
		{[]string{"--mgmt-listen", "127.0.0.1"}, []string{"-mgmt-listen", `\"127.0.0.1\"`, "HOST:PORT"}},
		{[]string{"--prometheus-listen", "15692"}, []string{"-prometheus-listen", `\"15692\"`, "HOST:PORT"}},
		{[]string{"--listen", "5672"}, []string{"-listen", `\"5672\"`, "HOST:PORT"}},
		{[]string{"--channel-max", "70000"}, []string{"-channel-max", "65535"}},
		{[]string{"--vm-memory-high-watermark", "2"}, []string{"--vm-memory-high-watermark", `\"2\"`}},
		{[]string{"--tls-listen", "127.0.0.1:0"}, []string{"--tls-listen", "--tls-cert"}},
		{[]string{"--max-connections", "-1"}, []string{"--max-connections", "-1", "0 or more"}},
		{[]string{"--cluster-listen", "127.0.0.1:25672"}, []string{"--cluster-listen needs --cluster-secret", "WARREN_CLUSTER_SECRET"}},
		{[]string{"--cluster-listen", "127.0.0.1:25672", "--cluster-secret", "short"}, []string{"needs a secret of at least 8 characters; --cluster-secret has 5"}},
		{[]string{"--cluster-seeds", "127.0.0.1:25672"}, []string{"need --cluster-listen"}},
		{[]string{"--cluster-seeds", "127.0.0.1:25672,nowhere"}, []string{"-cluster-seeds", `\"nowhere\"`, "HOST:PORT"}},
		{[]string{"--cluster-listen", "127.0.0.1:25672", "--cluster-secret", "long-enough", "--node-name", "a,b"}, []string{"--node-name", "a,b", "without spaces or commas"}},
		{[]string{"--cluster-listen", "127.0.0.1:25672", "--cluster-secret", "long-enough", "--cluster-tls-cert", "x.pem"}, []string{"--cluster-tls-key is missing"}},
		{[]string{"--cluster-listen", "127.0.0.1:25672", "--cluster-secret", "long-enough", "--cluster-seeds", "127.0.0.1:1", "--cluster-join", "127.0.0.1:2"}, []string{"--cluster-join", "not both"}},
		{[]string{"--config", conf("cluster-join = 25672")}, []string{"cluster-join", `\"25672\"`, "HOST:PORT"}},
		{[]string{"--config", conf("frame_max = 10")}, []string{"frame_max", `\"10\"`, "from 4096"}},
		{[]string{"--config", conf("listeners.tcp.default = nowhere")}, []string{"listeners.tcp.default", `\"nowhere\"`, "HOST:PORT"}},
		{[]string{"--config", conf("cluster_formation.peer_discovery_backend = classic")}, []string{"unknown key", "cluster_formation.peer_discovery_backend"}},
		{[]string{"--config", conf("management.tcp.port = http")}, []string{"management.tcp.port", `\"http\"`, "port"}},
		{[]string{"--config", conf("vm_memory_high_watermark.relative = 7")}, []string{"vm_memory_high_watermark.relative", "--vm-memory-high-watermark", `\"7\"`}},
	} {
		args := append([]string{"--log-format", "json", "--data-dir", filepath.Join(dir, "never")}, c.args...)
		code, _, errOut := runCLI(t, args...)
		if code != 1 {
			t.Errorf("%v: exit %d", c.args, code)
		}
		var m map[string]any
		if c.args[0] == "--log-format" {
			// The format itself is bad: the console's.
		} else if err := json.Unmarshal([]byte(strings.TrimSpace(errOut)), &m); err != nil || m["level"] != "fatal" {
			t.Errorf("%v: not one fatal JSON line: %q", c.args, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: %q lacks %q", c.args, errOut, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err == nil {
		t.Error("a refused start created its data directory")
	}
}

// TestRabbitConf: rabbitmq.conf keys set the flags they stand for, mixed
// with Warren's names; the command line and the environment win.
func TestRabbitConf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rabbitmq.conf")
	body := `# RabbitMQ's syntax
listeners.tcp.default = 5673
listeners.ssl.default = 127.0.0.1:5674
management.tcp.port = 15673
prometheus.tcp.port = 15693
default_user = admin
default_pass = s3cret
vm_memory_high_watermark.absolute = 1073741824
disk_free_limit.relative = 1.5
heartbeat = 30
frame_max = 65536
channel_max = 100
max_message_size = 1048576
log.console.level = warning
ssl_options.cacertfile = /ca.pem
ssl_options.certfile = /cert.pem
ssl_options.keyfile = /key.pem
load_definitions = /defs.json
max-connections = 7
consumer_timeout = 900000
`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARREN_CHANNEL_MAX", "200")
	s := &settings{}
	fs := newFlags(s)
	if err := fs.Parse([]string{"--heartbeat", "45"}); err != nil {
		t.Fatal(err)
	}
	from := origins{}
	if err := applyEnvAndFile(fs, p, from); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"listen": "0.0.0.0:5673", "tls-listen": "127.0.0.1:5674", "mgmt-listen": "0.0.0.0:15673", "prometheus-listen": "0.0.0.0:15693",
		"default-user": "admin", "default-pass": "s3cret", "vm-memory-high-watermark": "1073741824B",
		"disk-free-limit": "mem_relative:1.5", "heartbeat": "45s", "frame-max": "65536", "channel-max": "200",
		"max-message-size": "1048576", "log-level": "warn", "tls-ca": "/ca.pem", "tls-cert": "/cert.pem",
		"tls-key": "/key.pem", "load-definitions": "/defs.json", "max-connections": "7",
		"consumer-timeout": "15m0s",
	}
	for name, v := range want {
		if got := fs.Lookup(name).Value.String(); got != v {
			t.Errorf("--%s = %q, want %q", name, got, v)
		}
	}
	if _, b, err := parseWatermark(s.memWatermark); err != nil || b != 1<<30 {
		t.Errorf("absolute watermark: %d, %v", b, err)
	}
	if got := from.name("frame-max"); got != p+":11 (frame_max) (--frame-max)" {
		t.Errorf("origin of frame-max: %q", got)
	}
	if got := from.name("channel-max"); got != "WARREN_CHANNEL_MAX (--channel-max)" {
		t.Errorf("origin of channel-max: %q", got)
	}
	if got := from.name("heartbeat"); got != "--heartbeat" {
		t.Errorf("origin of heartbeat: %q", got)
	}
}

func TestDurationSeconds(t *testing.T) {
	var d time.Duration
	f := durationFlag{&d, time.Hour}
	for in, want := range map[string]time.Duration{"60": time.Minute, "0": 0, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond} {
		if err := f.Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v", in, d, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", "2h", "7201"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTimeoutFlag: --consumer-timeout takes a duration or RabbitMQ's
// plain milliseconds; 0 and off turn it off.
func TestTimeoutFlag(t *testing.T) {
	var d time.Duration
	f := timeoutFlag{&d}
	for in, want := range map[string]time.Duration{"1800000": 30 * time.Minute, "30m": 30 * time.Minute,
		"1ms": time.Millisecond, "0": 0, "0s": 0, "off": 0, " 90s ": 90 * time.Second} {
		if err := f.Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v", in, d, err)
		}
	}
	if d = 0; f.String() != "off" {
		t.Errorf("0 shows as %q, want off", f.String())
	}
	for _, bad := range []string{"", "x", "-1", "-5s", "500us", "never"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestConsumerTimeoutFlag: --consumer-timeout reaches the broker: the
// conformance suite's consumer-timeout cases pass against a warren started
// with a short one.
func TestConsumerTimeoutFlag(t *testing.T) {
	const timeout = time.Second
	logs := newLogLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli(ctx, []string{"--log-format", "json", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--mgmt-listen", "off", "--prometheus-listen", "off", "--consumer-timeout", timeout.String()}, &bytes.Buffer{}, logs)
	}()
	addr, _ := logs.waitFor(t, "Warren started")["amqp"].(string)
	target := conformance.Target{URL: "amqp://guest:guest@" + addr + "/", ConsumerTimeout: timeout}
	ran := 0
	for _, c := range conformance.Cases() {
		if strings.HasPrefix(c.Name, "consumer-timeout/") {
			ran++
			t.Run(c.Name, func(t *testing.T) { c.Run(t, target) })
		}
	}
	if ran == 0 {
		t.Fatal("no consumer-timeout cases")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop")
	}
}

// TestStartLog: the start-up log names the version, the data directory,
// every listener and the default user's state; a second start finds the
// user existing.
func TestStartLog(t *testing.T) {
	dir := t.TempDir()
	for i, state := range []string{"created", "already existed"} {
		logs := newLogLines()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- cli(ctx, []string{"--log-format", "json", "--data-dir", dir, "--listen", "127.0.0.1:0",
				"--mgmt-listen", "127.0.0.1:0", "--prometheus-listen", "127.0.0.1:0", "--default-user", "ops"}, &bytes.Buffer{}, logs)
		}()
		starting := logs.waitFor(t, "Warren starting")
		if starting["version"] == "" || starting["data_dir"] != dir || starting["go"] != runtime.Version() {
			t.Errorf("start %d: %v", i, starting)
		}
		started := logs.waitFor(t, "Warren started")
		amqp, _ := started["amqp"].(string)
		mg, _ := started["management"].(string)
		prom, _ := started["prometheus"].(string)
		if !strings.HasPrefix(amqp, "127.0.0.1:") || !strings.HasPrefix(mg, "http://127.0.0.1:") ||
			!strings.HasPrefix(prom, "http://127.0.0.1:") || !strings.HasSuffix(prom, "/metrics") || prom == mg+"metrics" {
			t.Errorf("start %d: listeners %v", i, started)
		}
		// The Prometheus listener is its own, and needs no credentials.
		if resp, err := http.Get(prom); err != nil {
			t.Errorf("start %d: scrape %s: %v", i, prom, err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), "rabbitmq_identity_info{") {
				t.Errorf("start %d: scrape %s: %d %.200s", i, prom, resp.StatusCode, b)
			}
		}
		if started["default_user"] != "ops" || started["default_user_state"] != state {
			t.Errorf("start %d: default user %v, want %q", i, started, state)
		}
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("start %d: exit %d", i, code)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("broker did not stop")
		}
	}
}

func TestConsoleLogWithoutColourOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "console", 0)
	log.Info().Str("k", "v").Msg("hello")
	if strings.Contains(buf.String(), "\x1b[") || !strings.Contains(buf.String(), "hello") {
		t.Fatalf("console log off a terminal: %q", buf.String())
	}
}

// TestSystemdNotify: with NOTIFY_SOCKET set, the broker sends READY=1 once
// its listeners are up (a client can connect) and STOPPING=1 when told to
// stop.
func TestSystemdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "wn") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	read := func() string {
		t.Helper()
		ln.SetReadDeadline(time.Now().Add(20 * time.Second))
		buf := make([]byte, 4096)
		n, err := ln.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	logs := newLogLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli(ctx, []string{"--log-format", "json", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--mgmt-listen", "off", "--prometheus-listen", "off"}, &bytes.Buffer{}, logs)
	}()
	ready := read()
	if !strings.HasPrefix(ready, "READY=1\n") {
		t.Fatalf("first notification %q", ready)
	}
	started := logs.waitFor(t, "Warren started")
	c, err := net.Dial("tcp", started["amqp"].(string))
	if err != nil {
		t.Fatalf("not listening when READY=1 was sent: %v", err)
	}
	c.Close()
	cancel()
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("second notification %q", got)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop")
	}
}

func TestSystemdNotifyAbstract(t *testing.T) {
	name := "warren-test-" + strconv.Itoa(os.Getpid())
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "\x00" + name, Net: "unixgram"})
	if err != nil {
		t.Skipf("abstract sockets: %v", err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", "@"+name)
	if err := sdNotify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := ln.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("%q %v", buf[:n], err)
	}
}

func TestManPage(t *testing.T) {
	code, out, _ := runCLI(t, "--man-page")
	if code != 0 || !strings.HasPrefix(out, ".TH WARREN 8 ") {
		t.Fatalf("--man-page: %d %q", code, out)
	}
	newFlags(&settings{}).VisitAll(func(f *flag.Flag) {
		if f.Name != "man-page" && !strings.Contains(out, `\-\-`+strings.ReplaceAll(f.Name, "-", `\-`)) {
			t.Errorf("man page lacks --%s", f.Name)
		}
	})
	if !strings.Contains(out, "WARREN_FRAME_MAX") || !strings.Contains(out, "(default: 131072)") {
		t.Error("man page lacks the variables or defaults")
	}
}

// TestPackagingUnit: the systemd unit passes systemd-analyze verify (with
// ExecStart pointed at a built binary, which verify requires to exist).
func TestPackagingUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile("../../packaging/warren.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "LimitNOFILE=", "KillSignal=SIGTERM", "TimeoutStopSec="} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %s", want)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "warren.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/warren", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestHeartbeatZeroDisables: --heartbeat 0 offers no heartbeat in
// connection.tune (README: "0 disables"), the default offers 60 s.
func TestHeartbeatZeroDisables(t *testing.T) {
	for _, c := range []struct {
		args []string
		want uint16
	}{{[]string{"--heartbeat", "0"}, 0}, {nil, 60}} {
		logs := newLogLines()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- cli(ctx, append([]string{"--log-format", "json", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
				"--mgmt-listen", "off"}, c.args...), &bytes.Buffer{}, logs)
		}()
		addr, _ := logs.waitFor(t, "Warren started")["amqp"].(string)
		if got := offeredHeartbeat(t, addr); got != c.want {
			t.Errorf("%v: connection.tune offers heartbeat %d, want %d", c.args, got, c.want)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("broker did not stop")
		}
	}
}

// offeredHeartbeat logs in as guest at addr and returns the heartbeat of
// the broker's connection.tune.
func offeredHeartbeat(t *testing.T, addr string) uint16 {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fr := amqp.NewFrameReader(nc, 1<<16)
	next := func() amqp.Method {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := nc.Write(amqp.ProtocolHeader); err != nil {
		t.Fatal(err)
	}
	if _, ok := next().(*amqp.ConnectionStart); !ok {
		t.Fatal("no connection.start")
	}
	b, err := amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	tune, ok := next().(*amqp.ConnectionTune)
	if !ok {
		t.Fatal("no connection.tune")
	}
	return tune.Heartbeat
}

// TestEnvironmentOrigins: the settings served to warrenctl environment say
// where each value came from, and hide the password.
func TestEnvironmentOrigins(t *testing.T) {
	p := filepath.Join(t.TempDir(), "warren.conf")
	if err := os.WriteFile(p, []byte("frame_max = 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARREN_CHANNEL_MAX", "200")
	s := &settings{}
	fs := newFlags(s)
	if err := fs.Parse([]string{"--heartbeat", "45", "--config", p, "--default-pass", "s3cret"}); err != nil {
		t.Fatal(err)
	}
	from := origins{}
	if err := applyEnvAndFile(fs, s.config, from); err != nil {
		t.Fatal(err)
	}
	got := map[string][2]string{}
	for _, st := range environment(fs, from) {
		got[st.Name] = [2]string{st.Value, st.Origin}
		if (st.Name == "default-pass" || st.Name == "cluster-secret") && !st.Secret {
			t.Errorf("%s is not secret", st.Name)
		}
		if st.Name == "version" || st.Name == "man-page" {
			t.Errorf("%s listed as a setting", st.Name)
		}
	}
	for name, want := range map[string][2]string{
		"heartbeat":   {"45s", "command line"},
		"channel-max": {"200", "WARREN_CHANNEL_MAX"},
		"frame-max":   {"65536", p + ":1 (frame_max)"},
		"listen":      {"0.0.0.0:5672", "default"},
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

// TestClusterNode: with --cluster-listen (and the secret from the
// environment) the broker starts a cluster node of one and logs its
// membership.
func TestClusterNode(t *testing.T) {
	addr := testaddr.Free(t) // the cluster listener takes a fixed port: others dial it
	t.Setenv("WARREN_CLUSTER_SECRET", "env-cluster-secret")
	logs := newLogLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli(ctx, []string{"--log-format", "json", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
			"--mgmt-listen", "off", "--prometheus-listen", "off", "--node-name", "solo", "--cluster-listen", addr}, &bytes.Buffer{}, logs)
	}()
	started := logs.waitFor(t, "cluster node started")
	if started["node"] != "solo" || started["listen"] != addr {
		t.Errorf("cluster node started: %v", started)
	}
	logs.waitFor(t, "cluster bootstrapped")
	if m := logs.waitFor(t, "cluster membership"); m["solo"] == nil {
		t.Errorf("membership: %v", m)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not stop")
	}
}
