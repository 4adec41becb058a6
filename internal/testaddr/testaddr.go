// Package testaddr hands tests loopback addresses for listeners they
// start later: a cluster's nodes must know each other's addresses before
// the first one listens.
//
// Listening on port 0 and closing the listener gives a port of the
// kernel's ephemeral range, which any process's next outgoing connection
// may take before the test listens on it ("address already in use" in
// CI, where several test binaries run at once). The ports handed out here
// lie below that range, where only listeners bind, and none is handed
// out twice in a process.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The ports tried: below Linux's default ephemeral range (32768-60999)
// and above the well-known services of a test machine (RabbitMQ's 4369,
// 5672, 15672, 25672 are outside it too).
const (
	lowPort  = 26000
	highPort = 32000
)

var handed struct {
	sync.Mutex
	ports map[int]bool
}

// Free returns "127.0.0.1:PORT" where nothing listened a moment ago.
func Free(t testing.TB) string {
	t.Helper()
	return FreeN(t, 1)[0]
}

// FreeN returns n distinct addresses as Free does.
func FreeN(t testing.TB, n int) []string {
	t.Helper()
	handed.Lock()
	defer handed.Unlock()
	if handed.ports == nil {
		handed.ports = map[int]bool{}
	}
	lo, hi := lowPort, highPort
	if first := ephemeralFirst(); first <= hi {
		hi = first - 1
	}
	out := make([]string, 0, n)
	if hi-lo < 1000 {
		// An unusual ephemeral range: the kernel's choice, then.
		for len(out) < n {
			a := kernelPort(t)
			if !handed.ports[a] {
				handed.ports[a] = true
				out = append(out, fmt.Sprintf("127.0.0.1:%d", a))
			}
		}
		return out
	}
	span := hi - lo + 1
	start := rand.IntN(span) // test processes running at once start apart
	for i := 0; i < span && len(out) < n; i++ {
		p := lo + (start+i)%span
		if handed.ports[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		handed.ports[p] = true
		out = append(out, ln.Addr().String())
	}
	if len(out) < n {
		t.Fatalf("testaddr: no free loopback port left in %d-%d", lo, hi)
	}
	return out
}

// ephemeralFirst is the first port of the kernel's ephemeral range
// (32768 where it cannot be read).
func ephemeralFirst() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return p
}

func kernelPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
