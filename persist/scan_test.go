package persist_test

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/persist"
)

func TestScanQueueAndCounts(t *testing.T) {
	for _, kind := range []string{"memory", "badger"} {
		t.Run(kind, func(t *testing.T) {
			var s persist.Store
			if kind == "memory" {
				s = persist.NewMemory()
			} else {
				var err error
				if s, err = persist.Open(t.TempDir(), persist.Options{GCInterval: -1}); err != nil {
					t.Fatal(err)
				}
			}
			defer s.Close()
			q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
			if err := s.SaveQueue(q); err != nil {
				t.Fatal(err)
			}
			for seq := uint64(1); seq <= 10; seq++ {
				id := 100 + seq
				s.Publish(id, persist.MessageRecord{Body: []byte(fmt.Sprint(seq))}, []persist.QueueSeq{{QueueID: q.ID, Seq: seq, MsgID: id}}, nil)
			}
			s.Settle([]persist.QueueSeq{{QueueID: q.ID, Seq: 4}}, nil)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			n, maxSeq, err := s.QueueCounts(q.ID)
			if err != nil || n != 9 || maxSeq != 10 {
				t.Fatalf("counts = %d, %d, %v; want 9, 10", n, maxSeq, err)
			}
			var got []string
			err = s.ScanQueue(q.ID, 3, 3, true, func(e persist.RecoveredEntry) error {
				got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Msg.Body))
				return nil
			})
			if err != nil || fmt.Sprint(got) != "[3:3 5:5 6:6]" {
				t.Fatalf("scan = %v, %v; want [3:3 5:5 6:6]", got, err)
			}
			got = got[:0]
			s.ScanQueue(q.ID, 9, 100, false, func(e persist.RecoveredEntry) error {
				got = append(got, fmt.Sprintf("%d:%d", e.Seq, len(e.Msg.Body)))
				return nil
			})
			if fmt.Sprint(got) != "[9:0 10:0]" {
				t.Fatalf("keys-only scan = %v", got)
			}
		})
	}
}

// TestEntryExpirySurvives checks that an entry's expiry is stored, kept by
// Delivered, and returned on scans.
func TestEntryExpirySurvives(t *testing.T) {
	s, err := persist.Open(t.TempDir(), persist.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	s.Publish(1, persist.MessageRecord{Body: []byte("a")}, []persist.QueueSeq{{QueueID: q.ID, Seq: 1, MsgID: 1, Expires: 12345}}, nil)
	s.Publish(2, persist.MessageRecord{Body: []byte("b")}, []persist.QueueSeq{{QueueID: q.ID, Seq: 2, MsgID: 2}}, nil)
	s.Delivered([]persist.QueueSeq{{QueueID: q.ID, Seq: 1}})
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []persist.RecoveredEntry
	s.ScanQueue(q.ID, 0, 10, false, func(e persist.RecoveredEntry) error { got = append(got, e); return nil })
	if len(got) != 2 || got[0].Expires != 12345 || !got[0].Redelivered || got[1].Expires != 0 {
		t.Fatalf("entries %+v", got)
	}
}
