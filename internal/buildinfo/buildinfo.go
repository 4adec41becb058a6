// Package buildinfo reports the version a binary was built as: the release
// version stamped with -ldflags "-X github.com/warrenmq/warren/internal/buildinfo.Version=v1.2.3",
// the commit the Go toolchain recorded (vcs.revision, with "-dirty" for a
// modified tree) and the Go version.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version; scripts/release.sh stamps it. An
// unstamped build reports the module version when there is one (go
// install ...@v1.2.3), else "dev".
var Version = ""

// Commit is the commit stamped with -X, for builds the toolchain could not
// stamp (a source tree without .git, as in a container build); the
// toolchain's vcs.revision wins.
var Commit = ""

// Info is what a binary knows of its build.
type Info struct {
	Version   string
	Commit    string // "" when the build recorded none
	GoVersion string
}

// Read returns the binary's build information.
func Read() Info {
	in := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if in.Commit != "" && dirty {
			in.Commit += "-dirty"
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// String is the --version line: "NAME VERSION (commit C, go1.26)".
func (in Info) String(name string) string {
	commit := in.Commit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, %s)", name, in.Version, commit, in.GoVersion)
}
