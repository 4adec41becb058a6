// Package clusterproc holds the tests of a Warren cluster of broker
// processes (issue 14): three nodes, each a child process with its own
// data directory and ports, on 127.0.0.1 or each in a network namespace
// of its own (internal/jepsen's Netns, for partitions), killed with
// SIGKILL, paused with SIGSTOP, wiped and rejoined, cut apart. TestJepsen
// runs the Jepsen-style scenarios over internal/jepsen's history checker
// (by default once each, a classic and a quorum queue on one cluster,
// scenarios side by side); `-tags jepsen` runs their long versions. It
// has no code of its own.
package clusterproc
