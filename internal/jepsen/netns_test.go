//go:build linux

package jepsen

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func newNetns(t *testing.T, n int) *Netns {
	t.Helper()
	nn, err := NewNetns(n)
	if err != nil {
		t.Skip("no network namespaces: " + err.Error())
	}
	t.Cleanup(func() {
		if err := nn.Close(); err != nil {
			t.Error(err)
		}
	})
	return nn
}

// echo serves one byte back per connection from inside node i.
func echo(t *testing.T, nn *Netns, i int) string {
	t.Helper()
	l, err := nn.Listen(i, "tcp", nn.Addr(i)+":7000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.CopyN(c, c, 1) }()
		}
	}()
	return l.Addr().String()
}

func reach(nn *Netns, from int, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	c, err := nn.Dial(ctx, from, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(700 * time.Millisecond))
	if _, err := c.Write([]byte{1}); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 1))
	return err
}

func TestNetnsPartition(t *testing.T) {
	nn := newNetns(t, 3)
	addr0 := echo(t, nn, 0)
	for from := range 3 {
		if err := reach(nn, from, addr0); err != nil {
			t.Fatalf("node %d cannot reach node 0 before any cut: %v", from, err)
		}
	}
	// An established connection from node 1, to see it go quiet.
	est, err := nn.Dial(context.Background(), 1, "tcp", addr0)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()

	if err := nn.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := reach(nn, 1, addr0); err == nil {
		t.Fatal("node 1 reached node 0 across the partition")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("across the partition: %v, want a timeout (frames dropped, not refused)", err)
	}
	est.SetDeadline(time.Now().Add(700 * time.Millisecond))
	est.Write([]byte{1})
	if _, err := io.ReadFull(est, make([]byte, 1)); err == nil {
		t.Fatal("an established connection was answered across the partition")
	}
	if err := reach(nn, 2, addr0); err != nil {
		t.Fatalf("node 2 cut off by a partition between 0 and 1: %v", err)
	}
	if err := nn.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := reach(nn, 1, addr0); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

func TestNetnsCommandRunsInside(t *testing.T) {
	nn := newNetns(t, 2)
	out, err := nn.Command(1, "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), nn.Addr(1)+"/24") {
		t.Fatalf("eth0 in node 1's namespace: %s", out)
	}
	if _, err := exec.Command("ip", "netns", "pids", nn.Name(0)).Output(); err != nil {
		t.Fatal(err)
	}
}
