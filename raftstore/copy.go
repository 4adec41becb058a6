package raftstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
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
	wb := dst.db.NewWriteBatch()
	defer wb.Cancel()
	err := src.db.View(func(txn *badger.Txn) error {
		for _, kind := range []byte{kindLog, kindStable, kindCommit} {
			prefix := make([]byte, 9)
			prefix[0] = kind
			binary.BigEndian.PutUint64(prefix[1:], srcID)
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
			for it.Rewind(); it.Valid(); it.Next() {
				k := append([]byte{}, it.Item().Key()...)
				binary.BigEndian.PutUint64(k[1:9], dstID)
				v, err := it.Item().ValueCopy(nil)
				if err == nil {
					err = wb.Set(k, v)
				}
				if err != nil {
					it.Close()
					return err
				}
			}
			it.Close()
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		err = dst.db.Sync()
	}
	if err != nil {
		return fmt.Errorf("raftstore: copy group %d to %d: %w", srcID, dstID, err)
	}
	// The bounds are read again at the next Group.
	dst.mu.Lock()
	delete(dst.groups, dstID)
	dst.mu.Unlock()
	if err := copyDir(src.SnapshotDir(srcID), dst.SnapshotDir(dstID)); err != nil {
		return fmt.Errorf("raftstore: copy group %d's snapshots: %w", srcID, err)
	}
	return nil
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
