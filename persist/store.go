package persist

import (
	"github.com/warrenmq/warren/amqp"

	"errors"
	"time"
)

// ExchangeRecord is a durable exchange's declaration.
type ExchangeRecord struct {
	VHost, Name, Kind             string
	Durable, AutoDelete, Internal bool
	// Args is the AMQP field table exactly as declared; opaque to persist.
	Args []byte
}

// QueueRecord is a durable queue's declaration.
type QueueRecord struct {
	VHost, Name string
	// ID is assigned by SaveQueue when zero and is stable across restarts.
	// Message entries are keyed by it, never by the name.
	ID                             uint64
	Durable, Exclusive, AutoDelete bool
	Args                           []byte
}

// BindingRecord is one binding. A binding is identified by all of its fields,
// Args included (as RabbitMQ does).
type BindingRecord struct {
	VHost, Source, Destination string
	DestIsExchange             bool
	RoutingKey                 string
	Args                       []byte
}

// MessageRecord is a message body and what a delivery needs besides it.
type MessageRecord struct {
	Exchange, RoutingKey string
	// Props is the raw content-header property list; opaque to persist.
	Props, Body []byte
}

// QueueSeq names one queue entry: the message MsgID at position Seq of
// queue QueueID. Settle and Delivered read only QueueID and Seq (the store
// knows which message an entry refers to); Publish and Atomic need MsgID
// equal to the op's message id and ignore it otherwise.
type QueueSeq struct {
	QueueID, Seq uint64
	MsgID        uint64
	// Expires is when the entry expires (Unix ns; 0: never), stored by
	// Publish and Atomic and returned on recovery, so a TTL keeps its
	// deadline across a restart.
	Expires int64
}

// PublishOp is one publish inside an Atomic op.
type PublishOp struct {
	MsgID   uint64
	Msg     MessageRecord
	Entries []QueueSeq
}

// RecoveredEntry is one queue entry found at recovery.
type RecoveredEntry struct {
	Seq, MsgID  uint64
	Redelivered bool
	Expires     int64 // Unix ns; 0: never
	Msg         MessageRecord
}

// Definitions is every durable exchange, queue and binding.
type Definitions struct {
	Exchanges []ExchangeRecord
	Queues    []QueueRecord
	Bindings  []BindingRecord
}

