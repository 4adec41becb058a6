package quorum_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/queuetest"
	"github.com/warrenmq/warren/queue/quorum"
)

// publishMany publishes bodies to q at once, in order, and waits for
// every confirm.
func publishMany(t *testing.T, q *quorum.Queue, bodies []string) {
	t.Helper()
	errs := make(chan error, len(bodies))
	for _, b := range bodies {
		q.Type().Publish(&queue.Message{Body: []byte(b), Persistent: true}, []queue.Queue{q}, nil, func(err error) { errs <- err })
	}
	for range bodies {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("publishes not confirmed")
		}
	}
}

func bodyFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasPrefix(e.Name(), "bodies-") {
			names = append(names, e.Name())
		}
	}
	return names
}

// A replica that comes back far behind installs the leader's snapshot
// of a backlog larger than its body cache: the bodies go to a body file
// on its disk, and only the cache's budget of them stays in memory. It
// has every body, and still has after a restart before it takes a
// snapshot of its own (the same snapshot restored again, its body file
// found written) and after one (which refers to the file: nothing is
// cached then); leading, it sends a replica whose disk was wiped that
// snapshot with the bodies read from the file. Consumed there, every
// message comes with its body; once
// later snapshots no longer refer to the file, it goes. A body file
// nothing refers to goes at open.
func TestReplicatedInstallKeepsBodiesOnDisk(t *testing.T) {
	r, p, decl, qs := newGroup(t, 14, "big")
	waitUntil(t, "a leads", func() bool { return qs["a"].Leads() })

	// c goes down. The entries it misses are compacted away on a (the
	// first messages consumed, so the floor moves past them), so that it
	// needs the leader's snapshot.
	r.stop("c")
	for i := range 300 {
		publishWait(t, qs["a"], fmt.Sprint("early", i))
	}
	for range 300 {
		if _, _, ok := qs["a"].Get(true); !ok {
			t.Fatal("queue ended early")
		}
	}
	const n = 20000 // above the body cache's budget of 16384 bodies
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("message %05d %s", i, strings.Repeat("b", i%40))
	}
	publishMany(t, qs["a"], bodies)
	if err := qs["a"].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}

	recover := func(what string) *quorum.Queue {
		t.Helper()
		q, err := r.typ("c").RecoverMember(decl, replLimits, queue.Hooks{}, p)
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, fmt.Sprintf("%d ready on c (%s)", n, what), func() bool { return q.Stats().Ready == n })
		return q
	}
	check := func(what string, q *quorum.Queue) (cached int) {
		t.Helper()
		msgs, inFile, inMemory, cachedN, cachedB, budgetN, budgetB := quorum.BodyCounts(q)
		if msgs != n || inFile != n {
			t.Fatalf("%s: %d messages, %d with their body in a body file, want %d", what, msgs, inFile, n)
		}
		if inMemory != cachedN || cachedN > budgetN || cachedB > budgetB {
			t.Fatalf("%s: %d bodies in memory, cache %d (%d bytes) of %d (%d bytes)", what, inMemory, cachedN, cachedB, budgetN, budgetB)
		}
		got, err := quorum.Bodies(q)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, bodies) {
			t.Fatalf("%s: the bodies differ (%d of %d)", what, len(got), n)
		}
		return cachedN
	}

	r.start("c")
	cq := recover("installed")
	if c := check("installed", cq); c != 16384 {
		t.Fatalf("installed: %d cached, want the budget's 16384", c)
	}
	dir := r.typ("c").Store().SnapshotDir(p.Group)
	files := bodyFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("body files %v, want one", files)
	}
	st, err := os.Stat(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}

	// A restart before c's own snapshot: the installed one is restored
	// again, its body file found as it was.
	r.stop("c")
	r.start("c")
	cq = recover("restarted")
	if c := check("restarted", cq); c != 16384 {
		t.Fatalf("restarted: %d cached, want the budget's 16384 (the installed snapshot restored again)", c)
	}
	if again := bodyFiles(t, dir); !slices.Equal(again, files) {
		t.Fatalf("body files after a restart: %v, want %v", again, files)
	}
	if st2, err := os.Stat(filepath.Join(dir, files[0])); err != nil || !os.SameFile(st, st2) || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("the body file was written again: %v", err)
	}

	// c's own snapshot refers to the file; restored from it after a
	// restart, no body is in memory. (raft snapshots a replica restarted
	// once it applied an entry since.)
	if err := cq.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	r.stop("c")
	r.start("c")
	cq = recover("restarted after its own snapshot")
	if c := check("restarted after its own snapshot", cq); c != 0 {
		t.Fatalf("restored from c's own snapshot: %d cached, want none", c)
	}

	// c leads and b comes back with its disk wiped: c sends b its own
	// snapshot, expanded with the bodies read from c's body file.
	if err := qs["a"].Raft().LeadershipTransferToServer("c", "c").Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "c leads", func() bool { return cq.Leads() })
	r.stop("b")
	r.dirs["b"] = t.TempDir()
	r.start("b")
	bq, err := r.typ("b").JoinMember(decl, replLimits, queue.Hooks{}, p)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, fmt.Sprintf("%d ready on the wiped b", n), func() bool { return bq.Stats().Ready == n })
	check("b, installed from c", bq)

	// Consumed on c, acknowledged as it comes (a consumer without a
	// prefetch has 2000 of credit): every body, in order.
	rec := queuetest.NewRecorder(n, false)
	if err := cq.AddConsumer(queue.ConsumeOptions{Tag: "c1", Consumer: rec, Prefetch: 0}); err != nil {
		t.Fatal(err)
	}
	var got []queue.Entry
	waitUntil(t, "every message delivered on c", func() bool {
		es := rec.Take()
		cq.Settle(es, queue.Ack)
		got = append(got, es...)
		return len(got) == n
	})
	for i, e := range got {
		if string(e.Msg.Body) != bodies[i] {
			t.Fatalf("delivery %d: %q, want %q", i, e.Msg.Body, bodies[i])
		}
	}
	waitUntil(t, "all acked on c", func() bool { st := cq.Stats(); return st.Ready == 0 && st.Unacked == 0 })
	// The file goes once no snapshot the store keeps refers to it (it
	// keeps two).
	for i := 0; i < 4 && len(bodyFiles(t, dir)) > 0; i++ {
		if err := cq.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := cq.Raft().Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	if left := bodyFiles(t, dir); len(left) > 0 {
		t.Fatalf("body files left once their messages are consumed: %v", left)
	}

	// A body file nothing refers to goes at open.
	stray := filepath.Join(dir, "bodies-00000000000000ab")
	if err := os.WriteFile(stray, []byte("WQBODY01"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.stop("c")
	r.start("c")
	if _, err := r.typ("c").RecoverMember(decl, replLimits, queue.Hooks{}, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("an unreferenced body file is still there after open: %v", err)
	}
}
