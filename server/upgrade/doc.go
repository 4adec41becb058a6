// Package upgrade holds the upgrade test: data directories written by
// earlier builds of cmd/warren (built from this repository's history)
// opened by the working tree's build, which must keep every confirmed
// message. It runs behind the build tag upgrade:
//
//	go test -tags upgrade ./server/upgrade -count=1 -v -timeout 30m
//
// The package has no code of its own; this file keeps it a package when
// the tag is off.
package upgrade
