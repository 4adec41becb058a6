package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// smallFS mounts a tmpfs of size bytes at a new directory for the test, or
// skips the test where mounting is not allowed (not root).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func freeSpace(t *testing.T, dir string) uint64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// TestDiskFull fills a small file system (a tmpfs the test mounts) with
// confirmed persistent messages: the broker must block the publisher
// (connection.blocked) before free space falls under the disk limit (50 MB)
// and before any write fails (no nack); a kill -9 then must leave a store
// that starts; after the queue is drained, the alarm clears (the log's
// spare segments do not keep it on) and publishing works again; and
// everything confirmed is delivered.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system")
	}
	data := smallFS(t, "224m")
	b := &childBroker{t: t, dir: filepath.Join(data, "warren"), addr: freeAddr(t)}
	url := "amqp://guest:guest@" + b.addr + "/"
	b.start()
	defer func() {
		if b.cmd.ProcessState == nil {
			doneWithin(t, "the child broker (SIGKILL, then wait for its exit)", closeDeadline, b.kill)
		}
	}()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("full", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// The publisher runs on its own: once the broker blocks it, it stops
	// reading the socket and a publish waits in its write until the kill.
	type result struct {
		confirmed map[string]bool
		nacked    int
		err       error
	}
	done := make(chan result, 1)
	stop := make(chan struct{})
	go func() {
		r := result{confirmed: map[string]bool{}}
		defer func() { done <- r }()
		body := make([]byte, 256<<10)
		type inflight struct {
			id string
			dc *amqp091.DeferredConfirmation
		}
		var pending []inflight
		wait := func(keep int) {
			for len(pending) > keep {
				p := pending[0]
				select {
				case <-p.dc.Done():
				case <-stop:
					return
				}
				pending = pending[1:]
				if ok, _ := p.dc.WaitContext(context.Background()); ok {
					r.confirmed[p.id] = true
				} else {
					r.nacked++
				}
			}
		}
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("m%d", n)
			copy(body, id+"|")
			dc, err := ch.PublishWithDeferredConfirm("", "full", false, false, amqp091.Publishing{DeliveryMode: 2, MessageId: id, Body: body})
			if err != nil {
				r.err = err
				return
			}
			pending = append(pending, inflight{id, dc})
			wait(32)
		}
	}()
	var freeAtBlock uint64
	select {
	case bl := <-blocked:
		if !bl.Active {
			t.Fatalf("unblocked before blocked: %+v", bl)
		}
		freeAtBlock = freeSpace(t, data)
	case r := <-done:
		t.Fatalf("the publisher stopped before any block: %v; %d confirmed, %d nacked, %d bytes free", r.err, len(r.confirmed), r.nacked, freeSpace(t, data))
	case <-time.After(90 * time.Second):
		t.Fatalf("never blocked; %d bytes free", freeSpace(t, data))
	}
	// Let what was in flight when the alarm went up be confirmed.
	time.Sleep(time.Second)
	close(stop)
	if !doneWithin(t, "the child broker's kill -9 (SIGKILL, then wait for its exit)", closeDeadline, b.kill) {
		t.FailNow()
	}
	doneWithin(t, "the first connection's close (after the kill)", connCloseDeadline, func() { conn.Close() })
	var r result
	select {
	case r = <-done:
	case <-time.After(closeDeadline):
		t.Fatalf("the publisher did not stop within %v of the kill", closeDeadline)
	}
	t.Logf("blocked with %d bytes free; %d confirmed, %d nacked", freeAtBlock, len(r.confirmed), r.nacked)
	if freeAtBlock == 0 || r.nacked > 0 {
		t.Fatalf("the disk filled before the block: %d bytes free at the block, %d writes failed", freeAtBlock, r.nacked)
	}
	confirmed := r.confirmed

	// On a disk left full (another program took the rest), a start is
	// refused with a message that says so, not a crash (SIGBUS in Badger's
	// mapped files); once there is room it starts with everything.
	junk := filepath.Join(data, "junk")
	if free := freeSpace(t, data); free > 4<<20 {
		if err := os.WriteFile(junk, make([]byte, free-4<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	cmd := exec.CommandContext(sctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WARREN_CRASH_CHILD="+b.dir, "WARREN_CRASH_ADDR="+b.addr)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "bytes free") {
		t.Fatalf("start on a full disk: %v\n%s", err, out)
	}
	t.Logf("start on a full disk refused: %s", strings.TrimSpace(string(out)))
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}
	b.start()
	conn, err = amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	// A broker still blocking the connection (the test failed) does not
	// read its connection.close: the deadline reports it, and the kill
	// deferred above, which runs after this, ends it.
	conn2 := conn
	defer doneWithin(t, "the second connection's close (connection.close-ok not received; is the broker still blocking it?)", connCloseDeadline, func() { conn2.Close() })
	blocked = conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	cons, _ := conn.Channel()
	got := map[string]bool{}
	for {
		d, ok, err := cons.Get("full", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got[d.MessageId] = true
	}
	for id := range confirmed {
		if !got[id] {
			t.Fatalf("confirmed message %s lost (%d confirmed, %d delivered)", id, len(confirmed), len(got))
		}
	}
	if segs, _ := filepath.Glob(filepath.Join(b.dir, "wal", "*.log")); len(segs) > 3 {
		t.Fatalf("%d log segments left: %v", len(segs), segs)
	}
	// Drained: the alarm clears and a publish is confirmed again. The
	// freed space comes back as Badger's value-log GC and compactions
	// reclaim the drained bodies, so allow a generous deadline.
	pub, _ := conn.Channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer pcancel()
	dc, err := pub.PublishWithDeferredConfirmWithContext(pctx, "", "full", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(pctx); err != nil || !ok {
		t.Fatalf("publish after draining: ok=%v err=%v; %d bytes free; files:\n%s", ok, err, freeSpace(t, data), dirSizes(data))
	}
}

// dirSizes lists the files under dir with their sizes and the space they
// take on disk, a line each.
func dirSizes(dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		var used int64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			used = st.Blocks * 512
		}
		fmt.Fprintf(&b, "  %s size %d on disk %d\n", p, fi.Size(), used)
		return nil
	})
	return b.String()
}

// TestDiskFull's deadlines for the child broker's exit after a SIGKILL
// (and the publisher's after it) and for a connection's close (the
// broker's close-ok).
const (
	closeDeadline     = 30 * time.Second
	connCloseDeadline = 10 * time.Second
)

// doneWithin runs f (a close) on its own goroutine and fails the test,
// naming what, if f has not returned after d, so that a close that hangs
// fails the test instead of holding the whole go test run until its
// -timeout. Then f's goroutine is left behind. It reports whether f
// returned.
func doneWithin(t *testing.T, what string, d time.Duration, f func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		t.Errorf("%s did not return within %v", what, d)
		return false
	}
}
