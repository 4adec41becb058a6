package cluster

import (
	"encoding/json"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// newHCLog is an hclog.Logger (what hashicorp/raft logs through) that
// writes into log: raft's lines become zerolog events with their fields,
// raft's info lines (state changes, which this package logs itself in
// its own words) at debug level.
func newHCLog(log zerolog.Logger) hclog.Logger {
	level := hclog.Info
	if log.GetLevel() <= zerolog.DebugLevel {
		level = hclog.Trace
	}
	return NewRaftLogger(log, level)
}

// NewRaftLogger is an hclog.Logger for raft groups that writes raft's
// lines from level up into log, as the metadata group's are: raft's
// errors (mostly a peer it cannot reach, which the membership log names
// in its own words) as warnings, and a message raft repeats (every retry,
// or once per group when many groups lose the same peer) at most once
// per 10 s.
func NewRaftLogger(log zerolog.Logger, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "raft",
		Level:      level,
		Output:     &hclogWriter{log: log},
		JSONFormat: true,
	})
}

// hclogWriter turns hclog's JSON lines into zerolog events. Raft repeats
// its warnings and errors while a peer is down (every retry); each
// message is logged at most once per 10 s at those levels.
type hclogWriter struct {
	log zerolog.Logger

	mu   sync.Mutex
	last map[string]time.Time
}

// quiet reports whether msg was logged less than 10 s ago.
func (w *hclogWriter) quiet(msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	now := time.Now()
	if t, ok := w.last[msg]; ok && now.Sub(t) < 10*time.Second {
		return true
	}
	if len(w.last) > 1000 {
		clear(w.last)
	}
	w.last[msg] = now
	return false
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		w.log.Debug().Bytes("line", p).Msg("raft")
		return len(p), nil
	}
	msg, _ := m["@message"].(string)
	var ev *zerolog.Event
	switch lvl := m["@level"]; {
	case (lvl == "error" || lvl == "warn") && w.quiet(msg):
		ev = w.log.Debug()
	case lvl == "error":
		ev = w.log.Warn() // mostly peers it cannot reach: the membership log says which
	case lvl == "warn" && msg != "no known peers, aborting election": // a node waiting to form
		ev = w.log.Info()
	case lvl == "warn" || lvl == "info":
		ev = w.log.Debug()
	default:
		ev = w.log.Trace()
	}
	for k, v := range m {
		switch k {
		case "@level", "@message", "@timestamp", "@caller":
		case "@module":
			ev = ev.Interface("module", v)
		default:
			ev = ev.Interface(k, v)
		}
	}
	ev.Msg("raft: " + msg)
	return len(p), nil
}

// refusalLog rate-limits the logging of refused connections: one line per
// peer host every 10 s, with the number left unsaid since.
type refusalLog struct {
	mu    sync.Mutex
	last  map[string]time.Time
	quiet map[string]int
}

// log returns ev with the peer's fields, or nil (a no-op event) when a
// refusal of this host was logged in the last 10 s.
func (r *refusalLog) log(ev *zerolog.Event, addr, name string) *zerolog.Event {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if name != "" {
		host += "/" + name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.quiet = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if t, ok := r.last[host]; ok && now.Sub(t) < 10*time.Second {
		r.quiet[host]++
		return nil
	}
	r.last[host] = now
	ev = ev.Str("peer", addr)
	if name != "" {
		ev = ev.Str("peer_node", name)
	}
	if q := r.quiet[host]; q > 0 {
		ev = ev.Int("also_refused_since_last_line", q)
		r.quiet[host] = 0
	}
	return ev
}
