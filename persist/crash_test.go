package persist_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/persist"
)

// The crash test re-executes the test binary as a child that publishes
// (plain Publish ops and Atomic ops, from several goroutines, pipelined)
// into a Badger store and SIGKILLs itself mid-stream. For each op whose
// done(nil) it saw, the child appends the op number to an ack file and
// fsyncs it. The parent then reopens the store and checks that every
// acknowledged op is there, that no Atomic op is partly there, and that
// every entry has its body.
//
// Op i (i = round*1e8 + g*1e6 + k for goroutine g, k = 1, 2, ...):
//   - k%3 != 0: Publish message 2i to (q1, i) and (q2, i);
//   - k%3 == 0: Atomic: publish message 2i to (q3, 2i) and message 2i+1 to
//     (q3, 2i+1), and settle (q1, i-1), the same goroutine's previous op.
const (
	crashEnvDir   = "WARREN_PERSIST_CRASH_DIR"
	crashEnvRound = "WARREN_PERSIST_CRASH_ROUND"
	crashWorkers  = 4
)

// crashBig marks the message ids that get a body over bodyChunkSize
// (stored in chunks): one in crashBigEvery.
const crashBigEvery = 211

func crashMsg(id uint64) persist.MessageRecord {
	n := 10 + int(id*7919%3000)
	if id%crashBigEvery == 0 {
		n = 17<<20 + int(id%1000)
	}
	body := bytes.Repeat([]byte{byte(id), byte(id >> 8), byte(id >> 16)}, n/3+1)[:n]
	return persist.MessageRecord{Exchange: "x", RoutingKey: strconv.FormatUint(id, 10), Props: []byte{byte(id)}, Body: body}
}

func crashQueues(t testing.TB, s persist.Store) (q1, q2, q3 uint64) {
	ids := make([]uint64, 3)
	for i, name := range []string{"q1", "q2", "q3"} {
		q := &persist.QueueRecord{VHost: "/", Name: name, Durable: true}
		if err := s.SaveQueue(q); err != nil {
			t.Fatal(err)
		}
		ids[i] = q.ID
	}
	return ids[0], ids[1], ids[2]
}

// TestCrashChild is the child side; it does nothing unless started by
// TestCrash.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("child of TestCrash only")
	}
	round, _ := strconv.ParseUint(os.Getenv(crashEnvRound), 10, 64)
	s, err := persist.Open(filepath.Join(dir, "db"), crashChildOptions)
	if err != nil {
		t.Fatal(err)
	}
	q1, q2, q3 := crashQueues(t, s)
	ackf, err := os.OpenFile(filepath.Join(dir, "acks"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	acks := make(chan uint64, 1<<16)
	go func() { // ack writer: write, fsync, repeat
		w := bufio.NewWriter(ackf)
		for i := range acks {
			fmt.Fprintln(w, i)
			for more := true; more; {
				select {
				case j := <-acks:
					fmt.Fprintln(w, j)
				default:
					more = false
				}
			}
			if err := w.Flush(); err != nil {
				panic(err)
			}
			if err := ackf.Sync(); err != nil {
				panic(err)
			}
		}
	}()
	// Kill points spread over memtable rotations and flushes (1 MiB
	// memtables), L0 compactions, value-log rotations (bodies of 17 MiB
	// now and then) and value-log GC (every 20 ms).
	time.AfterFunc(time.Duration(100+rand.IntN(900))*time.Millisecond, func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	})
	var wg sync.WaitGroup
	for g := range uint64(crashWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inflight := make(chan struct{}, 64)
			for k := uint64(1); ; k++ {
				i := round*1e8 + g*1e6 + k
				inflight <- struct{}{}
				done := func(err error) {
					if err == nil {
						acks <- i
					}
					<-inflight
				}
				if k%3 != 0 {
					s.Publish(2*i, crashMsg(2*i), []persist.QueueSeq{{QueueID: q1, Seq: i, MsgID: 2 * i}, {QueueID: q2, Seq: i, MsgID: 2 * i}}, done)
					continue
				}
				s.Atomic([]persist.PublishOp{
					{MsgID: 2 * i, Msg: crashMsg(2 * i), Entries: []persist.QueueSeq{{QueueID: q3, Seq: 2 * i, MsgID: 2 * i}}},
					{MsgID: 2*i + 1, Msg: crashMsg(2*i + 1), Entries: []persist.QueueSeq{{QueueID: q3, Seq: 2*i + 1, MsgID: 2*i + 1}}},
				}, []persist.QueueSeq{{QueueID: q1, Seq: i - 1}}, done)
			}
		}()
	}
	wg.Wait() // never: the timer kills the process
}

