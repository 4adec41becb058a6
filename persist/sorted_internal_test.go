package persist

import "testing"

// TestGetSortedSeesTransaction: getSorted inside a read-write transaction
// sees the transaction's own sets and deletes over the committed state, as
// settleSorted relies on.
func TestGetSortedSeesTransaction(t *testing.T) {
	for _, kind := range []string{"badger", "memory"} {
		t.Run(kind, func(t *testing.T) {
			var st Store
			var err error
			if kind == "badger" {
				st, err = Open(t.TempDir(), Options{GCInterval: -1, TrimInterval: -1, NoSync: true})
			} else {
				st, err = OpenMemory(NewMemoryDisk())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			e := st.(*engine)
			txn := e.kv.begin()
			for seq := uint64(2); seq <= 40; seq += 2 {
				if err := txn.set(entryKey(1, seq), appendEntryVal(nil, 100+seq, 0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.commit(); err != nil {
				t.Fatal(err)
			}
			txn.discard()

			txn = e.kv.begin()
			defer txn.discard()
			for seq := uint64(1); seq < 40; seq += 2 {
				if err := txn.set(entryKey(1, seq), appendEntryVal(nil, 100+seq, 0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.del(entryKey(1, 10)); err != nil {
				t.Fatal(err)
			}
			var keys [][]byte
			for seq := uint64(1); seq <= 41; seq++ {
				keys = append(keys, entryKey(1, seq))
			}
			keys = append(keys, entryKey(2, 1))
			sg, ok := txn.(sortedGetter)
			if !ok {
				t.Skip("no getSorted")
			}
			got := map[uint64]uint64{}
			err = sg.getSorted(keys, func(i int, v []byte) error {
				_, seq, _ := parseEntryKey(keys[i])
				id, _, _ := parseEntryVal(v)
				got[seq] = id
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for seq := uint64(1); seq <= 41; seq++ {
				id, has := got[seq]
				want := seq <= 40 && seq != 10
				if has != want || (has && id != 100+seq) {
					t.Errorf("seq %d: found %v (id %d), want found %v", seq, has, id, want)
				}
			}
			if len(got) != 39 {
				t.Errorf("found %d keys, want 39", len(got))
			}
		})
	}
}
