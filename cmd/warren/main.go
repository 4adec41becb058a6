// Command warren is the Warren AMQP 0-9-1 broker.
//
// Every flag can also be set as an environment variable (WARREN_ and the
// flag name in upper case with '-' as '_', e.g. WARREN_LISTEN) or in the
// --config file (lines "name = value", '#' starts a comment). A flag on the
// command line wins over the environment, which wins over the file.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	listen := fs.String("listen", "0.0.0.0:5672", "AMQP listen address HOST:PORT")
	dataDir := fs.String("data-dir", "./warren-data", "directory for durable state")
	config := fs.String("config", "", "optional config file of 'name = value' lines")
	user := fs.String("default-user", "guest", "user created at start-up")
	pass := fs.String("default-pass", "guest", "password of the default user")
	frameMax := fs.Uint("frame-max", 131072, "largest frame accepted, in bytes")
	channelMax := fs.Uint("channel-max", 2047, "most channels per connection")
	heartbeat := fs.Duration("heartbeat", 60*time.Second, "heartbeat interval offered to clients")
	maxMessage := fs.Uint64("max-message-size", 128<<20, "largest message body accepted, in bytes")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "console", "console or json")
	gcLimit := fs.Int64("gc-memory-limit", 192<<20, "Go runtime soft memory limit in bytes, which keeps RSS flat under load (0: none; GOMEMLIMIT wins when set)")
	pprofListen := fs.String("pprof-listen", "", "serve Go profiles (net/http/pprof) on HOST:PORT; off when empty")
	mgmtListen := fs.String("mgmt-listen", "0.0.0.0:15672", "management HTTP API and /metrics on HOST:PORT; \"\" or \"off\" disables")
	mgmtMaxBody := fs.Int64("mgmt-max-body-size", 20_000_000, "largest body of a management definitions import or publish, in bytes (other requests: 1 MiB)")
	tlsListen := fs.String("tls-listen", "", "amqps (AMQP over TLS) listen address HOST:PORT; off when empty")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) of the amqps listener")
	tlsKey := fs.String("tls-key", "", "PEM private key of the amqps listener")
	maxConns := fs.Int("max-connections", 0, "most client connections to the broker; more are closed at once (0: no limit)")
	maxUnacked := fs.Int("max-unacked-per-connection", 100000, "most unacknowledged deliveries per connection, whatever the prefetch")
	loopbackUsers := fs.String("loopback-users", "guest", "comma-separated users who may log in from localhost only (\"\" for none)")
	loadDefs := fs.String("load-definitions", "", "definitions file (RabbitMQ's JSON, as rabbitmqctl export_definitions writes it) imported at every start, after recovery")
	memWatermark := fs.String("vm-memory-high-watermark", "0.4", "memory alarm threshold: a fraction of the machine's memory (0.4) or an absolute size (2GB); publishers are blocked above it")
	diskFreeLimit := fs.String("disk-free-limit", "50MB", "disk alarm threshold: free space under --data-dir (50MB, 2GiB) or mem_relative:F (F times the machine's memory); publishers are blocked below it")
	repairLog := fs.Bool("repair-message-log", false, "start even if the message log is damaged, dropping the damaged records (the log names each file and byte range dropped); without it a damaged log stops start-up")
	tlsCA := fs.String("tls-ca", "", "PEM CA certificates that client certificates are verified against (asked for, not required; a verified one enables EXTERNAL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnvAndFile(fs, *config); err != nil {
		return err
	}

	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	var log zerolog.Logger
	if *logFormat == "json" {
		log = zerolog.New(os.Stderr)
	} else {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339})
	}
	log = log.Level(level).With().Timestamp().Logger()

	wmFraction, wmBytes, err := parseWatermark(*memWatermark)
	if err != nil {
		return err
	}
	diskLimit, err := parseDiskFreeLimit(*diskFreeLimit, server.TotalMemory())
	if err != nil {
		return err
	}
	if *channelMax > 65535 {
		return fmt.Errorf("--channel-max %d is above 65535", *channelMax)
	}
	srv, err := server.New(server.Config{
		Listen:         *listen,
		TLSListen:      *tlsListen,
		TLSCert:        *tlsCert,
		TLSKey:         *tlsKey,
		TLSCA:          *tlsCA,
		DataDir:        *dataDir,
		Users:          map[string]string{*user: *pass},
		FrameMax:       uint32(*frameMax),
		ChannelMax:     uint16(*channelMax),
		Heartbeat:      *heartbeat,
		MaxMessageSize: *maxMessage,
		Log:            &log,

		MaxConnections:           *maxConns,
		MaxUnackedPerConnection:  *maxUnacked,
		LoopbackUsers:            splitList(*loopbackUsers),
		RepairMessageLog:         *repairLog,
		MemoryHighWatermark:      wmFraction,
		MemoryHighWatermarkBytes: wmBytes,
		DiskFreeLimit:            diskLimit,
	})
	if err != nil {
		return err
	}
	if *loadDefs != "" {
		if err := mgmt.LoadDefinitionsFile(srv, *loadDefs); err != nil {
			srv.Close()
			return fmt.Errorf("--load-definitions: %w", err)
		}
		log.Info().Str("file", *loadDefs).Msg("definitions imported")
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && *gcLimit > 0 {
		// A soft limit: the collector works harder near it instead of
		// letting the heap double, so a broker draining a backlog does not
		// balloon. A live heap above it only costs collector CPU.
		debug.SetMemoryLimit(*gcLimit)
	}
	if *pprofListen != "" {
		go func() {
			// The default mux carries net/http/pprof's handlers.
			log.Warn().Err(http.ListenAndServe(*pprofListen, nil)).Msg("pprof listener stopped")
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *mgmtListen != "" && *mgmtListen != "off" {
		// A taken port (another broker's management plugin, say) leaves the
		// broker running without its management API.
		mg := mgmt.New(srv, mgmt.Options{Listen: *mgmtListen, Log: &log, MaxBodySize: *mgmtMaxBody})
		if err := mg.Listen(); err != nil {
			log.Error().Err(err).Msg("management API not started (--mgmt-listen)")
		} else {
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
	return srv.Serve(ctx)
}

// applyEnvAndFile fills flags not given on the command line from WARREN_*
// variables, then from the config file.
func applyEnvAndFile(fs *flag.FlagSet, path string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fromFile := map[string]string{}
	if path == "" {
		path = os.Getenv("WARREN_CONFIG")
	}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return fmt.Errorf("%s:%d: want 'name = value'", path, n)
			}
			k = strings.TrimSpace(k)
			if fs.Lookup(k) == nil {
				return fmt.Errorf("%s:%d: unknown setting %q", path, n, k)
			}
			fromFile[k] = strings.TrimSpace(v)
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "WARREN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
			return
		}
		if v, ok := fromFile[f.Name]; ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("config %s: %w", f.Name, e)
			}
		}
	})
	return err
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
