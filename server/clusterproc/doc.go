// Package clusterproc holds the tests of a Warren cluster of broker
// processes (issue 14): three nodes on loopback, each a child process with
// its own data directory and ports, killed with SIGKILL and restarted.
// It has no code of its own.
package clusterproc