// Store is Warren's durable state. All methods are safe for concurrent use.
//
// Writes go through one committer goroutine (see the package doc). Definition
// and blob writes block until their batch is durable. Message ops (Publish,
// Settle, Delivered, Atomic) only append to the current batch and never block
// on disk; their done callback, if not nil, is called from the committer
// goroutine once the batch holding the op is durable, or with the error that
// made its transaction fail. Callbacks run in submission order, must be cheap,
// and must not call back into the Store. After Close, message ops call done
// with ErrClosed at once, on the caller's goroutine.
//
// Publish, Settle and Atomic keep references to the message's Props and Body
// until done is called (the broker's messages are immutable); they copy the
// entries slices, which the caller may reuse as soon as the call returns.
//
// Entries must name queues saved with SaveQueue: at Open, entries of queues
// without a QueueRecord are dropped (they are leftovers of an interrupted
// DeleteQueue), and so are bodies no entry refers to.
type Store interface {
	// SaveExchange creates or replaces an exchange; durable on return.
	SaveExchange(ExchangeRecord) error
	// DeleteExchange removes an exchange; absent is not an error.
	DeleteExchange(vhost, name string) error
	// SaveQueue creates or replaces a queue. A zero q.ID is set to the ID
	// of the saved queue with the same vhost and name, or to a new ID that
	// was never used before in this store.
	SaveQueue(q *QueueRecord) error
	// DeleteQueue removes the queue record, then all of its entries and the
	// bodies no other queue refers to, in chunks so that concurrent
	// publishers wait at most one chunk. Publishes to the queue submitted
	// after DeleteQueue starts are ignored. Durable on return.
	DeleteQueue(vhost, name string, id uint64) error
	// SaveBinding stores a binding; durable on return.
	SaveBinding(BindingRecord) error
	// DeleteBinding removes the binding equal to b; absent is not an error.
	DeleteBinding(b BindingRecord) error
	// SaveBlob stores a small generic record (policies, users, ...) under
	// key; durable on return. LoadBlob returns ErrNotFound if absent.
	SaveBlob(key string, val []byte) error
	LoadBlob(key string) ([]byte, error)
	// DeleteBlob removes a blob; absent is not an error.
	DeleteBlob(key string) error

	// Publish stores m once under msgID and one entry per element of
	// entries (each element's QueueID and Seq; a (QueueID, Seq) pair must be
	// published once). Entries of queues being deleted are skipped.
	Publish(msgID uint64, m MessageRecord, entries []QueueSeq, done func(error))
	// Settle removes entries (ack, reject, drop). A body goes when its last
	// entry goes. Settling an absent entry is a no-op, not an error.
	Settle(entries []QueueSeq, done func(error))
	// Delivered marks entries as delivered at least once, so recovery
	// returns them with Redelivered set. Absent entries are ignored.
	Delivered(entries []QueueSeq)
	// Atomic applies publishes and then settles in one transaction: after a
	// crash, all of them or none are visible (tx.commit).
	Atomic(publishes []PublishOp, settles []QueueSeq, done func(error))

	// Definitions returns every saved exchange, queue and binding.
	Definitions() (Definitions, error)
	// RecoverQueue calls fn for each entry of the queue in ascending Seq
	// order, with its message loaded (one at a time: memory stays bounded
	// by what fn keeps). It returns the largest Seq seen (0 if none). An
	// error from fn stops the scan and is returned.
	RecoverQueue(queueID uint64, fn func(e RecoveredEntry) error) (maxSeq uint64, err error)
	// NextMessageID is larger than every message id ever stored.
	NextMessageID() uint64
	// LoadMessage reads a stored body; ErrNotFound if there is none.
	LoadMessage(msgID uint64) (MessageRecord, error)

	// Sync waits until every op submitted before it is durable.
	Sync() error
	// ScanQueue calls fn for at most limit entries of the queue with Seq
	// >= from, in ascending Seq order, with their messages loaded when
	// withBodies. Ops still in the committer's batch are not seen: call
	// Sync first to read one's own writes.
	ScanQueue(queueID, from uint64, limit int, withBodies bool, fn func(e RecoveredEntry) error) error
	// QueueCounts returns a queue's number of entries and largest Seq,
	// reading keys only.
	QueueCounts(queueID uint64) (count int, maxSeq uint64, err error)

	// Stats returns the write-path counters.
	Stats() Stats
	// Close commits what is pending, calls its callbacks, stops the
	// committer and background work, and closes the database.
	Close() error
}

// Stats are cumulative write-path counters.
type Stats struct {
	Batches    uint64        // batches taken by the committer
	Commits    uint64        // transactions committed (one fsync each)
	FailedTxns uint64        // transactions that failed
	Ops        uint64        // ops committed (message ops and definition writes)
	Messages   uint64        // messages published (bodies, not entries)
	Entries    uint64        // queue entries published
	Settled    uint64        // queue entries removed by Settle/Atomic
	Folded     uint64        // entries published and settled in one batch, never written
	Pending    int           // ops waiting for the next batch, at the time of the call
	FsyncTotal time.Duration // total time in transaction commit
	FsyncMax   time.Duration // longest transaction commit
	// DanglingEntries counts entries found without a body (never expected:
	// it means corruption); recovery skips and drops them.
	DanglingEntries uint64
	Fsync           FsyncHistogram // transaction commits by duration (fsync_hist.go)
}

// MessagesPerCommit is Messages / Commits.
func (s Stats) MessagesPerCommit() float64 {
	if s.Commits == 0 {
		return 0
	}
	return float64(s.Messages) / float64(s.Commits)
}

