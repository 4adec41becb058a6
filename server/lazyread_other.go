//go:build !unix

package server

import (
	"net"

	"github.com/warrenmq/warren/amqp"
)

// newLazyReader: no lazy reads here; frame readers keep their buffer.
func newLazyReader(net.Conn) amqp.LazyReader { return nil }
