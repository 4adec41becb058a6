package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// StateMachine is the broker's side of the metadata group: the package
// carries commands and snapshots as bytes and never interprets them.
//
// Apply and Snapshot are called from one goroutine (Raft's FSM
// goroutine), never at the same time; Restore too, with no Apply running.
type StateMachine interface {
	// Apply applies the committed command at log index. It must be
	// deterministic: every node applies the same commands in the same
	// order and must reach the same state and result (no wall clock, no
	// map order, no randomness). The result is what Propose returns.
	Apply(index uint64, cmd []byte) []byte
	// Snapshot returns the whole state as bytes (a copy: Apply goes on
	// while Raft stores them).
	Snapshot() ([]byte, error)
	// Restore replaces the whole state by a snapshot's bytes.
	Restore(snapshot []byte) error
}

// fsm is the raft.FSM of the metadata group: it calls the StateMachine
// and tracks the index applied here, which a Propose forwarded to the
// leader waits for before it returns.
type fsm struct {
	sm     StateMachine
	nudger Nudger // the other nodes apply a declare as soon as it is committed

	mu      sync.Mutex // guards applied and waiters; a leaf lock
	applied uint64
	waiters []applyWaiter
}

type applyWaiter struct {
	index uint64
	ch    chan struct{}
}

func newFSM(sm StateMachine) *fsm { return &fsm{sm: sm} }

func (f *fsm) Apply(l *raft.Log) any {
	var res []byte
	if f.sm != nil {
		res = f.sm.Apply(l.Index, l.Data)
	}
	f.advance(l.Index)
	f.nudger.Applied(l.Index)
	return res
}

func (f *fsm) advance(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index <= f.applied {
		return
	}
	f.applied = index
	keep := f.waiters[:0]
	for _, w := range f.waiters {
		if w.index <= index {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(f.waiters[len(keep):])
	f.waiters = keep
}

// wait returns once index is applied here, or ctx is done.
func (f *fsm) wait(ctx context.Context, index uint64) error {
	f.mu.Lock()
	if f.applied >= index {
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.waiters = append(f.waiters, applyWaiter{index, ch})
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Applied is the index of the last command applied here.
func (f *fsm) Applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	var data []byte
	if f.sm != nil {
		var err error
		if data, err = f.sm.Snapshot(); err != nil {
			return nil, err
		}
	}
	return &fsmSnapshot{index: f.Applied(), data: data}, nil
}

// A snapshot's bytes: the index applied (8 bytes, big-endian), then the
// state machine's bytes.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b) < 8 {
		return errors.New("cluster: metadata snapshot shorter than its header")
	}
	if f.sm != nil {
		if err := f.sm.Restore(b[8:]); err != nil {
			return err
		}
	}
	f.advance(binary.BigEndian.Uint64(b[:8]))
	return nil
}

type fsmSnapshot struct {
	index uint64
	data  []byte
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], s.index)
	if _, err := sink.Write(hdr[:]); err != nil {
		sink.Cancel()
		return err
	}
	if _, err := sink.Write(s.data); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Propose commits cmd in the metadata group and returns the
// StateMachine's result, once the command is committed and applied on
// this node (so what it did is visible here when Propose returns). A
// follower forwards it to the leader over the RPC channel, then waits for
// its own state machine to apply it.
//
// An error wrapping ErrNoLeader means nothing was proposed (no leader was
// known within ctx). Any other error leaves the outcome unknown: the
// command may still be committed and applied later (a leader lost its
// leadership with the command in its log, ctx ended while it was being
// replicated), so commands should be safe to apply twice or carry what
// tells a retry from a new command.
func (n *Node) Propose(ctx context.Context, cmd []byte) ([]byte, error) {
	if len(cmd) > MaxRPCSize-8 {
		return nil, fmt.Errorf("cluster: command of %d bytes: over %d", len(cmd), MaxRPCSize-8)
	}
	for {
		if n.ctx.Err() != nil {
			return nil, ErrClosed
		}
		if n.meta.State() == raft.Leader {
			idx, res, err := n.applyLocal(ctx, cmd)
			if !errors.Is(err, ErrNotLeader) {
				if err == nil && n.opts.ApplyEverywhere {
					n.awaitEverywhere(ctx, idx)
				}
				return res, err
			}
		}
		b, err := n.callLeader(ctx, "cluster.propose", cmd)
		if errors.Is(err, ErrNotLeader) {
			// This node is named the leader: it leads now, or is just
			// stepping down.
			select {
			case <-time.After(10 * time.Millisecond):
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
			}
		}
		if err != nil {
			return nil, err
		}
		if len(b) < 8 {
			return nil, errors.New("cluster: propose: short answer from the leader")
		}
		idx := binary.BigEndian.Uint64(b[:8])
		if err := n.fsm.wait(ctx, idx); err != nil {
			return nil, fmt.Errorf("cluster: committed, not yet applied here: %w", err)
		}
		if n.opts.ApplyEverywhere {
			n.awaitEverywhere(ctx, idx)
		}
		return b[8:], nil
	}
}

