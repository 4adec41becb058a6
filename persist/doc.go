// Package persist keeps Warren's durable state: definitions (exchanges,
// queues, bindings, generic blobs) and persistent messages, on Badger v4,
// plus an in-memory store with the same contract for tests (NewMemory).
//
// # Data model
//
// A message body is stored once under its message id; each queue it was
// routed to holds an entry (queue id, seq) -> message id. The key layout is
// in keys.go. A body's reference count (its number of entries) is kept in
// memory by the committer and rebuilt at Open by scanning the entries; a body
// is deleted in the same transaction that removes its last entry, and
// entries are written in the same transaction as their body, so no crash
// can leave an entry without its body. Open deletes bodies that have no entry
// and entries whose queue record is gone.
//
// # Group commit
//
// One committer goroutine owns the write path. Every write, message ops and
// definition writes alike, is an op appended to the current batch (a slice
// under a mutex; the entries of all ops share one backing array per batch).
// The first op of an empty batch wakes the committer. The committer swaps
// the batch for an empty one, so submitters never wait for disk, applies
// every op to one transaction and commits it with SyncWrites (one fsync for
// the whole batch), then calls the ops' done callbacks in order. While it is
// writing, the next batch fills up; so under load batches grow until one
// fsync covers everything that arrived during the previous one.
//
// A batch that would exceed Badger's transaction limits is cut into several
// transactions between ops, by a conservative size estimate, never inside an
// op: an Atomic op (tx.commit) is in exactly one transaction. If Badger still
// reports a transaction as too big, the range is split in halves and retried;
// a single op too big for any transaction fails with the error.
//
// The reference counts changed by a transaction are kept in an overlay and
// merged into the committed counts only when the commit succeeds, so a failed
// commit (disk error) leaves memory and disk agreeing. Every op of a failed
// transaction gets done(err); later batches are tried normally.
//
// Definition writes (SaveQueue, SaveBinding, ...) go through the same path
// and wait for their batch. DeleteQueue deletes the queue record first, then
// the entries in chunks of dropChunk, one op each, so publishers wait at most
// one chunk behind it.
//
// Linger: when a batch is much smaller than the one before it, the committer
// waits a sixteenth of the last commit time (at most 1 ms) before taking it,
// so that publishers released by the last batch, which resubmit within
// microseconds, share the next fsync instead of splitting into two
// alternating half-size batches. A lone publisher never waits.
//
// Publish never blocks, so the batch can grow without bound while the disk
// is slow: the broker applies backpressure from its own count of
// unconfirmed messages, or from Stats().Pending.
//
// # Goroutines and locks
//
//   - the committer (one per store): started by Open/OpenMemory, exits in
//     Close after committing everything submitted before Close;
//   - value-log GC (Badger store only): runs RunValueLogGC every
//     Options.GCInterval; Close stops it and waits for it before closing
//     the database.
//
// Lock order: engine.defMu (queue definitions) -> engine.mu (current batch);
// engine.statsMu and the memory disk's lock are leaves. No lock is held while
// done callbacks run or while a transaction commits.
//
// # Memory
//
// The committer keeps one reference count per stored message (a map entry,
// roughly 40-50 bytes). Bodies are not cached: RecoverQueue and LoadMessage
// read them from Badger, one at a time. Badger itself uses its defaults
// (64 MiB memtables, 256 MiB block cache) unless Options say otherwise.
// Bodies larger than 1 KiB live in the value log, so the LSM tree holds keys,
// entries and pointers only.
package persist
