//go:build !faults

package persist_test

// crashRounds is how many kill -9 rounds TestCrash runs by default (CI);
// the faults build tag runs many more (crash_rounds_faults_test.go), and
// WARREN_PERSIST_CRASH_ROUNDS sets any number.
const crashRounds = 4
