package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// CopyGroup copies everything group srcID stored in src (log entries with
// their checksums, stable values, the staged commit index, snapshots) to
// group dstID of dst, replacing what dst held for it, and makes it durable
// before returning. Neither group may be in use by a raft meanwhile. It
// moves a group between stores (an upgrade that merges stores): copy, then
// remove the source once CopyGroup returned.
func CopyGroup(src *Store, srcID uint64, dst *Store, dstID uint64) error {
	if err := dst.DeleteGroup(dstID); err != nil {
		return fmt.Errorf("raftstore: empty group %d: %w", dstID, err)
	}
	if err := copyLog(src, srcID, dst, dstID); err != nil {
		return fmt.Errorf("raftstore: copy group %d to %d: %w", srcID, dstID, err)
	}
	wb := dst.db.NewWriteBatch()
	defer wb.Cancel()
	err := src.db.View(func(txn *badger.Txn) error {
		prefix := make([]byte, 9)
		prefix[0] = kindStable
		binary.BigEndian.PutUint64(prefix[1:], srcID)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := append([]byte{}, it.Item().Key()...)
			binary.BigEndian.PutUint64(k[1:9], dstID)
			v, err := it.Item().ValueCopy(nil)
			if err == nil {
				err = wb.Set(k, v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		err = dst.syncStable()
	}
	if err != nil {
		return fmt.Errorf("raftstore: copy group %d to %d: %w", srcID, dstID, err)
	}
	if err := copyDir(src.SnapshotDir(srcID), dst.SnapshotDir(dstID)); err != nil {
		return fmt.Errorf("raftstore: copy group %d's snapshots: %w", srcID, err)
	}
	return nil
}

// copyLog writes src's entries and commit index of group srcID to dst's
// (empty) group dstID, durable when it returns.
func copyLog(src *Store, srcID uint64, dst *Store, dstID uint64) error {
	sg, err := src.Group(srcID)
	if err != nil {
		return err
	}
	dg, err := dst.Group(dstID)
	if err != nil {
		return err
	}
	first, _ := sg.FirstIndex()
	last, _ := sg.LastIndex()
	sg.mu.Lock()
	commit := sg.commit
	sg.mu.Unlock()
	r := &request{group: dg}
	for i := first; first != 0 && i <= last; i++ {
		var l raft.Log
		if err := sg.GetLog(i, &l); errors.Is(err, raft.ErrLogNotFound) {
			continue
		} else if err != nil {
			return err
		}
		r.entry(dstID, &l, true)
		if r.size >= 4<<20 {
			if err := dst.submit(r); err != nil {
				return err
			}
			r = &request{group: dg}
		}
	}
	if commit > 0 {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], commit)
		r.record(appendRecord(nil, recCommit, dstID, v[:]))
		r.commit = commit
	}
	if r.size == 0 {
		return nil
	}
	return dst.submit(r)
}

// copyDir copies the tree under from to to, each file synced; a missing
// from copies nothing.
func copyDir(from, to string) error {
	if _, err := os.Stat(from); os.IsNotExist(err) {
		return nil
	}
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		return copyFile(p, target)
	})
	if err != nil {
		return err
	}
	// The new directories' entries are durable too.
	err = filepath.WalkDir(to, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return syncDir(p)
	})
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
