package mgmt

import (
	"strconv"
	"strings"
)

// Setting is one of the broker's settings as it runs: its flag name, its
// value as the flag prints it, and where the value came from.
type Setting struct {
	Name  string // the flag's name: "channel-max"
	Value string // as the flag prints it: "2047", "1m0s", "0.0.0.0:5672"
	// Origin is "default", "command line", the environment variable
	// ("WARREN_CHANNEL_MAX") or the config file's line ("warren.conf:3
	// (channel_max)").
	Origin string
	// Secret hides the value (a password) from the API.
	Secret bool
}

// settingJSON is a Setting as /api/nodes/{node}/environment shows it: the
// value typed as JSON (a number, a boolean or a string) and the key as
// rabbitmqctl environment names application settings (snake case).
type settingJSON struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Origin string `json:"origin"`
}

func toSettingJSON(st Setting) settingJSON {
	j := settingJSON{Name: st.Name, Key: strings.ReplaceAll(st.Name, "-", "_"), Value: st.Value, Origin: st.Origin}
	switch {
	case st.Secret:
		j.Value = "********"
	case st.Value == "true" || st.Value == "false":
		j.Value = st.Value == "true"
	default:
		if n, err := strconv.ParseInt(st.Value, 10, 64); err == nil {
			j.Value = n
		} else if f, err := strconv.ParseFloat(st.Value, 64); err == nil && strings.ContainsAny(st.Value, ".") && !strings.ContainsAny(st.Value, ":") {
			j.Value = f
		}
	}
	return j
}

// getEnvironment is GET /api/nodes/{node}/environment: Warren's own (RabbitMQ
// has no such endpoint; rabbitmqctl environment reads the node directly),
// for administrators only, passwords hidden.
func (s *Server) getEnvironment(q *request) error {
	if q.param("node") != s.broker.NodeName() {
		return notFound()
	}
	out := make([]settingJSON, 0, len(s.opts.Environment))
	for _, st := range s.opts.Environment {
		out = append(out, toSettingJSON(st))
	}
	return q.reply(out)
}
