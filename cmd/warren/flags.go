package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Flag values that check what they are given, so that a bad value from the
// command line, the environment or the config file is refused at start
// with the flag, the value and the expected form (the flag package names
// the first two: `invalid value "x" for flag -frame-max: ...`).

// uintFlag is an integer in [min, max]; unit says what it counts.
type uintFlag struct {
	v        *uint64
	min, max uint64
	unit     string
}

func (f uintFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatUint(*f.v, 10)
}

func (f uintFlag) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n < f.min || n > f.max {
		return fmt.Errorf("want an integer from %d to %d (%s)", f.min, f.max, f.unit)
	}
	*f.v = n
	return nil
}

// durationFlag is a duration: Go's form (60s, 1m30s) or RabbitMQ's plain
// seconds (60); max bounds it.
type durationFlag struct {
	v   *time.Duration
	max time.Duration
}

func (f durationFlag) String() string {
	if f.v == nil {
		return "0s"
	}
	return f.v.String()
}

func (f durationFlag) Set(s string) error {
	t := strings.TrimSpace(s)
	var d time.Duration
	if n, err := strconv.ParseUint(t, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if d, err = time.ParseDuration(t); err != nil || d < 0 {
		return fmt.Errorf("want seconds (60) or a duration (60s, 1m30s), at most %s", f.max)
	}
	if d > f.max {
		return fmt.Errorf("want seconds (60) or a duration (60s, 1m30s), at most %s", f.max)
	}
	*f.v = d
	return nil
}

// timeoutFlag is a timeout that may be off: Go's form (30m, 90s),
// RabbitMQ's plain milliseconds (1800000), or "off" or 0 (0: off).
type timeoutFlag struct{ v *time.Duration }

func (f timeoutFlag) String() string {
	switch {
	case f.v == nil:
		return "0s"
	case *f.v == 0:
		return "off"
	}
	return f.v.String()
}

func (f timeoutFlag) Set(s string) error {
	t := strings.TrimSpace(s)
	if t == "off" {
		*f.v = 0
		return nil
	}
	var d time.Duration
	if n, err := strconv.ParseUint(t, 10, 32); err == nil {
		d = time.Duration(n) * time.Millisecond
	} else if d, err = time.ParseDuration(t); err != nil || d < 0 || d > 0 && d < time.Millisecond {
		return fmt.Errorf("want milliseconds (1800000), a duration (30m, 90s) of 1ms or more, or 0 or off")
	}
	*f.v = d
	return nil
}

// choiceFlag is one of a fixed set of words; alias maps other spellings
// (RabbitMQ's log levels) onto them.
type choiceFlag struct {
	v       *string
	choices []string
	alias   map[string]string
}

func (f choiceFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f choiceFlag) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	if a, ok := f.alias[t]; ok {
		t = a
	}
	if !slices.Contains(f.choices, t) {
		return fmt.Errorf("want one of %s", strings.Join(f.choices, ", "))
	}
	*f.v = t
	return nil
}

// addrFlag is a listener address HOST:PORT (HOST may be empty: every
// interface); an optional one is disabled by "" or "off".
type addrFlag struct {
	v        *string
	optional bool
}

func (f addrFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f addrFlag) Set(s string) error {
	t := strings.TrimSpace(s)
	if f.optional && (t == "" || t == "off") {
		*f.v = ""
		return nil
	}
	if err := checkHostPort(t); err != nil {
		if f.optional {
			return fmt.Errorf("%w, or \"off\"", err)
		}
		return err
	}
	*f.v = t
	return nil
}

// addrListFlag is a comma-separated list of HOST:PORT addresses.
type addrListFlag struct{ v *[]string }

func (f addrListFlag) String() string {
	if f.v == nil {
		return ""
	}
	return strings.Join(*f.v, ",")
}

func (f addrListFlag) Set(s string) error {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a); err != nil {
			return fmt.Errorf("%q: %w, comma-separated", a, err)
		}
		if slices.Contains(out, a) {
			return fmt.Errorf("%q is listed twice", a)
		}
		out = append(out, a)
	}
	*f.v = out
	return nil
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("want HOST:PORT (127.0.0.1:5672, 0.0.0.0:5672, [::1]:5672)")
	}
	return nil
}
