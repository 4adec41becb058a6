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
// the batch for an empty one, so submitters never wait for disk, makes the
// whole batch durable with one fsync (a record of the message log, below, or
// one Badger transaction with SyncWrites), then calls the ops' done
// callbacks in order. While it is
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
// # Message log
//
// The Badger store (unless Options.NoWAL) puts a message log in front of
// the kv for message ops (Publish, Settle, Delivered, Atomic): wal.go has
// its file format. A batch of message ops is encoded as one log record,
// written with one write and one fdatasync, and its done callbacks run
// then: the log is what makes a confirm durable. The ops stay in memory
// (pending) and are applied to the kv later, in one go, when walPendAge has
// passed since the first of them, or walPendOps or walPendBytes is reached,
// or before anything that needs the kv to show them: a definition write,
// Sync, a read. A publish settled before the apply (a consumer acked it
// within the window) is folded away with its settle (foldBatch), so the
// common case of a short queue never touches Badger at all; a backlog is
// written to Badger in large transactions.
//
// Each apply commits its transactions with Badger's own fsync and then
// writes the checkpoint (metaWAL): the log position up to which the kv has
// everything. Segments wholly before the checkpoint are released, up to
// walMaxSpares of them kept for reuse. Open replays the log from the
// checkpoint into the kv before the committer starts. The replay is
// idempotent, because the kv may already hold ops past the checkpoint (a
// crash between an apply and its checkpoint): a replayed publish skips
// entries that exist and entries of queues that no longer exist, and
// settles and delivered marks of absent entries are no-ops anyway. The
// replay does not fold. Definition writes never go through the log: they
// are committed to the kv with an fsync, after the pending ops are applied,
// so the kv sees every op in submission order.
//
// If an apply fails, its ops are in the log only: the checkpoint stops
// moving (a restart replays from it) and segments are no longer released.
// A failed log write fails the batch's ops and abandons the segment, so no
// valid record ever follows a damaged one.
//
// # Damage
//
// Open checks the Badger files before Badger opens them (badger_check.go):
// every table the MANIFEST lists, block by block; the newest value-log
// file, which Badger's open would otherwise cut at the damage (it takes an
// entry that fails its CRC for a write torn by a crash); and the MANIFEST,
// which its open would cut the same way, deleting the tables only the cut
// part lists. Damage is a
// *DamagedStoreError naming the file. Bodies in older value-log files are
// checked when read; Badger's Item.Value yields an empty value for one it
// cannot read and logs why, so an empty value is the fault, named from
// that log line (valueFaults), and RecoverQueue fails with it.
//
// With Options.RepairStore a damaged or missing table is moved to a new
// damaged-<time> folder in the store's directory (with a copy of the
// MANIFEST; for a cut MANIFEST, the tables only its tail lists) and then
// removed from the MANIFEST, by appending a change set
// as Badger does; what it held is lost and older versions of its keys may
// show again. A damaged newest value-log file stays, and an empty one is
// made after it for Badger's open to scan. RecoverQueue then drops, with a
// notice each, the entries whose bodies cannot be read, as it drops those
// whose bodies are missing. Every step is logged through Options.Logger.
//
// # Goroutines and locks
//
//   - the committer (one per store): started by Open/OpenMemory, exits in
//     Close after committing everything submitted before Close;
//   - value-log GC (Badger store only): runs RunValueLogGC every
//     Options.GCInterval, and at once when the committer asks (below);
//     Close stops it and waits for it before closing the database.
//
// Space of a drained backlog: Badger's value-log GC sees garbage only
// through compactions, and a drain's deletes sit in the memtable until
// more writes fill it. So when bodies were deleted and the store then has
// nothing to do for reclaimQuiet (2 s), the committer itself (no write in
// progress) flushes the memtables and compacts level 0 (badgerKV.reclaim)
// and wakes the GC goroutine.
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
