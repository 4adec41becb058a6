// Command warren is the Warren AMQP 0-9-1 broker.
//
// Every flag can also be set as an environment variable (WARREN_ and the
// flag name in upper case with '-' as '_', e.g. WARREN_LISTEN) or in the
// --config file (config.go: Warren's flag names or rabbitmq.conf keys). A
// flag on the command line wins over the environment, which wins over the
// file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/internal/buildinfo"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errLogged is returned by run for an error it has already logged.
var errLogged = errors.New("logged")

// cli runs the broker until ctx is done and returns the exit status. An
// error before the logger exists (a bad flag) is logged by a logger of the
// format asked for, as far as the arguments tell.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errLogged):
		return 1
	}
	log := newLogger(stderr, guessLogFormat(args), zerolog.InfoLevel)
	log.WithLevel(zerolog.FatalLevel).Err(err).Msg("warren not started")
	return 1
}

// settings are the values of warren's flags.
type settings struct {
	listen, tlsListen, mgmtListen, pprofListen string
	promListen                                 string
	frameMax, channelMax, maxMessage           uint64
	mgmtMaxBody                                uint64
	heartbeat                                  time.Duration
	consumerTimeout                            time.Duration
	logLevel, logFormat                        string
	dataDir                                    string
	config                                     string
	user                                       string
	pass                                       string
	gcLimit                                    int64
	tlsCert                                    string
	tlsKey                                     string
	maxConns                                   int
	maxUnacked                                 int
	loopbackUsers                              string
	loadDefs                                   string
	memWatermark                               string
	diskFreeLimit                              string
	repairLog                                  bool
	repairStore                                bool
	tlsCA                                      string
	showVersion                                bool
	manPage                                    bool
	cluster                                    cluster.Config
}

