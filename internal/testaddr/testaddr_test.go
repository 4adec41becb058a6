package testaddr

import (
	"net"
	"strconv"
	"testing"
)

// The addresses are distinct, below the ephemeral range, and free: a
// listener binds each.
func TestFreeN(t *testing.T) {
	addrs := FreeN(t, 20)
	addrs = append(addrs, Free(t))
	seen := map[string]bool{}
	first := ephemeralFirst()
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(port); first-lowPort >= 1000 && (p < lowPort || p >= first) {
			t.Fatalf("%s: port outside %d-%d", a, lowPort, first-1)
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		ln.Close()
	}
}
