package persist

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

const (
	defaultGCInterval   = time.Minute
	defaultTrimInterval = 250 * time.Millisecond
	valueThreshold      = 1 << 10
)

// Open opens (or creates) the Badger store in dir and recovers it: see
// Store for what Open cleans up. The store owns a committer goroutine and a
// value-log GC goroutine until Close.
func Open(dir string, opts Options) (Store, error) {
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(!opts.NoSync).
		WithDetectConflicts(false). // one writer: the committer
		WithMetricsEnabled(false).
		// Bodies above 1 KiB go to the value log: the LSM tree keeps only
		// keys, entries and pointers, so recovery scans and compactions stay
		// cheap under a backlog; value-log GC reclaims drained bodies.
		WithValueThreshold(valueThreshold).
		// Memory stays flat under a backlog: small memtables and caches
		// instead of Badger's defaults (5 x 64 MiB memtables, a 256 MiB
		// block cache), which alone would be several hundred MiB of RSS.
		WithMemTableSize(16 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(16 << 20).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		// Badger writes and reads the value log through mmap, so its pages
		// count in RSS while a file is mapped; small files keep that bounded.
		WithValueLogFileSize(64 << 20).
		// A damaged table block or value is an error, never data: checked
		// on every read (CRC-32C in hardware, cheap next to the read).
		// Not OnTableRead: Badger 4.9's check of a whole table at open
		// dereferences nil when a block fails (table.VerifyChecksum), a
		// panic in its own goroutine that no recover reaches.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true)
	faults := &valueFaults{}
	bo = bo.WithLogger(badgerLogger{f: opts.Logger, faults: faults})
	if opts.MemTableSize > 0 {
		bo = bo.WithMemTableSize(opts.MemTableSize)
		// Badger refuses a value threshold above its largest batch.
		bo = bo.WithValueThreshold(min(bo.ValueThreshold, opts.MemTableSize*15/100/4))
	}
	db, err := openBadger(dir, bo, opts.RepairStore, opts.Logger)
	if err != nil {
		return nil, err
	}
	k := &badgerKV{db: db, faults: faults, threshold: bo.ValueThreshold, stop: make(chan struct{}), gcNow: make(chan struct{}, 1), gcDone: make(chan struct{}), trimDone: make(chan struct{})}
	lo := logOptions{dir: filepath.Join(dir, walDir), noSync: opts.NoSync, repair: opts.RepairLog, repairValues: opts.RepairStore,
		diskFreeLimit: opts.DiskFreeLimit, onDiskLow: opts.OnDiskLow}
	if opts.NoWAL {
		lo.dir = ""
	}
	e, err := newEngine(k, opts.Logger, lo)
	if err != nil {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	interval := opts.GCInterval
	if interval == 0 {
		interval = defaultGCInterval
	}
	if interval > 0 {
		go k.runGC(interval, e.log)
	} else {
		close(k.gcDone)
	}
	if abs, err := filepath.Abs(dir); err == nil && opts.TrimInterval >= 0 {
		go k.runTrim(abs, cmp.Or(opts.TrimInterval, defaultTrimInterval))
	} else {
		close(k.trimDone)
	}
	return e, nil
}

type badgerKV struct {
	db        *badger.DB
	faults    *valueFaults // what Badger logged about values it could not read
	threshold int64
	stop      chan struct{} // closed by close: the GC goroutine exits
	gcNow     chan struct{} // buffered(1): reclaim asks the GC goroutine for a round now
	gcDone    chan struct{} // closed when the GC goroutine has exited
	trimDone  chan struct{} // closed when the trim goroutine has exited
	closeOnce sync.Once
	closeErr  error
}

// runGC runs value-log GC every interval until close. One call rewrites at
// most one log file, so it repeats while files get rewritten.
func (k *badgerKV) runGC(interval time.Duration, logf func(string, ...any)) {
	defer close(k.gcDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		case <-k.gcNow:
		}
		rewrote := false
		for range 64 {
			err := k.db.RunValueLogGC(0.5)
			if errors.Is(err, badger.ErrNoRewrite) && !rewrote && k.vlogFiles() > 4 {
				// Value-log GC only sees garbage that compactions have
				// counted. After a backlog drains, nothing compacts an idle
				// tree, so the log files would stay: compact once, then try
				// again.
				if ferr := k.db.Flatten(1); ferr != nil {
					logf("persist: flatten: %v", ferr)
				}
				err = k.db.RunValueLogGC(0.5)
			}
			if err != nil {
				if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
					logf("persist: value-log GC: %v", err)
				}
				break
			}
			rewrote = true
			select {
			case <-k.stop:
				return
			default:
			}
		}
	}
}

// reclaim makes the value log's garbage visible to its GC and asks for a
// GC round. Badger counts a value-log entry as garbage only when a
// compaction drops it, and a drain's deletes sit in the memtable, which
// only fills up and flushes with more writes; even flushed, they stay in
// level 0 with the sets they delete until four tables pile up there. So
// a key of its own (kindFlush) is written and dropped with DropPrefix,
// which flushes every memtable and compacts level 0 into the next level,
// where a delete meets its set and the set's value is counted as
// garbage. DropPrefix refuses writes while it runs: the committer, the
// only writer, calls reclaim itself. The head value-log file is never
// collected, so with no other file there is nothing to do.
func (k *badgerKV) reclaim() error {
	if k.vlogFiles() < 2 {
		return nil
	}
	key := []byte{kindFlush}
	txn := k.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(key, nil); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	if err := k.db.DropPrefix(key); err != nil {
		return err
	}
	select {
	case k.gcNow <- struct{}{}:
	default:
	}
	return nil
}