// newFlags defines warren's flags on s, with their defaults: the broker's
// (server.DefaultConfig, mgmt.DefaultOptions) where the flag sets a field
// of theirs.
func newFlags(s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are logged; --help prints usage to stdout
	d, md := server.DefaultConfig(), mgmt.DefaultOptions()
	s.listen, s.mgmtListen = d.Listen, md.Listen
	s.frameMax, s.channelMax, s.maxMessage = uint64(d.FrameMax), uint64(d.ChannelMax), d.MaxMessageSize
	s.heartbeat = d.Heartbeat
	s.consumerTimeout = d.ConsumerTimeout
	s.promListen = ":15692"
	s.logLevel, s.logFormat = "info", "console"
	var user, pass string
	for u, p := range d.Users { // the one default user
		user, pass = u, p
	}
	fs.Var(addrFlag{v: &s.listen}, "listen", "AMQP listen address HOST:PORT")
	fs.StringVar(&s.dataDir, "data-dir", d.DataDir, "directory for durable state")
	fs.StringVar(&s.config, "config", "", "config file of 'key = value' lines: Warren flag names or rabbitmq.conf keys (README, Configuration)")
	fs.StringVar(&s.user, "default-user", user, "user created at the first start")
	fs.StringVar(&s.pass, "default-pass", pass, "password of the default user")
	fs.Var(uintFlag{&s.frameMax, server.MinFrameMax, math.MaxUint32, "bytes"}, "frame-max", fmt.Sprintf("largest frame accepted, in bytes, at least %d", server.MinFrameMax))
	fs.Var(uintFlag{&s.channelMax, 1, math.MaxUint16, "channels"}, "channel-max", "most channels per connection")
	fs.Var(durationFlag{&s.heartbeat, server.MaxHeartbeat}, "heartbeat", "heartbeat interval offered to clients: seconds (60) or a duration (1m); 0 disables")
	fs.Var(uintFlag{&s.maxMessage, 1, server.MaxMessageSizeLimit, "bytes"}, "max-message-size", "largest message body accepted, in bytes")
	fs.Var(choiceFlag{&s.logLevel, []string{"debug", "info", "warn", "error", "none"}, map[string]string{"warning": "warn", "critical": "error", "disabled": "none"}}, "log-level", "debug, info, warn (warning), error or none")
	fs.Var(choiceFlag{v: &s.logFormat, choices: []string{"console", "json"}}, "log-format", "console or json")
	fs.Int64Var(&s.gcLimit, "gc-memory-limit", 192<<20, "Go runtime soft memory limit in bytes, which keeps RSS flat under load (0: none; GOMEMLIMIT wins when set)")
	fs.Var(addrFlag{v: &s.pprofListen, optional: true}, "pprof-listen", "serve Go profiles (net/http/pprof) on HOST:PORT; off when empty")
	fs.Var(addrFlag{v: &s.mgmtListen, optional: true}, "mgmt-listen", "management HTTP API and /metrics on HOST:PORT; \"\" or \"off\" disables")
	fs.Var(addrFlag{v: &s.promListen, optional: true}, "prometheus-listen", "Prometheus metrics (/metrics, /metrics/per-object, /metrics/detailed, without authentication, as rabbitmq_prometheus) on HOST:PORT; \"\" or \"off\" disables")
	s.mgmtMaxBody = uint64(md.MaxBodySize)
	fs.Var(uintFlag{&s.mgmtMaxBody, 1, 1 << 40, "bytes"}, "mgmt-max-body-size", "largest body of a management definitions import or publish, in bytes (other requests: 1 MiB)")
	fs.Var(addrFlag{v: &s.tlsListen, optional: true}, "tls-listen", "amqps (AMQP over TLS) listen address HOST:PORT; off when empty")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate (chain) of the amqps listener")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of the amqps listener")
	fs.IntVar(&s.maxConns, "max-connections", d.MaxConnections, "most client connections to the broker; more are closed at once (0: no limit)")
	fs.Var(timeoutFlag{&s.consumerTimeout}, "consumer-timeout", "close a channel holding a delivery unacknowledged longer than this with 406 (RabbitMQ's consumer_timeout): a duration (30m) or milliseconds (1800000); 0 or off disables")
	fs.IntVar(&s.maxUnacked, "max-unacked-per-connection", d.MaxUnackedPerConnection, "most unacknowledged deliveries per connection, whatever the prefetch")
	fs.StringVar(&s.loopbackUsers, "loopback-users", strings.Join(d.LoopbackUsers, ","), "comma-separated users who may log in from localhost only (\"\" for none)")
	fs.StringVar(&s.loadDefs, "load-definitions", "", "definitions file (RabbitMQ's JSON, as rabbitmqctl export_definitions writes it) imported at every start, after recovery")
	fs.StringVar(&s.memWatermark, "vm-memory-high-watermark", strconv.FormatFloat(d.MemoryHighWatermark, 'g', -1, 64), "memory alarm threshold: a fraction of the machine's memory (0.4) or an absolute size (2GB); publishers are blocked above it")
	fs.StringVar(&s.diskFreeLimit, "disk-free-limit", formatSize(d.DiskFreeLimit), "disk alarm threshold: free space under --data-dir (50MB, 2GiB) or mem_relative:F (F times the machine's memory); publishers are blocked below it")
	fs.BoolVar(&s.repairLog, "repair-message-log", d.RepairMessageLog, "start even if the message log is damaged, dropping the damaged records (the log names each file and byte range dropped); without it a damaged log stops start-up")
	fs.BoolVar(&s.repairStore, "repair-store", d.RepairStore, "start even if tables or message bodies of the store are damaged: damaged tables are moved to a damaged-<time> folder in --data-dir (never deleted) and what they held is lost, messages whose bodies are damaged are dropped; the log names each; without it such a start fails with an error naming the file")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA certificates that client certificates are verified against (asked for, not required; a verified one enables EXTERNAL)")
	s.cluster.NodeName = defaultNodeName()
	fs.StringVar(&s.cluster.NodeName, "node-name", s.cluster.NodeName, "this node's name, unique in the cluster (default: the host name)")
	fs.Var(addrFlag{v: &s.cluster.Listen, optional: true}, "cluster-listen", "inter-node listener HOST:PORT (Raft and forwarded operations); off when empty: a single node")
	fs.Var(addrListFlag{v: &s.cluster.Seeds}, "cluster-seeds", "comma-separated cluster listeners HOST:PORT of the initial members: nodes started with the same seeds form one cluster")
	fs.StringVar(&s.cluster.Secret, "cluster-secret", "", fmt.Sprintf("secret shared by every node of the cluster, at least %d characters (better set as WARREN_CLUSTER_SECRET); a node that does not know it is refused", cluster.MinSecretLen))
	fs.Var(addrFlag{v: &s.cluster.Join, optional: true}, "cluster-join", "cluster listener HOST:PORT of a member of a running cluster, for a new node to join through")
	fs.StringVar(&s.cluster.TLS.Cert, "cluster-tls-cert", "", "PEM certificate of this node for inter-node TLS (with --cluster-tls-key and --cluster-tls-ca: mutual TLS)")
	fs.StringVar(&s.cluster.TLS.Key, "cluster-tls-key", "", "PEM private key of --cluster-tls-cert")
	fs.StringVar(&s.cluster.TLS.CA, "cluster-tls-ca", "", "PEM CA certificates that every node's certificate is verified against (host names are not checked)")
	fs.BoolVar(&s.showVersion, "version", false, "print the version, commit and Go version, and exit")
	fs.BoolVar(&s.manPage, "man-page", false, "print the warren(8) manual page (roff), generated from these flags, and exit")
	return fs
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := &settings{}
	fs := newFlags(s)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs)
			return nil
		}
		return err
	}
	if s.manPage {
		writeManPage(stdout, fs, buildinfo.Read().Version)
		return nil
	}
	if s.showVersion {
		fmt.Fprintln(stdout, buildinfo.Read().String("warren"))
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: warren takes only flags (warren --help; warren --version)", fs.Arg(0))
	}
	from := origins{}
	if err := applyEnvAndFile(fs, s.config, from); err != nil {
		return err
	}
	level := zerolog.InfoLevel
	switch s.logLevel {
	case "none":
		level = zerolog.Disabled
	default:
		level, _ = zerolog.ParseLevel(s.logLevel) // one of choiceFlag's
	}
	log := newLogger(stderr, s.logFormat, level)
	fail := func(err error) error {
		log.WithLevel(zerolog.FatalLevel).Err(err).Msg("warren not started")
		return errLogged
	}

	wmFraction, wmBytes, err := parseWatermark(s.memWatermark)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", from.name("vm-memory-high-watermark"), err))
	}
	diskLimit, err := parseDiskFreeLimit(s.diskFreeLimit, server.TotalMemory())
	if err != nil {
		return fail(fmt.Errorf("%s: %w", from.name("disk-free-limit"), err))
	}
	if s.gcLimit < 0 {
		return fail(fmt.Errorf("%s %d: want bytes, 0 or more", from.name("gc-memory-limit"), s.gcLimit))
	}
	heartbeat := s.heartbeat
	if heartbeat == 0 {
		heartbeat = server.HeartbeatOff // a zero Config.Heartbeat is the default
	}
	consumerTimeout := s.consumerTimeout
	if consumerTimeout == 0 {
		consumerTimeout = server.ConsumerTimeoutOff // a zero Config.ConsumerTimeout is the default
	}
	cfg := server.Config{
		Listen:         s.listen,
		TLSListen:      s.tlsListen,
		TLSCert:        s.tlsCert,
		TLSKey:         s.tlsKey,
		TLSCA:          s.tlsCA,
		DataDir:        s.dataDir,
		Users:          map[string]string{s.user: s.pass},
		FrameMax:       uint32(s.frameMax),
		ChannelMax:     uint16(s.channelMax),
		Heartbeat:      heartbeat,
		MaxMessageSize: s.maxMessage,
		Log:            &log,

		MaxConnections:           s.maxConns,
		MaxUnackedPerConnection:  s.maxUnacked,
		ConsumerTimeout:          consumerTimeout,
		LoopbackUsers:            splitList(s.loopbackUsers),
		RepairMessageLog:         s.repairLog,
		RepairStore:              s.repairStore,
		MemoryHighWatermark:      wmFraction,
		MemoryHighWatermarkBytes: wmBytes,
		DiskFreeLimit:            diskLimit,
		Cluster:                  s.cluster,
	}
	if err := cfg.Validate(); err != nil {
		return fail(flagError(err, from))
	}
	bi := buildinfo.Read()
	log.Info().Str("version", bi.Version).Str("commit", bi.Commit).Str("go", bi.GoVersion).
		Str("data_dir", s.dataDir).Msg("Warren starting")
	srv, err := server.New(cfg)
	if err != nil {
		return fail(err)
	}
	if s.loadDefs != "" {
		if err := mgmt.LoadDefinitionsFile(srv, s.loadDefs); err != nil {
			srv.Close()
			return fail(fmt.Errorf("%s: %w", from.name("load-definitions"), err))
		}
		log.Info().Str("file", s.loadDefs).Msg("definitions imported")
	}
	if err := srv.Listen(); err != nil {
		srv.Close()
		return fail(flagError(err, from)) // the cluster's TLS files are read here
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && s.gcLimit > 0 {
		// A soft limit: the collector works harder near it instead of
		// letting the heap double, so a broker draining a backlog does not
		// balloon. A live heap above it only costs collector CPU.
		debug.SetMemoryLimit(s.gcLimit)
	}
	if s.pprofListen != "" {
		go func() {
			// The default mux carries net/http/pprof's handlers.
			log.Warn().Err(http.ListenAndServe(s.pprofListen, nil)).Msg("pprof listener stopped")
		}()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var mgmtAddr, promAddr string
	if s.mgmtListen != "" || s.promListen != "" {
		// A taken port (another broker's management or Prometheus plugin,
		// say) leaves the broker running without that listener.
		mg := mgmt.New(srv, mgmt.Options{
			Listen: s.mgmtListen, PrometheusListen: s.promListen, Log: &log, MaxBodySize: int64(s.mgmtMaxBody),
			Environment: environment(fs, from),
		})
		if s.mgmtListen != "" {
			if err := mg.Listen(); err != nil {
				log.Error().Err(err).Msg("management API not started (--mgmt-listen)")
			} else {
				mgmtAddr = mg.Addr().String()
			}
		}
		if err := mg.ListenPrometheus(); err != nil {
			log.Error().Err(err).Msg("Prometheus listener not started (--prometheus-listen)")
		} else if a := mg.PrometheusAddr(); a != nil {
			promAddr = a.String()
		}
		if mgmtAddr != "" || promAddr != "" {
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := mg.Serve(ctx); err != nil {
					log.Error().Err(err).Msg("management API stopped")
				}
			}()
			defer func() { stop(); <-done }()
		}
	}
	logStarted(&log, srv, mgmtAddr, promAddr, s.user)
	// The listeners are open: connections queue in the backlog until
	// Serve accepts them.
	if err := sdNotify("READY=1\nSTATUS=accepting AMQP connections on " + srv.Addr().String()); err != nil {
		log.Warn().Err(err).Msg("systemd notification (NOTIFY_SOCKET) failed")
	}
	defer context.AfterFunc(ctx, func() {
		if err := sdNotify("STOPPING=1"); err != nil {
			log.Warn().Err(err).Msg("systemd notification (NOTIFY_SOCKET) failed")
		}
	})()
	return srv.Serve(ctx)
}

