//go:build !unix

package cluster

import "net"

// peerClosed: without a non-blocking peek an idle connection is taken as
// open (a call on one the peer closed fails, and is sent again only if
// its request was not written).
func peerClosed(net.Conn) bool { return false }
