package cluster_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/cluster/clustertest"
)

// linkPair starts two nodes and a transport of group on each.
func linkPair(t *testing.T, group string) (a, b *cluster.Node, ta, tb *cluster.GroupTransport) {
	t.Helper()
	c := clustertest.New(t, 2)
	c.Start(0)
	c.Start(1)
	a, b = c.Node(0), c.Node(1)
	var err error
	if ta, err = a.Transport(group); err != nil {
		t.Fatal(err)
	}
	if tb, err = b.Transport(group); err != nil {
		t.Fatal(err)
	}
	return a, b, ta, tb
}

// TestRaftLinkLanes: over the one connection between two nodes, a
// heartbeat is answered while an AppendEntries of the same group waits
// for its raft (busy storing entries), and another group's requests go
// on; a group the peer does not have is an error, not a hang; the
// waiting AppendEntries is answered once its raft answers.
func TestRaftLinkLanes(t *testing.T) {
	a, b, ta, tb := linkPair(t, "lane-g")
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: true}, nil)
	})
	ha, _ := a.Transport("lane-h")
	hb, _ := b.Transport("lane-h")
	to := raft.ServerAddress(b.Addr())
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte(a.Addr())}

	// An AppendEntries of group g that b's raft takes and does not answer.
	appended := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		appended <- ta.AppendEntries("n2", to, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2, PrevLogEntry: 1, PrevLogTerm: 1,
			Entries: []*raft.Log{{Index: 2, Term: 2, Type: raft.LogCommand, Data: []byte("x")}}}, &resp)
	}()
	var held raft.RPC
	select {
	case held = <-tb.Consumer():
	case <-time.After(20 * time.Second):
		t.Fatal("b's group g got no AppendEntries")
	}

	// A heartbeat of g is answered meanwhile.
	var hresp raft.AppendEntriesResponse
	if err := ta.AppendEntries("n2", to, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2}, &hresp); err != nil || !hresp.Success || hresp.Term != 2 {
		t.Fatalf("heartbeat behind a waiting AppendEntries: %v %+v", err, hresp)
	}
	// So is a vote of group h.
	voted := make(chan error, 1)
	go func() {
		var resp raft.RequestVoteResponse
		voted <- ha.RequestVote("n2", to, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 5, LastLogIndex: 9}, &resp)
	}()
	select {
	case rpc := <-hb.Consumer():
		if v, ok := rpc.Command.(*raft.RequestVoteRequest); !ok || v.Term != 5 || v.LastLogIndex != 9 {
			t.Fatalf("group h got %+v", rpc.Command)
		}
		rpc.Respond(&raft.RequestVoteResponse{Term: 5, Granted: true}, nil)
	case <-time.After(20 * time.Second):
		t.Fatal("group h's vote held up behind group g")
	}
	if err := <-voted; err != nil {
		t.Fatal(err)
	}
	// A group b does not have.
	tx, _ := a.Transport("lane-none")
	var vresp raft.RequestVoteResponse
	if err := tx.RequestVote("n2", to, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1}, &vresp); err == nil {
		t.Fatal("a vote for a group b does not have succeeded")
	}

	select {
	case err := <-appended:
		t.Fatalf("the held AppendEntries returned %v before b's raft answered", err)
	default:
	}
	held.Respond(&raft.AppendEntriesResponse{Term: 2, LastLog: 2, Success: true}, nil)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}

	// b's transport closed: a's requests fail, they do not hang (an
	// AppendEntries would wait for the follower, see GroupTransport).
	tb.Close()
	err := ta.RequestVote("n2", to, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 3}, &vresp)
	if err == nil || errors.Is(err, raft.ErrTransportShutdown) {
		t.Fatalf("a vote to a closed group: %v", err)
	}
}

