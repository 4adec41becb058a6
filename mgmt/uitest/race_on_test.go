//go:build race

package uitest

// raceEnabled: the race detector slows the broker and the API about tenfold,
// so the scale test uses fewer queues (its timings are reported without it).
const raceEnabled = true
