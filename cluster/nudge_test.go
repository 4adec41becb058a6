package cluster

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// nudgeFSM records the last entry it applied, and calls its nudger as
// the quorum queues' and the metadata group's FSMs do.
type nudgeFSM struct {
	nudger  *Nudger
	applied atomic.Uint64
}

func (f *nudgeFSM) Apply(l *raft.Log) any {
	f.applied.Store(l.Index)
	if f.nudger != nil {
		f.nudger.Applied(l.Index)
	}
	return nil
}

func (f *nudgeFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (f *nudgeFSM) Restore(io.ReadCloser) error         { return fmt.Errorf("no snapshots") }

// An entry whose AppendEntries went out together with a barrier appended
// right after it (a forwarded entry between a nudge's check and its
// barrier) reaches the followers' FSMs at once, not a commit timeout
// later: the followers learned nothing of its commit from that request,
// and FSMs never see the barrier. raft's commit timeout here is a minute,
// so only a nudge can tell them.
func TestNudgeAfterTrailingBarrier(t *testing.T) {
	const n = 3
	conf := raft.Configuration{}
	trans := make([]*raft.InmemTransport, n)
	for i := range n {
		_, trans[i] = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprint("node", i)))
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprint("node", i)), Address: trans[i].LocalAddr()})
	}
	for i := range n {
		for j := range n {
			trans[i].Connect(trans[j].LocalAddr(), trans[j])
		}
	}
	fsms := make([]*nudgeFSM, n)
	rafts := make([]*raft.Raft, n)
	nudgers := make([]*Nudger, n)
	for i := range n {
		c := raft.DefaultConfig()
		c.LocalID = conf.Servers[i].ID
		c.CommitTimeout = time.Minute
		c.Logger = hclog.NewNullLogger()
		if i != 0 {
			// Only node0 stands for election.
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Minute, time.Minute, time.Minute
		} else {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
		}
		nudgers[i] = &Nudger{}
		fsms[i] = &nudgeFSM{nudger: nudgers[i]}
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(c, fsms[i], store, store, raft.NewInmemSnapshotStore(), trans[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := r.BootstrapCluster(conf).Error(); err != nil {
			t.Fatal(err)
		}
		nudgers[i].Set(r)
		rafts[i] = r
		t.Cleanup(func() { r.Shutdown().Error() })
	}
	leader := rafts[0]
	deadline := time.Now().Add(10 * time.Second)
	for leader.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("node0 did not lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitApplied := func(what string, idx uint64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for i, f := range fsms {
			for f.applied.Load() < idx {
				if time.Now().After(deadline) {
					t.Fatalf("%s: node%d applied up to %d, not %d", what, i, f.applied.Load(), idx)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	for round := range 5 {
		// The entry and a barrier behind it, dispatched together.
		f := leader.Apply([]byte("e"), 0)
		b := leader.Barrier(0)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if err := b.Error(); err != nil {
			t.Fatal(err)
		}
		waitApplied(fmt.Sprintf("round %d", round), f.Index())
	}
}
