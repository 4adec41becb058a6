package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

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
//
// Every table and the newest value-log file are checked before Badger
// opens (checkStore): damage stops the open with a *DamagedStoreError
// naming the file, unless repair is set; then a damaged table is moved
// aside (setAside) and the open goes on without it, and a damaged value
// log is kept whole (newVlogFile).
func openBadger(dir string, bo badger.Options, repair bool, logf func(string, ...any)) (*badger.DB, error) {
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
	if err := checkStore(dir, bo, repair, logf); err != nil {
		return nil, err
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
	return db, nil
}

// checkStore checks the tables (checkTables) and the newest value-log file
// (checkNewestVlog) in dir, under Badger's directory lock, and with repair
// sets what is damaged aside, saying through logf what it did and what
// that means.
func checkStore(dir string, bo badger.Options, repair bool, logf func(string, ...any)) error {
	lock, ok := lockDir(dir)
	if !ok {
		return nil // in use: badger.Open says so
	}
	defer lock.Close()
	st, err := checkTables(dir, bo)
	if err != nil {
		return fmt.Errorf("persist: check the tables in %s: %w", dir, err)
	}
	vlog, vfid, err := checkNewestVlog(dir)
	if err != nil {
		return fmt.Errorf("persist: check the value log in %s: %w", dir, err)
	}
	if len(st.damaged) == 0 && vlog == nil {
		return nil
	}
	files := slices.Clone(st.damaged)
	if vlog != nil {
		files = append(files, *vlog)
	}
	// Without a MANIFEST nothing says which table is at which level: no
	// repair rebuilds that.
	manifestBad := st.listed == nil && len(st.damaged) > 0
	if manifestBad || !repair {
		return &DamagedStoreError{Dir: dir, Files: files, Repairable: !manifestBad}
	}
	if len(st.damaged) > 0 {
		aside, err := setAside(dir, st, bo, time.Now())
		if err != nil {
			return fmt.Errorf("persist: repair the store in %s: %w", dir, err)
		}
		for _, d := range st.damaged {
			if d.Name == badger.ManifestFilename {
				logf("persist: repair: badger MANIFEST %s: those tables are moved to %s, and Badger's open cuts the MANIFEST", d.Reason, aside)
				continue
			}
			logf("persist: repair: badger table %s %s: moved to %s and removed from the MANIFEST", d.Name, d.Reason, aside)
		}
		logf("persist: repair: %d of %d tables set aside (the MANIFEST as it was is in %s too). "+
			"The messages, queue entries and definitions (exchanges, queues, bindings, users, policies) whose latest version "+
			"was in them are gone; where an older version of one is in another table, that one shows again "+
			"(a message settled earlier may be delivered again, a deleted queue may come back). Queue entries whose message "+
			"is gone are dropped at recovery, each with a notice",
			len(st.ids)+len(st.cut), len(st.listed)+len(st.cut), aside)
	}
	if vlog != nil {
		if err := newVlogFile(dir, vfid+1); err != nil {
			return fmt.Errorf("persist: repair the store in %s: %w", dir, err)
		}
		logf("persist: repair: badger value log %s %s: it stays where it is, as it holds intact message bodies too; "+
			"an empty %06d.vlog is made so that Badger's open does not cut it. The messages whose bodies are damaged "+
			"are dropped when their queues are recovered, each with a notice", vlog.Name, vlog.Reason, vfid+1)
	}
	return nil
}

// freeBytes is the space available to the broker on dir's file system.
func freeBytes(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
