//go:build faults

package persist_test

// crashRounds under the faults tag: enough kills to land in the rare
// windows (a memtable file created but not initialised, a value-log file
// being rotated or rewritten by GC).
const crashRounds = 100