// configFlags are the flags that set the server.Config fields Validate
// checks beyond what the flags themselves check.
var configFlags = map[string]string{
	"MaxConnections":          "max-connections",
	"MaxUnackedPerConnection": "max-unacked-per-connection",
	"TLSListen":               "tls-listen",
	"Cluster.NodeName":        "node-name",
	"Cluster.Listen":          "cluster-listen",
	"Cluster.Seeds":           "cluster-seeds",
	"Cluster.Secret":          "cluster-secret",
	"Cluster.Join":            "cluster-join",
	"Cluster.TLS.Cert":        "cluster-tls-cert",
	"Cluster.TLS.Key":         "cluster-tls-key",
	"Cluster.TLS.CA":          "cluster-tls-ca",
}

// flagError words a *server.ConfigError of Validate in terms of the flag
// that set the field (and where its value came from).
func flagError(err error, from origins) error {
	var ce *server.ConfigError
	if !errors.As(err, &ce) || configFlags[ce.Field] == "" {
		return err
	}
	name := from.name(configFlags[ce.Field])
	switch ce.Field {
	case "TLSListen":
		return fmt.Errorf("%s %s needs --tls-cert and --tls-key (ssl_options.certfile, ssl_options.keyfile)", name, ce.Value)
	case "Cluster.Listen":
		if ce.Value == "" {
			return fmt.Errorf("--cluster-seeds, --cluster-join and --cluster-tls-* need %s", name)
		}
	case "Cluster.Secret":
		if masked, _ := ce.Value.(string); masked != "" {
			return fmt.Errorf("%s needs a secret of at least %d characters; %s has %d", from.name("cluster-listen"), cluster.MinSecretLen, name, len(masked))
		}
		return fmt.Errorf("%s needs %s (or WARREN_CLUSTER_SECRET) of at least %d characters", from.name("cluster-listen"), name, cluster.MinSecretLen)
	case "Cluster.TLS.Cert", "Cluster.TLS.Key", "Cluster.TLS.CA":
		if ce.Value == "" {
			return fmt.Errorf("inter-node TLS needs --cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca; %s is missing", name)
		}
	}
	return fmt.Errorf("%s %v: %s", name, ce.Value, ce.Want)
}

