package quorum_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/quorum"
)

// TestIdleQueues measures what idle quorum queues cost: goroutines and
// heap per queue, and the CPU they use while idle. Run with
// QUORUM_IDLE=N (it is a measurement, not a check).
func TestIdleQueues(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("QUORUM_IDLE"))
	if n == 0 {
		t.Skip("set QUORUM_IDLE=N to measure N idle quorum queues")
	}
	typ := quorum.NewType(quorum.Config{Dir: t.TempDir()})
	defer typ.Close()
	limits := queue.Limits{MaxLength: -1, MaxLengthBytes: -1}
	// Open the store first, so that its cost is not counted.
	first, err := typ.New(queue.Decl{VHost: "/", Name: "first", Durable: true}, limits, queue.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	_ = first
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	start := time.Now()
	for i := range n {
		if _, err := typ.New(queue.Decl{VHost: "/", Name: fmt.Sprint("q", i), Durable: true}, limits, queue.Hooks{}); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	g1 := runtime.NumGoroutine()
	var ru0, ru1 syscallRusage
	ru0 = rusage()
	time.Sleep(10 * time.Second)
	ru1 = rusage()
	t.Logf("%d queues declared in %v (%.1f ms each); %.1f goroutines and %.1f KiB heap per queue; idle CPU %.1f%% of a core",
		n, took, float64(took.Milliseconds())/float64(n), float64(g1-g0)/float64(n),
		float64(after.HeapInuse-before.HeapInuse)/1024/float64(n), (ru1-ru0)/10*100)
}
