package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dgraph-io/badger/v4"
)

// openMinFree is the free space Open wants under the data directory, in
// memtables: Badger writes its memtables and value log through mapped
// files, and a write into a mapped page that a full disk cannot back kills
// the process with SIGBUS. The replay of the message log checks for room
// for what it replays too (replaySpace).
const openMinFree = 1

// openBadger opens Badger in dir, handling what a kill -9 can leave behind,
// and refuses a disk too full to open on with a message that says so.
//
// A kill between the creation of a memtable file and the writing of its
// header leaves an empty .mem file, which Badger's open reports as an error
// ("Create a new file"; upstream issue 2207) although the file holds
// nothing: such files are removed first. Should an open still fail that
// way, it is tried once more, as it then succeeds.
func openBadger(dir string, bo badger.Options, logf func(string, ...any)) (*badger.DB, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: open %s: %w", dir, err)
	}
	if free, ok := freeBytes(dir); ok && free < uint64(openMinFree*bo.MemTableSize) {
		return nil, fmt.Errorf("persist: open %s: only %d bytes free on its file system; the store needs %d to open safely: free some space and start again",
			dir, free, openMinFree*bo.MemTableSize)
	}
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	for _, m := range mems {
		if st, err := os.Stat(m); err == nil && st.Size() == 0 {
			if err := os.Remove(m); err == nil {
				logf("persist: removed %s, an empty memtable file left by a crash", m)
			}
		}
	}
	db, err := badger.Open(bo)
	if err != nil && strings.Contains(err.Error(), "Create a new file") {
		logf("persist: open %s: %v; trying again (a memtable file was left uninitialised by a crash)", dir, err)
		db, err = badger.Open(bo)
	}
	if err != nil {
		if errors.Is(err, badger.ErrTruncateNeeded) || strings.Contains(err.Error(), "checksum") || strings.Contains(err.Error(), "CRC") {
			return nil, fmt.Errorf("persist: the store in %s is damaged and will not open: %w", dir, err)
		}
		return nil, fmt.Errorf("persist: open %s: %w", dir, err)
	}
	if err := verifyTables(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("persist: the store in %s is damaged: %w; restore it from a backup (the message log cannot rebuild it)", dir, err)
	}
	return db, nil
}

// verifyTables checks every block of every table. A block that fails its
// checksum at run time reads as the end of the table in Badger's lookups
// and iterators (the error is dropped), so damage there would read as
// missing messages; checked once at open, it stops the start instead.
// Badger 4.9 dereferences nil while it words that error, so the panic is
// taken for the damage it reports.
func verifyTables(db *badger.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a table block fails its checksum")
		}
	}()
	return db.VerifyChecksum()
}

// freeBytes is the space available to the broker on dir's file system.
func freeBytes(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
