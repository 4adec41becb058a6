package raftstore

import (
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// migrate moves the log entries and commit indexes a store written before
// the log kept in Badger into the log, at open. Each group found there is
// emptied in the log first (what a migration cut short wrote), then its
// entries are written and synced; then a marker is set in Badger and the
// old keys are dropped. A crash before the marker runs the whole move
// again at the next open; after it, only the drop.
func (s *Store) migrate() error {
	migrated := false
	old := false
	err := s.db.View(func(txn *badger.Txn) error {
		if _, err := txn.Get([]byte{kindMigrated}); err == nil {
			migrated = true
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		for _, k := range []byte{kindLog, kindCommit} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{k}})
			it.Rewind()
			old = old || it.Valid()
			it.Close()
		}
		return nil
	})
	if err != nil || (!old && !migrated) {
		return err
	}
	if !migrated {
		if err := s.moveOldLog(); err != nil {
			return err
		}
		if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte{kindMigrated}, nil) }); err != nil {
			return err
		}
		if err := s.db.Sync(); err != nil {
			return err
		}
	}
	if err := s.db.DropPrefix([]byte{kindLog}, []byte{kindCommit}); err != nil {
		return err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte{kindMigrated}) }); err != nil {
		return err
	}
	return s.db.Sync()
}

// moveOldLog writes every Badger-held entry and commit index to the log.
func (s *Store) moveOldLog() error {
	var cur *Group
	var req *request
	send := func() error {
		if req == nil {
			return nil
		}
		r := req
		req = nil
		return s.submit(r)
	}
	start := func(gid uint64) error {
		if err := send(); err != nil {
			return err
		}
		cur = s.groupState(gid)
		r := &request{group: cur, dropAll: true}
		r.record(appendRecord(nil, recDrop, gid))
		return s.submit(r)
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindLog}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 17 {
				continue
			}
			gid, idx := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:])
			if cur == nil || cur.id != gid {
				if err := start(gid); err != nil {
					return err
				}
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			var l raft.Log
			if err := decodeLog(gid, idx, v, &l); err != nil {
				return err
			}
			if req == nil {
				req = &request{group: cur}
			}
			req.entry(gid, &l, true)
			if req.size >= 4<<20 {
				if err := send(); err != nil {
					return err
				}
			}
		}
		if err := send(); err != nil {
			return err
		}
		it2 := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindCommit}})
		defer it2.Close()
		for it2.Rewind(); it2.Valid(); it2.Next() {
			k := it2.Item().Key()
			if len(k) != 9 {
				continue
			}
			v, err := it2.Item().ValueCopy(nil)
			if err != nil || len(v) != 8 {
				continue
			}
			g := s.groupState(binary.BigEndian.Uint64(k[1:9]))
			c := binary.BigEndian.Uint64(v)
			r := &request{group: g, commit: c}
			r.record(appendRecord(nil, recCommit, g.id, v))
			if err := s.submit(r); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