// visibleWait bounds how long a change waits for the other running
// members to apply it.
const visibleWait = 5 * time.Second

// awaitEverywhere returns once every other member has applied index
// (each asked with "cluster.applied", in parallel), or after visibleWait
// (a second for one not heard from lately): a change Propose answers is then visible on every running
// node, as a RabbitMQ definition change is once its transaction has
// committed on all nodes (a client that declares a queue on one node
// and publishes to it on another at once finds it there). A member that
// does not answer in time is not waited for: its probes will soon call
// it down, and it catches up from the log.
func (n *Node) awaitEverywhere(ctx context.Context, index uint64) {
	var wg sync.WaitGroup
	req := binary.BigEndian.AppendUint64(nil, index)
	ctx, cancel := context.WithTimeout(ctx, visibleWait)
	defer cancel()
	for _, m := range n.Members() {
		if m.Name == n.cfg.NodeName {
			continue
		}
		// A member not heard from lately (just started, or down) is
		// asked too, but waited for only briefly: a dead one fails at
		// once or times out.
		wait := visibleWait
		if !m.Running {
			wait = time.Second
		}
		wg.Add(1)
		go func(name string, wait time.Duration) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			// Asked again if the call fails (the peer's listener not
			// accepting yet), until the wait is over.
			for {
				if _, err := n.Call(ctx, name, "cluster.applied", req); err == nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}(m.Name, wait)
	}
	wg.Wait()
}

// handleApplied is "cluster.applied": it answers once this node has
// applied the index asked for (or visibleWait passed).
func (n *Node) handleApplied(ctx context.Context, _ string, b []byte) ([]byte, error) {
	if len(b) < 8 {
		return nil, errors.New("cluster: short cluster.applied")
	}
	if !n.ready.Load() {
		// Asked while this node starts (its listener serves before its
		// metadata group exists): the asker does not wait for it.
		return nil, errStarting
	}
	ctx, cancel := context.WithTimeout(ctx, visibleWait)
	defer cancel()
	return nil, n.fsm.wait(ctx, binary.BigEndian.Uint64(b))
}

// applyLocal applies cmd on this node, the leader: ErrNotLeader if it
// is not (nothing was done).
func (n *Node) applyLocal(ctx context.Context, cmd []byte) (uint64, []byte, error) {
	f := n.meta.Apply(cmd, n.timing.IOTimeout)
	if err := waitFuture(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return 0, nil, ErrNotLeader
		}
		return 0, nil, fmt.Errorf("cluster: propose: %w", err)
	}
	res, _ := f.Response().([]byte)
	return f.Index(), res, nil
}

// handlePropose is cluster.propose on the leader: the command's index
// (8 bytes) and result.
func (n *Node) handlePropose(ctx context.Context, from string, cmd []byte) ([]byte, error) {
	if !n.ready.Load() || n.meta.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	ctx, cancel := context.WithTimeout(ctx, n.timing.IOTimeout)
	defer cancel()
	idx, res, err := n.applyLocal(ctx, cmd)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 8, 8+len(res))
	binary.BigEndian.PutUint64(out, idx)
	return append(out, res...), nil
}

// AppliedIndex is the index of the last metadata command applied on this
// node.
func (n *Node) AppliedIndex() uint64 { return n.fsm.Applied() }