// TestLimitCommit: a group whose leader stores its entries early never
// tells a follower a commit index past the limit (the leader's durable
// index), with entries or without.
func TestLimitCommit(t *testing.T) {
	a, b, ta, tb := linkPair(t, "limit")
	var durable atomic.Uint64
	durable.Store(5)
	ta.LimitCommit(durable.Load)
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte(a.Addr())}
	for _, tc := range []struct {
		commit, durable, want uint64
		entries               int
	}{{9, 5, 5, 1}, {9, 5, 5, 0}, {4, 5, 4, 1}, {9, 12, 9, 0}} {
		durable.Store(tc.durable)
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2, PrevLogEntry: 9, PrevLogTerm: 2, LeaderCommitIndex: tc.commit}
		for i := range tc.entries {
			req.Entries = append(req.Entries, &raft.Log{Index: uint64(10 + i), Term: 2, Type: raft.LogCommand})
		}
		done := make(chan error, 1)
		go func() {
			done <- ta.AppendEntries("n2", raft.ServerAddress(b.Addr()), req, &raft.AppendEntriesResponse{})
		}()
		for answered := false; !answered; {
			select {
			case rpc := <-tb.Consumer():
				got := rpc.Command.(*raft.AppendEntriesRequest)
				// The commit index told first, ahead of the entries
				// (commitFirst), is bound by the limit too.
				answered = len(got.Entries) == tc.entries
				if got.LeaderCommitIndex > tc.want || answered && got.LeaderCommitIndex != tc.want {
					t.Fatalf("commit %d with durable %d: the follower was told %d, want %d", tc.commit, tc.durable, got.LeaderCommitIndex, tc.want)
				}
				rpc.Respond(&raft.AppendEntriesResponse{Term: 2, Success: true}, nil)
			case <-time.After(20 * time.Second):
				t.Fatal("no AppendEntries")
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCommitFirst: an AppendEntries whose commit index covers entries
// the follower stored before it reaches the follower's raft in two: an
// AppendEntries of nothing with that commit index (up to the request's
// previous entry, no later) and the same term, leader and previous
// entry, then the request itself; a request that commits nothing new
// goes alone.
func TestCommitFirst(t *testing.T) {
	a, b, ta, tb := linkPair(t, "first")
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte(a.Addr())}
	for i, tc := range []struct {
		prev, commit, first uint64 // first: the commit index told first, 0 none
		entries             int
	}{
		{prev: 10, commit: 12, first: 10, entries: 3}, // 11..13
		{prev: 13, commit: 13, first: 13, entries: 1}, // the last request committed up to 12
		{prev: 14, commit: 13, entries: 1},            // 13: told already
		{prev: 15, commit: 15, entries: 0},            // nothing to store: as it is
		{prev: 15, commit: 16, first: 15, entries: 2},
	} {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, Leader: []byte(a.Addr()), PrevLogEntry: tc.prev, PrevLogTerm: 3, LeaderCommitIndex: tc.commit}
		for k := range tc.entries {
			req.Entries = append(req.Entries, &raft.Log{Index: tc.prev + 1 + uint64(k), Term: 3, Type: raft.LogCommand})
		}
		done := make(chan error, 1)
		go func() {
			done <- ta.AppendEntries("n2", raft.ServerAddress(b.Addr()), req, &raft.AppendEntriesResponse{})
		}()
		next := func() *raft.AppendEntriesRequest {
			select {
			case rpc := <-tb.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil)
				return rpc.Command.(*raft.AppendEntriesRequest)
			case <-time.After(20 * time.Second):
				t.Fatalf("request %d: no AppendEntries", i)
				return nil
			}
		}
		got := next()
		if tc.first != 0 {
			if len(got.Entries) != 0 || got.LeaderCommitIndex != tc.first || got.PrevLogEntry != tc.prev || got.PrevLogTerm != 3 || got.Term != 3 || string(got.Leader) != a.Addr() {
				t.Fatalf("request %d: first %+v, want no entries, commit %d, previous entry %d of term 3", i, got, tc.first, tc.prev)
			}
			got = next()
		}
		if len(got.Entries) != tc.entries || got.LeaderCommitIndex != tc.commit {
			t.Fatalf("request %d: got %d entries and commit %d, want the request (%d, %d)", i, len(got.Entries), got.LeaderCommitIndex, tc.entries, tc.commit)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestHeartbeatAnsweredHere: a heartbeat to a follower that answered
// one of the same term with success a moment ago, over a link that
// carries answers, is answered from that answer and not sent; one of
// another term, one after an answer without success, one past
// HeartbeatRefresh or over a link silent for half of it are sent.
func TestHeartbeatAnsweredHere(t *testing.T) {
	_, b, ta, tb := linkPair(t, "hb-g")
	var got atomic.Int64
	var refuse atomic.Bool
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		got.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: !refuse.Load()}, nil)
	})
	to := raft.ServerAddress(b.Addr())
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("n1-addr")}
	beat := func(term uint64, wantSent int64, wantSuccess bool) {
		t.Helper()
		before := got.Load()
		var resp raft.AppendEntriesResponse
		if err := ta.AppendEntries("n2", to, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term}, &resp); err != nil {
			t.Fatal(err)
		}
		if sent := got.Load() - before; sent != wantSent || resp.Success != wantSuccess || resp.Term != term {
			t.Fatalf("heartbeat of term %d: %d sent, %+v; want %d sent, success %v", term, sent, resp, wantSent, wantSuccess)
		}
	}
	beat(2, 1, true) // nothing seen yet: sent
	beat(2, 0, true) // answered here
	now := time.Now()
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2}
	if ta.AnswerHeartbeatAt(to, req, &resp, now.Add(cluster.HeartbeatRefresh)) {
		t.Fatal("answered from an answer HeartbeatRefresh old")
	}
	if ta.AnswerHeartbeatAt(to, req, &resp, now.Add(cluster.HeartbeatRefresh*3/4)) {
		t.Fatal("answered over a link silent for more than half of HeartbeatRefresh")
	}
	beat(3, 1, true) // a new term: sent
	beat(3, 0, true)
	refuse.Store(true)
	beat(4, 1, false) // not remembered
	beat(4, 1, false)
	refuse.Store(false)
	beat(4, 1, true)
	now = time.Now()
	beat(4, 0, true)
	// A group whose heartbeat timeout is longer (SetHeartbeatTimeout)
	// takes an answer up to half of it old.
	req.Term = 4
	if ta.AnswerHeartbeatAt(to, req, &resp, now.Add(cluster.HeartbeatRefresh+50*time.Millisecond)) {
		t.Fatal("answered from an answer older than HeartbeatRefresh before SetHeartbeatTimeout")
	}
	ta.SetHeartbeatTimeout(5 * time.Second)
	if !ta.AnswerHeartbeatAt(to, req, &resp, now.Add(cluster.HeartbeatRefresh+50*time.Millisecond)) || !resp.Success || resp.Term != 4 {
		t.Fatalf("a 5 s heartbeat timeout: not answered from an answer HeartbeatRefresh old: %+v", resp)
	}
	if ta.AnswerHeartbeatAt(to, req, &resp, now.Add(2500*time.Millisecond)) {
		t.Fatal("a 5 s heartbeat timeout: answered from an answer 2.5 s old")
	}
}
