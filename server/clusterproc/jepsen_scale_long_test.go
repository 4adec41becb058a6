//go:build jepsen

package clusterproc

import "time"

// The long scenarios (go test -tags jepsen): three rounds of each fault,
// publishers at full speed, every scenario.
const jepsenLong = true

var jepsenScale = scale{phase: 3 * time.Second, fault: 8 * time.Second, rounds: 3, max: 200000}