// logStarted logs the listeners and the default user once they are up.
func logStarted(log *zerolog.Logger, srv *server.Server, mgmtAddr, promAddr, user string) {
	ev := log.Info().Str("amqp", srv.Addr().String())
	if a := srv.TLSAddr(); a != nil {
		ev = ev.Str("amqps", a.String())
	}
	if mgmtAddr != "" {
		ev = ev.Str("management", "http://"+mgmtAddr+"/")
	}
	if promAddr != "" {
		ev = ev.Str("prometheus", "http://"+promAddr+"/metrics")
	}
	state := "created"
	if !srv.FirstStart() {
		state = "already existed"
		if _, ok := srv.Auth().User(user); !ok {
			state = "not present (deleted since the first start)"
		}
	}
	ev.Str("default_user", user).Str("default_user_state", state).Msg("Warren started")
}

// newLogger is a logger of format ("json" or "console") on w; a console
// logger uses colour only on a terminal.
func newLogger(w io.Writer, format string, level zerolog.Level) zerolog.Logger {
	var log zerolog.Logger
	if format == "json" {
		log = zerolog.New(w)
	} else {
		log = zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !isTerminal(w)})
	}
	return log.Level(level).With().Timestamp().Logger()
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// guessLogFormat finds --log-format in args (or WARREN_LOG_FORMAT) for
// logging an error of the command line itself.
func guessLogFormat(args []string) string {
	format := os.Getenv("WARREN_LOG_FORMAT")
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "log-format="); ok {
			format = v
		} else if a == "log-format" && i+1 < len(args) {
			format = args[i+1]
		}
	}
	return format
}

// printUsage is warren --help.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: warren [flags]\n\n%s\n\nFlags (also WARREN_<NAME> variables and --config keys):\n", buildinfo.Read().String("warren"))
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// defaultNodeName is --node-name's default: the host name.
func defaultNodeName() string {
	if h, err := os.Hostname(); err == nil && cluster.CheckNodeName(h) == nil {
		return h
	}
	return "warren"
}

// splitList splits a comma-separated flag value; "" is an empty, non-nil
// list.
func splitList(v string) []string {
	out := []string{}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
