package persist_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/persist"
)

// TestBadgerRandomDamage flips one byte at a random offset of one of the
// store's files (Badger's tables, value log, manifest, key registry; the
// message log has its own test) of a closed store, many times: each time
// the store either refuses (to open, or to read what is damaged) or gives
// back exactly what was stored. Damage must never read as data. A refusal
// for a damaged table, value log or MANIFEST names the file, and then
// Options.RepairStore opens the store (for the MANIFEST only when its tail
// is what is damaged) with nothing damaged in it.
func TestBadgerRandomDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("opens Badger many times")
	}
	src := t.TempDir()
	o := persist.Options{MemTableSize: 1 << 20, GCInterval: -1}
	s := openBadger(t, src, o)
	q := &persist.QueueRecord{VHost: "/", Name: "q", Durable: true}
	if err := s.SaveQueue(q); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]persist.MessageRecord{}
	for id := uint64(1); id <= 400; id++ {
		n := 100 + int(id%7)*700 // some bodies in the tree, most in the value log
		m := persist.MessageRecord{RoutingKey: fmt.Sprint(id), Props: []byte{byte(id)}, Body: bytes.Repeat([]byte{byte(id), byte(id >> 8)}, n/2)}
		done := make(chan error, 1)
		s.Publish(id, m, []persist.QueueSeq{{QueueID: q.ID, Seq: id, MsgID: id}}, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want[id] = m
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, string(filepath.Separator)+"wal") && filepath.Base(p) != "LOCK" {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				files = append(files, p)
			}
		}
		return nil
	})
	rng := rand.New(rand.NewPCG(damageSeed(), 11))
	refused, intact, repaired, lost := 0, 0, 0, 0
	for round := range damageRounds() {
		dir := t.TempDir()
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(src, f)
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f := files[rng.IntN(len(files))]
		rel, _ := filepath.Rel(src, f)
		st, _ := os.Stat(f)
		at := rng.Int64N(st.Size())
		b, _ := os.ReadFile(filepath.Join(dir, rel))
		b[at] ^= byte(1 + rng.IntN(255))
		os.WriteFile(filepath.Join(dir, rel), b, 0o644)

		kind := filepath.Ext(rel)
		if filepath.Base(rel) == "MANIFEST" {
			kind = "MANIFEST"
		}
		got, err := openAndRecover(dir, o, q.ID)
		if err == nil {
			for id, w := range want {
				g, ok := got[id]
				if !ok {
					// A message whose entry the damage took away was reported
					// (RecoverQueue drops and logs an entry without a body) or
					// is missing: either way it is loss.
					t.Fatalf("round %d: byte %d of %s changed: message %d is gone without an error", round, at, rel, id)
				}
				if !bytes.Equal(g.Body, w.Body) || g.RoutingKey != w.RoutingKey || !bytes.Equal(g.Props, w.Props) {
					t.Fatalf("round %d: byte %d of %s changed: message %d reads back damaged", round, at, rel, id)
				}
			}
			intact++
			continue
		}
		refused++
		// A refusal for damage in a table, a value log or the MANIFEST
		// names the file; then the repair opens the store, unless it is
		// the MANIFEST, and what it gives back is exactly what was stored.
		if kind != ".sst" && kind != ".vlog" && kind != "MANIFEST" {
			continue
		}
		if !strings.Contains(err.Error(), filepath.Base(rel)) {
			t.Fatalf("round %d: byte %d of %s changed: the refusal does not name the file: %v", round, at, rel, err)
		}
		ro := o
		ro.RepairStore = true
		got, rerr := openAndRecover(dir, ro, q.ID)
		if kind == "MANIFEST" && rerr != nil {
			// Not repairable unless its tail is cut (see checkTables).
			var de *persist.DamagedStoreError
			if !errors.As(rerr, &de) || de.Repairable {
				t.Fatalf("round %d: byte %d of %s changed: the repair says %v, want a DamagedStoreError that is not repairable", round, at, rel, rerr)
			}
			continue
		}
		if rerr != nil {
			t.Fatalf("round %d: byte %d of %s changed (%v): the repair fails: %v", round, at, rel, err, rerr)
		}
		for id, g := range got {
			if w := want[id]; !bytes.Equal(g.Body, w.Body) || g.RoutingKey != w.RoutingKey || !bytes.Equal(g.Props, w.Props) {
				t.Fatalf("round %d: byte %d of %s changed: after the repair message %d reads back damaged", round, at, rel, id)
			}
		}
		repaired++
		lost += len(want) - len(got)
	}
	t.Logf("%d flips refused (%d of them repaired, losing %d messages in all), %d left everything intact", refused, repaired, lost, intact)
}

// openAndRecover opens the store in dir and recovers queue qid.
func openAndRecover(dir string, o persist.Options, qid uint64) (map[uint64]persist.MessageRecord, error) {
	d, err := persist.Open(dir, o)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	got := map[uint64]persist.MessageRecord{}
	_, err = d.RecoverQueue(qid, func(e persist.RecoveredEntry) error {
		got[e.MsgID] = e.Msg
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// damageSeed and damageRounds let a longer run be asked for by hand:
// WARREN_DAMAGE_SEED=N WARREN_DAMAGE_ROUNDS=M.
func damageSeed() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("WARREN_DAMAGE_SEED"), 10, 64); err == nil {
		return v
	}
	return 7
}

func damageRounds() int {
	if v, err := strconv.Atoi(os.Getenv("WARREN_DAMAGE_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 60
}
