//go:build linux

package jepsen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Netns is a private network for broker processes on one machine, so
// that chosen pairs of them can be partitioned without touching the
// host's network or anything else running on it: one Linux network
// namespace per node, each with its own address (10.213.0.i+1/24) on an
// eth0 plugged into a bridge in a namespace of its own. Nothing is added
// to the host's namespace. A partition between two nodes gives each a
// permanent neighbour entry for the other that points at a MAC address
// nobody has, so their frames go nowhere (a connect hangs, an
// established connection stops hearing back) until Heal deletes them.
// The test process reaches a node by Dial, which creates its socket
// inside that node's namespace.
//
// It needs root and iproute2's ip; NewNetns says why it cannot run.
type Netns struct {
	prefix string
	n      int
	cut    map[[2]int]bool
}

// netnsPrefix starts every namespace name Netns creates; the pid after
// it lets CleanStaleNetns tell a dead run's namespaces from a live one's.
const netnsPrefix = "wj-"

var netnsSeq atomic.Int64

// bogusMAC is the neighbour address of a cut peer: locally administered,
// owned by no interface.
const bogusMAC = "02:00:5e:00:de:ad"

// NewNetns creates the namespaces of n nodes (n <= 200).
func NewNetns(n int) (*Netns, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("network namespaces need iproute2's ip: " + err.Error())
	}
	CleanStaleNetns()
	nn := &Netns{prefix: fmt.Sprintf("%s%d-%d-", netnsPrefix, os.Getpid(), netnsSeq.Add(1)), n: n, cut: map[[2]int]bool{}}
	sw := nn.prefix + "sw"
	steps := [][]string{
		{"netns", "add", sw},
		{"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"},
	}
	for i := range n {
		ns := nn.Name(i)
		v := "v" + strconv.Itoa(i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", sw, "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", sw, "link", "set", v, "master", "br0"},
			[]string{"-n", sw, "link", "set", v, "up"},
			[]string{"-n", ns, "addr", "add", nn.Addr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			nn.Close()
			return nil, err
		}
	}
	return nn, nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CleanStaleNetns deletes the namespaces that runs no longer alive left
// behind (a test binary killed before its cleanup).
func CleanStaleNetns() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, netnsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || unix.Kill(pid, 0) == nil {
			continue
		}
		_ = ip("netns", "del", name)
	}
}

// Name is node i's namespace.
func (nn *Netns) Name(i int) string { return nn.prefix + "n" + strconv.Itoa(i+1) }

// Addr is node i's address.
func (nn *Netns) Addr(i int) string { return "10.213.0." + strconv.Itoa(i+1) }

// Command runs name in node i's namespace (through ip netns exec, which
// execs it: the process's pid is the command's).
func (nn *Netns) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nn.Name(i), name}, args...)...)
}

// Dial connects to addr from inside node i's namespace.
func (nn *Netns) Dial(ctx context.Context, i int, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := nn.Do(i, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr inside node i's namespace.
func (nn *Netns) Listen(i int, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := nn.Do(i, func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Do runs f on a thread of its own moved into node i's namespace: the
// sockets f creates stay in that namespace, whichever thread uses them
// later. A thread that cannot go back to the host's namespace is never
// unlocked, so Go retires it.
func (nn *Netns) Do(i int, f func() error) error {
	target, err := os.Open("/run/netns/" + nn.Name(i))
	if err != nil {
		return err
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns %s: %w", nn.Name(i), err)
			return
		}
		err = f()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// Partition cuts nodes i and j apart, both ways.
func (nn *Netns) Partition(i, j int) error {
	for _, p := range [][2]int{{i, j}, {j, i}} {
		if err := ip("-n", nn.Name(p[0]), "neigh", "replace", nn.Addr(p[1]), "lladdr", bogusMAC, "dev", "eth0", "nud", "permanent"); err != nil {
			return err
		}
		nn.cut[p] = true
	}
	return nil
}

// Isolate cuts node i apart from every other node.
func (nn *Netns) Isolate(i int) error {
	for j := range nn.n {
		if j != i {
			if err := nn.Partition(i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every cut.
func (nn *Netns) Heal() error {
	var first error
	for p := range nn.cut {
		if err := ip("-n", nn.Name(p[0]), "neigh", "del", nn.Addr(p[1]), "dev", "eth0"); err != nil && first == nil {
			first = err
		}
		delete(nn.cut, p)
	}
	return first
}

// Close deletes the namespaces (their interfaces go with them). The
// processes still running in them must have been stopped first.
func (nn *Netns) Close() error {
	var first error
	names := []string{nn.prefix + "sw"}
	for i := range nn.n {
		names = append(names, nn.Name(i))
	}
	for _, name := range names {
		if _, err := os.Stat("/run/netns/" + name); err != nil {
			continue
		}
		if err := ip("netns", "del", name); err != nil && first == nil {
			first = err
		}
	}
	return first
}
