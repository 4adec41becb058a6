// Package cluster is the cluster layer of Warren (issue 14): node
// identity, the one inter-node listener, the metadata Raft group and the
// membership view, on github.com/hashicorp/raft.
//
// One TCP listener per node (Config.Listen) carries every inter-node
// connection, optionally over mutual TLS. Each connection starts with a
// challenge-response handshake (handshake.go) that proves both sides know
// Config.Secret, tells each the other's node name and names the
// connection's channel: "rpc" (request/response by method name, for
// forwarding operations between nodes: Node.Handle, Node.Call), "raft"
// (the one connection this node keeps to a peer for the requests of
// every Raft group: raftmux.go; Node.Transport is a group's
// raft.Transport over it), or "raftsnap/<group>" (one snapshot install).
// The metadata group is one such group; each quorum queue is another.
//
// The metadata group is a replicated state machine the package does not
// interpret: the broker gives it a StateMachine (Apply, Snapshot,
// Restore, all bytes) and proposes commands from any node with
// Node.Propose, which answers once the command is committed and applied
// on the proposing node (a follower forwards it to the leader).
//
// Formation (form.go): nodes started with the same Config.Seeds form one
// cluster, in any start order: each learns every seed's name (the Raft
// server IDs are node names) and bootstraps the group with the same
// configuration, or joins a seed already in a cluster. Config.Join adds a
// new node through any member; Node.Remove takes one out.
//
// Test support is in package clustertest: a harness of in-process nodes
// on loopback and a fault-injecting network (drop, delay, partition).
package cluster
