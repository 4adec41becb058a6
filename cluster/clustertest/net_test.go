package clustertest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer echoes every connection on a loopback listener named b.
func echoServer(t *testing.T, nt *Net) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	nt.Register("b", ln.Addr().String())
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// TestNetFaults: a delay delays, a dropped direction stalls until the
// deadline (either way, on the dialling side), and a heal lets the held
// bytes through, so the stream stays whole.
func TestNetFaults(t *testing.T) {
	nt := NewNet()
	addr := echoServer(t, nt)
	c, err := nt.Dialer("a")(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, "one"); err != nil || got != "one" {
		t.Fatalf("plain: %q %v", got, err)
	}

	nt.Delay("a", "b", 150*time.Millisecond)
	start := time.Now()
	if got, err := roundTrip(c, "two"); err != nil || got != "two" {
		t.Fatalf("delayed: %q %v", got, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("a delay of 150ms took %v", d)
	}
	nt.Heal()

	// a -> b dropped: the write stalls until its deadline.
	nt.Drop("a", "b")
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write over a dropped link: %v", err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	nt.Heal()

	// b -> a dropped: the echo comes back but is held from the reader.
	nt.Drop("b", "a")
	if _, err := c.Write([]byte("three")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 5)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read over a dropped link: %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	done := make(chan string)
	go func() {
		_, err := io.ReadFull(c, buf)
		if err != nil {
			done <- err.Error()
		}
		done <- string(buf)
	}()
	select {
	case s := <-done:
		t.Fatalf("read %q while dropped", s)
	case <-time.After(100 * time.Millisecond):
	}
	nt.Heal()
	if s := <-done; s != "three" {
		t.Fatalf("after heal: %q", s)
	}

	// A partition stalls a new connection's first exchange too.
	nt.Partition([]string{"a"}, []string{"b"})
	c2, err := nt.Dialer("a")(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := roundTrip(c2, "four"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection across a partition: %v", err)
	}
	// Close ends a stalled write at once.
	_ = c2.SetDeadline(time.Time{})
	errc := make(chan error)
	go func() { _, err := c2.Write([]byte("y")); errc <- err }()
	time.Sleep(20 * time.Millisecond) // let the write block (it would block just the same later)
	c2.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("stalled write after close: %v", err)
	}
	if nt.Dials(addr) != 2 {
		t.Fatalf("dials %d", nt.Dials(addr))
	}
}
