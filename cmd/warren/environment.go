package main

import (
	"flag"

	"github.com/warrenmq/warren/mgmt"
)

// environment lists every setting as the broker runs with it, with where
// its value came from (warrenctl environment shows it): the command line,
// an environment variable, the config file's line, or the default.
func environment(fs *flag.FlagSet, from origins) []mgmt.Setting {
	cli := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cli[f.Name] = true })
	var out []mgmt.Setting
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "version", "man-page": // actions, not settings
			return
		}
		st := mgmt.Setting{Name: f.Name, Value: f.Value.String(), Origin: "default", Secret: f.Name == "default-pass" || f.Name == "cluster-secret"}
		if src, ok := from[f.Name]; ok {
			st.Origin = src
		} else if cli[f.Name] {
			st.Origin = "command line"
		}
		out = append(out, st)
	})
	return out
}
