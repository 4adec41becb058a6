package ack

import (
	"testing"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/classic"
)

func fill(u *Unacked, q queue.Queue, tags ...uint64) {
	for _, t := range tags {
		u.Add(Delivery{Tag: t, Queue: q})
	}
}

func tagsOf(ds []Delivery) []uint64 {
	var out []uint64
	for _, d := range ds {
		out = append(out, d.Tag)
	}
	return out
}

func TestTake(t *testing.T) {
	q := classic.New(queue.Decl{Name: "q"}, classic.Options{})
	var u Unacked
	fill(&u, q, 1, 2, 3, 4, 5)

	if got, ok := u.Take(3, false, nil); !ok || len(got) != 1 || got[0].Tag != 3 {
		t.Fatalf("single take = %v %v", tagsOf(got), ok)
	}
	if _, ok := u.Take(3, false, nil); ok {
		t.Fatal("second ack of tag 3 succeeded")
	}
	if _, ok := u.Take(3, true, nil); ok {
		t.Fatal("multiple ack naming a settled tag succeeded")
	}
	if got, ok := u.Take(4, true, nil); !ok || len(got) != 3 || got[0].Tag != 1 || got[2].Tag != 4 {
		t.Fatalf("multiple take = %v %v", tagsOf(got), ok)
	}
	if u.Len() != 1 {
		t.Fatalf("len = %d, want 1", u.Len())
	}
	if _, ok := u.Take(99, false, nil); ok {
		t.Fatal("unknown tag succeeded")
	}
	fill(&u, q, 6, 7)
	if got, ok := u.Take(0, true, nil); !ok || len(got) != 3 {
		t.Fatalf("take all = %v %v", tagsOf(got), ok)
	}
	if u.Len() != 0 {
		t.Fatalf("len = %d after take all", u.Len())
	}
}

func TestRestoreKeepsOrder(t *testing.T) {
	q := classic.New(queue.Decl{Name: "q"}, classic.Options{})
	var u Unacked
	fill(&u, q, 1, 2, 3, 4)
	taken, _ := u.Take(2, true, nil)
	u.Restore(taken)
	all := u.TakeAll(nil)
	if got := tagsOf(all); len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[3] != 4 {
		t.Fatalf("after restore: %v", got)
	}
}

func TestManyAcksCompact(t *testing.T) {
	q := classic.New(queue.Decl{Name: "q"}, classic.Options{})
	var u Unacked
	for i := uint64(1); i <= 10000; i++ {
		u.Add(Delivery{Tag: i, Queue: q})
	}
	for i := uint64(1); i <= 10000; i += 2 {
		if _, ok := u.Take(i, false, nil); !ok {
			t.Fatalf("tag %d missing", i)
		}
	}
	if u.Len() != 5000 || len(u.list) > 10000 {
		t.Fatalf("len %d, list %d", u.Len(), len(u.list))
	}
	for i := uint64(2); i <= 10000; i += 2 {
		if _, ok := u.Take(i, false, nil); !ok {
			t.Fatalf("tag %d missing", i)
		}
	}
	if u.Len() != 0 || len(u.list) != 0 {
		t.Fatalf("len %d, list %d after acking all", u.Len(), len(u.list))
	}
}

func BenchmarkAddTake(b *testing.B) {
	q := classic.New(queue.Decl{Name: "q"}, classic.Options{})
	var u Unacked
	var out []Delivery
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		u.Add(Delivery{Tag: uint64(i + 1), Queue: q})
		out, _ = u.Take(uint64(i+1), false, out[:0])
	}
}

func TestOldest(t *testing.T) {
	q := classic.New(queue.Decl{Name: "q"}, classic.Options{})
	var u Unacked
	if _, ok := u.Oldest(); ok {
		t.Fatal("Oldest of an empty set")
	}
	fill(&u, q, 1, 2, 3, 4)
	u.Take(1, false, nil)
	u.Take(3, false, nil)
	if d, ok := u.Oldest(); !ok || d.Tag != 2 {
		t.Fatalf("Oldest after acking 1 and 3 = %d %v, want 2", d.Tag, ok)
	}
	taken, _ := u.Take(2, false, nil)
	if d, _ := u.Oldest(); d.Tag != 4 {
		t.Fatalf("Oldest after acking 2 = %d, want 4", d.Tag)
	}
	u.Restore(taken) // a rolled-back ack is the oldest again
	if d, _ := u.Oldest(); d.Tag != 2 {
		t.Fatalf("Oldest after restoring 2 = %d, want 2", d.Tag)
	}
	u.TakeAll(nil)
	if _, ok := u.Oldest(); ok {
		t.Fatal("Oldest after TakeAll")
	}
}
