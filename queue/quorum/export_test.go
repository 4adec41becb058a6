package quorum

import (
	"runtime"
	"strconv"
	"time"
)

// Leaderless is how many of q's batches no leader took by their
// deadline (Queue.failed).
func Leaderless(q *Queue) uint64 { return q.leaderless.Load() }

// BodyCounts reports where q's replica keeps its messages' bodies: how
// many messages its machine has, how many of them have their body in a
// body file, how many have a body in memory, and the body cache's use
// (bodies, bytes) and budget.
func BodyCounts(q *Queue) (msgs, inFile, inMemory, cachedN int, cachedB int64, budgetN int, budgetB int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	each(q.m, func(m *msg) {
		msgs++
		if m.ref != nil {
			inFile++
		}
		if m.body != nil {
			inMemory++
		}
	})
	return msgs, inFile, inMemory, q.m.cachedN, q.m.cachedB, q.m.budgetN, q.m.budgetB
}

// Bodies reads every message's body as a delivery does (cached, else from
// the body file or the log), in queue order.
func Bodies(q *Queue) ([]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	var err error
	each(q.m, func(m *msg) {
		b := m.body
		if b == nil && err == nil {
			b, err = q.stored(m)
		}
		if b != nil {
			out = append(out, string(b.Body))
		}
	})
	return out, err
}

// EntryLoads is how many log entries q read messages back from, and how
// many entries its messages not cached in memory are in.
func EntryLoads(q *Queue) (loads, entries int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	idx := map[uint64]bool{}
	each(q.m, func(m *msg) {
		if m.body == nil && m.ref == nil {
			idx[m.idx] = true
		}
	})
	return q.reader.loads, len(idx)
}

// SetUnlimitedCredit sets unlimitedCredit until the returned func
// restores it.
func SetUnlimitedCredit(n int) func() {
	old := unlimitedCredit
	unlimitedCredit = n
	return func() { unlimitedCredit = old }
}

// HeldLen is how many deliveries q's consumer tag holds (local.held).
func HeldLen(q *Queue, tag string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, lc := range q.consumers {
		if lc.tag == tag {
			return len(lc.held)
		}
	}
	return 0
}

// HoldProposer keeps q's proposer from sending until the returned func
// is called: what is proposed meanwhile goes to the group as one entry.
// It takes every in-flight slot, then has the proposer take a tick,
// whose send waits for a slot.
func HoldProposer(q *Queue) (release func()) {
	for range maxInflight {
		q.inflight <- struct{}{}
	}
	q.propose(opTick, nil, nil)
	for {
		q.pmu.Lock()
		n := q.count
		q.pmu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
	return func() {
		for range maxInflight {
			<-q.inflight
		}
	}
}

// InboxLen is how many commands wait in q's inbox.
func InboxLen(q *Queue) int {
	q.pmu.Lock()
	defer q.pmu.Unlock()
	return q.count
}

// Term is q's replica's current raft term.
func Term(q *Queue) uint64 {
	t, _ := strconv.ParseUint(q.r.Stats()["term"], 10, 64)
	return t
}

// LedTerm is the term in which q's replica last knew node as its leader
// (0: never), cluster.Campaign's lostTerm.
func LedTerm(q *Queue, node string) uint64 { return q.ledTerm(node) }

// DetachDownAt is q.DetachDown with the orphans' clock at now.
func DetachDownAt(q *Queue, running func(node string) bool, now time.Time) {
	q.detachDown(running, now)
}

// AskingOrphans reports whether q's leader has questions about orphans
// out (askOrphans).
func AskingOrphans(q *Queue) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.askingOrphans
}

// OrphanGrace is orphanGrace.
const OrphanGrace = orphanGrace
