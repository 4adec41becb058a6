package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Settings come from three places, in this order of precedence: the
// command line, WARREN_* environment variables, and the --config file.
//
// The config file is a list of "key = value" lines ('#' starts a comment).
// A key is either a Warren flag name (listen, frame-max: lower case with
// dashes) or one of the rabbitmq.conf keys in rabbitKeys (dotted or with
// underscores: listeners.tcp.default, frame_max), so RabbitMQ's
// rabbitmq.conf for the settings Warren has is read as it is, and the two
// may be mixed. The names cannot clash: only "heartbeat" is in both, with
// the same meaning (RabbitMQ's plain seconds are a valid duration here).
// Any other key is refused, named with its line.

// origins records where a flag's value came from when not the command
// line, for error messages: "WARREN_LISTEN" or "warren.conf:3 (frame_max)".
type origins map[string]string

// name is how an error names flag f: its origin, or "--f".
func (o origins) name(f string) string {
	if src, ok := o[f]; ok {
		return src + " (--" + f + ")"
	}
	return "--" + f
}

// rabbitKey maps one rabbitmq.conf key onto a Warren flag: conv turns the
// file's value into the flag's (nil: the value as it is).
type rabbitKey struct {
	flag string
	conv func(string) (string, error)
}

var rabbitKeys = map[string]rabbitKey{
	"listeners.tcp.default":             {"listen", listenerValue("0.0.0.0")},
	"listeners.ssl.default":             {"tls-listen", listenerValue("0.0.0.0")},
	"management.tcp.port":               {"mgmt-listen", portValue},
	"prometheus.tcp.port":               {"prometheus-listen", portValue},
	"default_user":                      {"default-user", nil},
	"default_pass":                      {"default-pass", nil},
	"vm_memory_high_watermark.relative": {"vm-memory-high-watermark", nil},
	"vm_memory_high_watermark.absolute": {"vm-memory-high-watermark", absoluteSize},
	"disk_free_limit.absolute":          {"disk-free-limit", absoluteSize},
	"disk_free_limit.relative":          {"disk-free-limit", func(v string) (string, error) { return "mem_relative:" + v, nil }},
	"heartbeat":                         {"heartbeat", nil},
	"consumer_timeout":                  {"consumer-timeout", nil},
	"frame_max":                         {"frame-max", nil},
	"channel_max":                       {"channel-max", nil},
	"max_message_size":                  {"max-message-size", nil},
	"log.console.level":                 {"log-level", nil},
	"ssl_options.cacertfile":            {"tls-ca", nil},
	"ssl_options.certfile":              {"tls-cert", nil},
	"ssl_options.keyfile":               {"tls-key", nil},
	"load_definitions":                  {"load-definitions", nil},
	"management.http_max_body_size":     {"mgmt-max-body-size", nil},
}

// listenerValue reads RabbitMQ's listener forms: a port (5672), or
// HOST:PORT (127.0.0.1:5672, [::1]:5672).
func listenerValue(host string) func(string) (string, error) {
	return func(v string) (string, error) {
		if _, err := strconv.ParseUint(v, 10, 16); err == nil {
			return net.JoinHostPort(host, v), nil
		}
		return v, nil // checked as HOST:PORT with the flag
	}
}

// portValue reads management.tcp.port: a port, listened on on every
// interface as RabbitMQ does.
func portValue(v string) (string, error) {
	if _, err := strconv.ParseUint(v, 10, 16); err != nil {
		return "", fmt.Errorf("%q is not a port: want 1 to 65535", v)
	}
	return net.JoinHostPort("0.0.0.0", v), nil
}

// absoluteSize reads a .absolute size: a plain number is bytes in
// rabbitmq.conf, where Warren's --vm-memory-high-watermark would read it
// as a fraction.
func absoluteSize(v string) (string, error) {
	if _, err := strconv.ParseUint(v, 10, 64); err == nil {
		return v + "B", nil
	}
	return v, nil
}

// readConfig reads the config file at path into flag name → value, noting
// each value's origin.
func readConfig(fs *flag.FlagSet, path string, from origins) (map[string]string, error) {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
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
			return nil, fmt.Errorf("%s:%d: %q: want 'key = value'", path, n, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		where := fmt.Sprintf("%s:%d", path, n)
		if fs.Lookup(k) != nil && k != "config" {
			out[k] = v
			from[k] = where
			continue
		}
		rk, ok := rabbitKeys[k]
		if !ok {
			return nil, fmt.Errorf("%s: unknown key %q: want a Warren flag name (warren --help) or one of the rabbitmq.conf keys Warren supports (README, Configuration)", where, k)
		}
		if rk.conv != nil {
			if v, err = rk.conv(v); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, k, err)
			}
		}
		out[rk.flag] = v
		from[rk.flag] = where + " (" + k + ")"
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return out, nil
}

// applyEnvAndFile fills flags not given on the command line from WARREN_*
// variables, then from the config file (--config or WARREN_CONFIG).
func applyEnvAndFile(fs *flag.FlagSet, path string, from origins) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if path == "" {
		path = os.Getenv("WARREN_CONFIG")
	}
	fromFile := map[string]string{}
	if path != "" {
		var err error
		if fromFile, err = readConfig(fs, path, from); err != nil {
			return err
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			delete(from, f.Name)
			return
		}
		if err != nil {
			return
		}
		env := "WARREN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			from[f.Name] = env
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
			return
		}
		if v, ok := fromFile[f.Name]; ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %q: %w", from[f.Name], v, e)
			}
		}
	})
	return err
}
