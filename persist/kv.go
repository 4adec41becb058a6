package persist

// kv is the small ordered key-value API the engine needs; Badger and the
// in-memory disk implement it.
type kv interface {
	// begin starts a read-write transaction. Only the committer (and Open,
	// before the committer starts) calls it, so transactions never conflict.
	begin() kvTxn
	// view runs fn in a read-only snapshot.
	view(fn func(r kvReader) error) error
	// limits is the largest transaction: entry count and estimated bytes.
	limits() (count, size int64)
	// entrySize estimates what one set of a key and value costs against
	// limits.
	entrySize(klen, vlen int) int64
	close() error
}

type kvReader interface {
	// get calls fn with the value of k, valid only during fn; it returns
	// ErrNotFound if k is absent.
	get(k []byte, fn func(v []byte) error) error
	// scan calls fn for each key with the prefix, in key order; k and v are
	// valid only during fn, v is nil when keysOnly. An error from fn stops
	// the scan and is returned.
	scan(prefix []byte, keysOnly bool, fn func(k, v []byte) error) error
	// scanFrom is scan starting at the first key >= start (start has the
	// prefix).
	scanFrom(prefix, start []byte, keysOnly bool, fn func(k, v []byte) error) error
}

type kvTxn interface {
	kvReader
	// set and del keep references to their arguments until commit or
	// discard returns.
	set(k, v []byte) error
	del(k []byte) error
	// commit makes the writes durable (fsynced unless NoSync) or applies
	// none of them.
	commit() error
	// discard ends the transaction; a no-op after commit.
	discard()
}