// vlogFiles counts the value-log files.
func (k *badgerKV) vlogFiles() int {
	m, _ := filepath.Glob(filepath.Join(k.db.Opts().Dir, "*.vlog"))
	return len(m)
}

// runTrim drops the store's mapped file pages from the process's resident
// set every interval until close (see trimMapped).
func (k *badgerKV) runTrim(dir string, interval time.Duration) {
	defer close(k.trimDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
			trimMapped(dir)
		}
	}
}

func (k *badgerKV) close() error {
	k.closeOnce.Do(func() {
		close(k.stop)
		<-k.gcDone
		<-k.trimDone
		k.closeErr = k.db.Close()
	})
	return k.closeErr
}

func (k *badgerKV) begin() kvTxn {
	return badgerTxn{badgerReader{k.db.NewTransaction(true), k.faults}}
}

func (k *badgerKV) view(fn func(r kvReader) error) error {
	return k.db.View(func(txn *badger.Txn) error { return fn(badgerReader{txn, k.faults}) })
}

func (k *badgerKV) limits() (int64, int64) {
	return k.db.MaxBatchCount() * 9 / 10, k.db.MaxBatchSize() * 9 / 10
}

// entrySize mirrors Badger's estimate (txn.checkSize): small values live in
// the LSM tree, large ones in the value log behind a 12-byte pointer; plus
// two meta bytes and the 8-byte version, rounded up.
func (k *badgerKV) entrySize(klen, vlen int) int64 {
	if int64(vlen) < k.threshold {
		return int64(klen+vlen) + 12
	}
	return int64(klen) + 12 + 12
}

type badgerReader struct {
	txn    *badger.Txn
	faults *valueFaults
}

// value yields item's value to fn, or the error for a value Badger could
// not read (which it yields as an empty value: see valueFaults).
func (r badgerReader) value(item *badger.Item, fn func([]byte) error) error {
	return item.Value(func(v []byte) error {
		if len(v) == 0 && item.ValueSize() > 0 {
			return r.faults.fault(item.Key())
		}
		return fn(v)
	})
}

func (r badgerReader) get(key []byte, fn func([]byte) error) error {
	item, err := r.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return r.value(item, fn)
}

func (r badgerReader) scan(prefix []byte, keysOnly bool, fn func(k, v []byte) error) error {
	return r.scanFrom(prefix, prefix, keysOnly, fn)
}

func (r badgerReader) scanFrom(prefix, start []byte, keysOnly bool, fn func(k, v []byte) error) error {
	o := badger.DefaultIteratorOptions
	o.PrefetchValues = !keysOnly
	o.Prefix = prefix
	it := r.txn.NewIterator(o)
	defer it.Close()
	var buf []byte
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var v []byte
		if !keysOnly {
			// A copy, so that fn may read other keys without nesting in
			// item.Value.
			var err error
			if buf, err = item.ValueCopy(buf[:0]); err != nil {
				return err
			}
			if len(buf) == 0 && item.ValueSize() > 0 {
				return r.faults.fault(item.Key())
			}
			v = buf
		}
		if err := fn(item.Key(), v); err != nil {
			return err
		}
	}
	return nil
}

// getSorted walks one iterator over the keys (ascending, all of one kind:
// the same first byte): a key right after the previous one is a step,
// anything else a seek.
func (r badgerReader) getSorted(keys [][]byte, fn func(i int, v []byte) error) error {
	if len(keys) == 0 {
		return nil
	}
	o := badger.DefaultIteratorOptions
	o.PrefetchValues = false
	o.Prefix = keys[0][:1]
	it := r.txn.NewIterator(o)
	defer it.Close()
	it.Seek(keys[0])
	for i, k := range keys {
		// A few steps forward before giving up and seeking.
		for step := 0; it.Valid() && bytes.Compare(it.Item().Key(), k) < 0; step++ {
			if step == 4 {
				it.Seek(k)
				break
			}
			it.Next()
		}
		if !it.Valid() {
			return nil
		}
		if !bytes.Equal(it.Item().Key(), k) {
			continue
		}
		if err := r.value(it.Item(), func(v []byte) error { return fn(i, v) }); err != nil {
			return err
		}
		it.Next()
	}
	return nil
}

type badgerTxn struct{ badgerReader }

func tooBig(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: %w", errTooBig, err)
	}
	return err
}

func (t badgerTxn) set(k, v []byte) error { return tooBig(t.txn.Set(k, v)) }
func (t badgerTxn) del(k []byte) error    { return tooBig(t.txn.Delete(k)) }
func (t badgerTxn) commit() error         { return tooBig(t.txn.Commit()) }
func (t badgerTxn) discard()              { t.txn.Discard() }

// badgerLogger passes Badger's warnings and errors to f (when not nil) and
// its errors for values it could not read to faults.
type badgerLogger struct {
	f      func(string, ...any)
	faults *valueFaults
}

func (l badgerLogger) Errorf(f string, a ...any) {
	l.faults.note(f, a)
	if l.f != nil {
		l.f("badger: error: "+f, a...)
	}
}

func (l badgerLogger) Warningf(f string, a ...any) {
	if l.f != nil {
		l.f("badger: warning: "+f, a...)
	}
}
func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