// Options configure Open.
type Options struct {
	// Logger receives Badger's warnings and errors and the store's own
	// notices. Nil discards them.
	Logger func(format string, args ...any)
	// GCInterval is how often value-log GC runs (default one minute;
	// negative disables it).
	GCInterval time.Duration
	// NoSync turns off fsync on commit. Only for benchmarks: with it, a
	// done(nil) does not mean the op survives a power loss.
	NoSync bool
	// TrimInterval is how often the pages of the store's mapped files are
	// dropped from the process's resident set (default 250 ms; negative
	// disables it). See trimMapped.
	TrimInterval time.Duration
	// NoWAL turns the message log off: message ops are committed to Badger
	// directly, one synced transaction per batch. For comparisons.
	NoWAL bool
	// MemTableSize overrides Badger's memtable size (bytes) when > 0. The
	// largest transaction is about 15% of it.
	MemTableSize int64
	// RepairLog lets Open go past damage in the message log (a record in
	// the middle of the log that fails its checksum, see CorruptLogError):
	// the damaged stretch is dropped, with a notice through Logger naming
	// the file and the bytes, and everything else is replayed. Without it
	// Open fails with a *CorruptLogError.
	RepairLog bool
	// RepairStore lets Open go past damaged or missing tables of the
	// Badger store (see DamagedStoreError): each is moved to a new
	// damaged-<time> folder in dir (never deleted), with a copy of
	// Badger's MANIFEST as it was, and removed from the MANIFEST; Open
	// then opens the rest and says through Logger what it moved and what
	// that means (what the tables held is gone; older versions of their
	// keys in other tables show again). A message whose body fails its
	// checksum in the value log is dropped by RecoverQueue with a notice
	// instead of failing it; the value-log file stays, as it holds the
	// intact bodies too. A MANIFEST is repaired only when its end is what
	// is damaged (the tables only that end lists are moved aside).
	RepairStore bool
	// DiskFreeLimit, when not 0, has the message log look at the free
	// space on its file system before it writes (at least every MiB or
	// 100 ms, and before every record once it is low): when a record would
	// leave less than DiskFreeLimit bytes, OnDiskLow is called with the
	// free space (from the committer: it must not block) and the log's
	// spare segments are deleted. The write itself goes ahead.
	DiskFreeLimit uint64
	OnDiskLow     func(free uint64)
}

var (
	// ErrNotFound is returned for a missing blob or message.
	ErrNotFound = errors.New("persist: not found")
	// ErrClosed is returned (or passed to done) after Close.
	ErrClosed = errors.New("persist: store closed")
	// ErrCorrupt wraps a record that cannot be decoded.
	ErrCorrupt = errors.New("persist: corrupt record")
	// ErrTooLarge is passed to the done of an op too large to be stored
	// (an Atomic op whose messages pass MaxAtomicBytes); nothing of it is
	// written.
	ErrTooLarge = errors.New("persist: op too large")
)

// MaxAtomicBytes bounds the bytes of the messages (bodies, properties,
// exchange and routing key) of one Atomic op: an op over it may be refused
// with ErrTooLarge. The message log holds an op in one record of at most
// 1 GiB; this leaves room for its entries.
const MaxAtomicBytes = walMaxRecord - 16<<20

// EncodeArgs is the stored form of a declaration's arguments: an AMQP
// field table, nil for none.
func EncodeArgs(args map[string]any) []byte {
	if len(args) == 0 {
		return nil
	}
	b, err := amqp.AppendTable(nil, amqp.Table(args))
	if err != nil {
		return nil
	}
	return b
}

// DecodeArgs reads arguments EncodeArgs wrote.
func DecodeArgs(b []byte) map[string]any {
	if len(b) == 0 {
		return nil
	}
	t, _, err := amqp.DecodeTable(b)
	if err != nil {
		return nil
	}
	return map[string]any(t)
}
