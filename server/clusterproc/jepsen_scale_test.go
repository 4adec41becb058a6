//go:build !jepsen

package clusterproc

import "time"

// The short scenarios, part of the default go test run: one fault each;
// a pause or a partition held beyond the election timeout (1.5 to 3 s).
const jepsenLong = false

var jepsenScale = scale{phase: 500 * time.Millisecond, fault: 3500 * time.Millisecond, down: 1500 * time.Millisecond, rounds: 1,
	interval: 2 * time.Millisecond, max: 5000}
