//go:build unix

package server

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/warrenmq/warren/amqp"
)

// lazyConn lets a connection's frame reader hold no buffer while the
// client is quiet: ReadLazy reads the socket itself through the runtime's
// poller (syscall.RawConn) and gives the buffer back each time the socket
// turns out to be empty, before it waits. The syscalls are the ones
// net.Conn.Read makes: a read, and after EAGAIN a wait and a read.
type lazyConn struct {
	net.Conn
	rc syscall.RawConn
}

// newLazyReader returns nc as an amqp.LazyReader, or nil when nc is not a
// plain socket (TLS).
func newLazyReader(nc net.Conn) amqp.LazyReader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &lazyConn{Conn: nc, rc: rc}
}

func (l *lazyConn) ReadLazy(take func() []byte, drop func()) (int, error) {
	var n int
	var rerr error
	err := l.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), take())
			switch {
			case errors.Is(rerr, syscall.EINTR):
				continue
			case errors.Is(rerr, syscall.EAGAIN):
				drop()
				return false
			}
			return true
		}
	})
	switch {
	case err != nil: // deadline, closed
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: l.LocalAddr(), Addr: l.RemoteAddr(), Err: rerr}
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}
