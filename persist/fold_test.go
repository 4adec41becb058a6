package persist_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/warrenmq/warren/persist"
)

// TestFoldBatch: ops that land in one batch are folded: an entry published
// and settled there is never written (nor its body when no entry of the
// message is left), a delivered mark on an entry published there becomes
// its flag, and the store is consistent afterwards, across a reopen too.
func TestFoldBatch(t *testing.T) {
	d := persist.NewMemoryDisk()
	s, err := persist.OpenMemory(d)
	if err != nil {
		t.Fatal(err)
	}
	q1 := &persist.QueueRecord{VHost: "/", Name: "q1", Durable: true}
	q2 := &persist.QueueRecord{VHost: "/", Name: "q2", Durable: true}
	for _, q := range []*persist.QueueRecord{q1, q2} {
		if err := s.SaveQueue(q); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the committer in the commit of a first batch, so that the ops
	// below gather in the next one.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.FailCommits(func() error {
		once.Do(func() { close(entered); <-release })
		return nil
	})
	body := func(id uint64) persist.MessageRecord {
		return persist.MessageRecord{RoutingKey: "k", Body: []byte{byte(id)}}
	}
	e := func(q *persist.QueueRecord, seq, id uint64) persist.QueueSeq {
		return persist.QueueSeq{QueueID: q.ID, Seq: seq, MsgID: id}
	}
	first := make(chan error, 1)
	s.Publish(100, body(100), []persist.QueueSeq{e(q1, 100, 100)}, func(err error) { first <- err })
	<-entered

	var confirms sync.WaitGroup
	confirm := func(err error) {
		if err != nil {
			t.Error(err)
		}
		confirms.Done()
	}
	confirms.Add(3)
	s.Publish(1, body(1), []persist.QueueSeq{e(q1, 101, 1)}, confirm)              // settled: folded away
	s.Publish(2, body(2), []persist.QueueSeq{e(q1, 102, 2), e(q2, 1, 2)}, confirm) // one entry settled
	s.Publish(3, body(3), []persist.QueueSeq{e(q1, 103, 3)}, confirm)              // delivered only
	s.Delivered([]persist.QueueSeq{{QueueID: q1.ID, Seq: 101}, {QueueID: q1.ID, Seq: 102}, {QueueID: q1.ID, Seq: 103}})
	s.Settle([]persist.QueueSeq{{QueueID: q1.ID, Seq: 101}, {QueueID: q1.ID, Seq: 102}, {QueueID: q1.ID, Seq: 100}}, nil)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	confirms.Wait()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if f := s.Stats().Folded; f != 2 {
		t.Errorf("folded %d entries, want 2", f)
	}
	check := func(s persist.Store) {
		t.Helper()
		if err := persist.Check(s); err != nil {
			t.Fatal(err)
		}
		var got []persist.RecoveredEntry
		collect := func(r persist.RecoveredEntry) error { got = append(got, r); return nil }
		if _, err := s.RecoverQueue(q1.ID, collect); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Seq != 103 || got[0].MsgID != 3 || !got[0].Redelivered {
			t.Fatalf("q1 = %+v, want only seq 103 (msg 3), delivered", got)
		}
		got = nil
		if _, err := s.RecoverQueue(q2.ID, collect); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Seq != 1 || got[0].MsgID != 2 || got[0].Redelivered {
			t.Fatalf("q2 = %+v, want seq 1 (msg 2), not delivered", got)
		}
		for id, want := range map[uint64]bool{1: false, 2: true, 3: true, 100: false} {
			_, err := s.LoadMessage(id)
			if has := err == nil; has != want || (err != nil && !errors.Is(err, persist.ErrNotFound)) {
				t.Errorf("body %d: %v, want present=%v", id, err, want)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = persist.OpenMemory(d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}
