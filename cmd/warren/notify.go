package main

import (
	"net"
	"os"
	"strings"
)

// sdNotify sends state to systemd's notification socket ($NOTIFY_SOCKET)
// for a Type=notify unit: "READY=1" once the listeners are up,
// "STOPPING=1" when shutdown begins. Without the variable it does
// nothing. The protocol is one datagram of newline-separated VAR=value
// lines on a unix datagram socket; a name starting with '@' is in the
// abstract namespace.
func sdNotify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
