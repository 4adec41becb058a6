//go:build jepsen

package clusterproc

import "time"

// The long scenarios (go test -tags jepsen): three rounds of each fault,
// every scenario, each queue kind on a cluster of its own, publishers at
// up to 1,000 messages a second each.
const jepsenLong = true

var jepsenScale = scale{phase: 3 * time.Second, fault: 8 * time.Second, down: 8 * time.Second, rounds: 3,
	interval: time.Millisecond, max: 500000, kinds: [][]queueKind{{classicKind}, {quorumKind}}}
