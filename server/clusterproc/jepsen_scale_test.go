//go:build !jepsen

package clusterproc

import "time"

// The short scenarios, part of the default go test run: one fault each
// (a pause or a partition held until the others have elected a leader
// and served, then fault more), a classic and a quorum queue on one
// cluster, each with its own clients and history; the scenarios run side
// by side.
const jepsenLong = false

var jepsenScale = scale{phase: 500 * time.Millisecond, fault: 1500 * time.Millisecond, down: time.Second, rounds: 1,
	interval: 2 * time.Millisecond, max: 5000, kinds: [][]queueKind{{classicKind, quorumKind}}, parallel: true}