// crashRoundsPerStore is how many kill rounds share one store.
const crashRoundsPerStore = 5

// crashChildOptions keep Badger busy: small memtables rotate and flush
// often, and value-log GC runs all the time.
var crashChildOptions = persist.Options{MemTableSize: 1 << 20, GCInterval: 20 * time.Millisecond}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	var dir string
	totalAcked, acked := 0, 0
	rounds := crashRounds
	if v, err := strconv.Atoi(os.Getenv("WARREN_PERSIST_CRASH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for round := range rounds {
		if round%crashRoundsPerStore == 0 {
			// A fresh store every few rounds: the stored messages (17 MiB
			// ones among them) are never drained, so one store for many
			// rounds would grow to gigabytes and slow every check.
			dir = t.TempDir()
			totalAcked += acked
			acked = 0
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvRound+"="+strconv.Itoa(round))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die by SIGKILL: %v\n%s", round, err, out)
		}
		acked = checkCrash(t, dir)
		t.Logf("round %d: %d ops acknowledged in this store", round, acked)
	}
	totalAcked += acked
	t.Logf("%d rounds, %d ops acknowledged and found", rounds, totalAcked)
	if totalAcked == 0 {
		t.Fatal("no op was acknowledged before the kills")
	}
}

// checkCrash opens the store left by the child and checks it; it returns
// the number of acknowledged ops.
func checkCrash(t *testing.T, dir string) int {
	t.Helper()
	s := openBadger(t, filepath.Join(dir, "db"), persist.Options{MemTableSize: 1 << 20, GCInterval: -1})
	defer s.Close()
	q1, q2, q3 := crashQueues(t, s)
	load := func(q uint64, wantID func(seq uint64) uint64) map[uint64]bool {
		m := map[uint64]bool{}
		if _, err := s.RecoverQueue(q, func(e persist.RecoveredEntry) error {
			if e.MsgID != wantID(e.Seq) {
				return fmt.Errorf("queue %d seq %d holds message %d, want %d", q, e.Seq, e.MsgID, wantID(e.Seq))
			}
			w := crashMsg(e.MsgID)
			if !bytes.Equal(e.Msg.Body, w.Body) || e.Msg.RoutingKey != w.RoutingKey || !bytes.Equal(e.Msg.Props, w.Props) {
				return fmt.Errorf("queue %d seq %d: message %d damaged", q, e.Seq, e.MsgID)
			}
			m[e.Seq] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	in1 := load(q1, func(seq uint64) uint64 { return 2 * seq })
	in2 := load(q2, func(seq uint64) uint64 { return 2 * seq })
	in3 := load(q3, func(seq uint64) uint64 { return seq })
	if err := persist.Check(s); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.DanglingEntries != 0 {
		t.Fatalf("%d entries without a body", st.DanglingEntries)
	}
	atomic := func(i uint64) bool { return (i%1e6)%3 == 0 }

	raw, err := os.ReadFile(filepath.Join(dir, "acks"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	acked := map[uint64]bool{}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if i, err := strconv.ParseUint(string(line), 10, 64); err == nil {
			acked[i] = true
		}
	}
	for i := range acked {
		if atomic(i) {
			if !in3[2*i] || !in3[2*i+1] || in1[i-1] {
				t.Fatalf("acknowledged Atomic op %d incomplete: q3 %v %v, settled q1 entry still there %v", i, in3[2*i], in3[2*i+1], in1[i-1])
			}
		} else if !in2[i] || !(in1[i] || in3[2*(i+1)]) {
			t.Fatalf("acknowledged Publish %d missing: q1 %v q2 %v", i, in1[i], in2[i])
		}
	}
	// All or nothing, for every op, acknowledged or not.
	for i := range in1 {
		if !in2[i] {
			t.Fatalf("Publish %d half there: q1 without q2", i)
		}
	}
	for seq := range in3 {
		i := seq / 2
		a, b := in3[2*i], in3[2*i+1]
		if a != b {
			t.Fatalf("Atomic op %d half there: q3 %v %v", i, a, b)
		}
		if in1[i-1] {
			t.Fatalf("Atomic op %d applied but its settle of (q1, %d) is not", i, i-1)
		}
	}
	for i := range in2 {
		// i's q1 entry goes only with the next op, an Atomic one.
		if !in1[i] && !(atomic(i+1) && in3[2*(i+1)]) {
			t.Fatalf("Publish %d: q1 entry gone without the Atomic op that settles it", i)
		}
	}
	return len(acked)
}
