//go:build unix

package cluster

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the peer of the idle connection c has closed
// it (its socket reads end of file or fails), without blocking or taking
// any byte. It looks through wrappers with a NetConn method (TLS) to the
// socket; a connection without one is taken as open.
func peerClosed(c net.Conn) bool {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case n > 0, errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		default: // 0 bytes: end of file; or a reset
			closed = true
		}
		return true // never wait for readiness
	})
	return closed || err != nil
}
