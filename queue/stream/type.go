// Package stream is RabbitMQ's stream queue over AMQP 0-9-1: an
// append-only log on disk (log.go) that every consumer reads in full from
// an offset of its choice, acknowledging for credit only. Each stream has
// one writer goroutine (writer.go) that appends the publishes waiting for
// it as one batch, to each partition's log, syncs the logs it wrote and
// then confirms them in order (group commit), and a
// reader per consumer, a cursor with a small buffer, so that a stream's
// memory grows neither with its length nor with a consumer's lag. A
// stream's definition is a queue record in the broker's store; its log
// lives under <Dir>/<queue id>/.
package stream

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream/group"
)

// DefaultSegmentSize is RabbitMQ's default x-stream-max-segment-size-bytes.
const DefaultSegmentSize = 500_000_000

// Config is what the stream type needs of the broker.
type Config struct {
	// Dir holds one directory per stream.
	Dir string
	// Store keeps the streams' definitions (nil: none are stored).
	Store persist.Store
	// Log reports failures that have no caller to return to.
	Log func(err error, msg string)
	// Now is the clock (default time.Now).
	Now queue.Clock
	// Ticker starts the ticker a stream with an x-max-age checks its
	// retention by, every d (default: time.NewTicker's); tests replace it.
	Ticker func(d time.Duration) (c <-chan time.Time, stop func())
	// CommitEvery is how far behind the consumer groups' stored offsets
	// may be (default 200 ms); they are stored at once after 1,000
	// settlements, at membership changes, at shutdown and for tx.commit.
	CommitEvery time.Duration
}

var streamInfo = queue.TypeInfo{Name: "stream", Module: "rabbit_stream_queue", Refused: queue.StreamRefused, Replicated: true,
	Compared: queue.StreamCompared, CheckArgs: checkArgs}

// checkArgs checks the stream's own arguments before the registry checks
// the declaration's flags, as RabbitMQ does (a non-durable stream with an
// invalid x-max-age is refused for the x-max-age).
func checkArgs(args map[string]any) error {
	if _, err := ParseSettings(args, queue.Limits{}); err != nil {
		return err
	}
	_, _, _, err := parsePartitions(args)
	return err
}

// Type is the stream queue type.
type Type struct {
	cfg   Config
	anon  atomic.Uint64 // directory names for streams not in a store
	mu    sync.Mutex
	known map[string]bool // directories opened since start
}

// NewType returns the stream type.
func NewType(cfg Config) *Type {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Ticker == nil {
		cfg.Ticker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Type{cfg: cfg, known: map[string]bool{}}
}

// Info implements queue.Type.
func (t *Type) Info() queue.TypeInfo { return streamInfo }

func (t *Type) logErr(err error, msg string) {
	if err != nil && t.cfg.Log != nil {
		t.cfg.Log(err, msg)
	}
}

// Settings are a stream's own arguments.
type Settings struct {
	SegmentSize    int64         // x-stream-max-segment-size-bytes
	MaxAge         time.Duration // x-max-age; 0: none
	MaxLengthBytes int64         // x-max-length-bytes; -1: none
}

// Retention is what retention drops by.
func (s Settings) Retention() group.Retention {
	return group.Retention{MaxBytes: s.MaxLengthBytes, MaxAge: s.MaxAge}
}

// MaxSegmentSize is the largest x-stream-max-segment-size-bytes RabbitMQ
// takes.
const MaxSegmentSize = 3_000_000_000

// ParseSettings reads a stream's arguments and the definition of the
// policy that applies to it (l.Policy): for max-age,
// stream-max-segment-size-bytes and max-length-bytes the policy's value
// wins over the argument, as in RabbitMQ 3.10 (rabbit_stream_queue's
// policy_precedence). The arguments are checked as RabbitMQ checks them;
// a policy's were checked when it was set.
func ParseSettings(args map[string]any, l queue.Limits) (Settings, error) {
	s := Settings{SegmentSize: DefaultSegmentSize, MaxLengthBytes: -1}
	// The registry checked x-max-length-bytes (queue.ParseArgs).
	if n, ok := queue.IntValue(args["x-max-length-bytes"]); ok && n >= 0 {
		s.MaxLengthBytes = n
	}
	if v, ok := args["x-stream-max-segment-size-bytes"]; ok {
		n, ok := queue.IntValue(v)
		switch {
		case !ok:
			return s, &queue.ArgError{Arg: "x-stream-max-segment-size-bytes", Reason: fmt.Sprintf("%q", "expected integer, got "+amqp.FieldTypeName(v))}
		case n < 0:
			return s, &queue.ArgError{Arg: "x-stream-max-segment-size-bytes", Reason: fmt.Sprintf("{value_negative,%d}", n)}
		case n > MaxSegmentSize:
			return s, errSegmentTooLarge
		}
		s.SegmentSize = n
	}
	if v, ok := args["x-max-age"]; ok {
		str, ok := v.(string)
		if !ok {
			return s, &queue.ArgError{Arg: "x-max-age", Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		}
		d, err := group.ParseInterval("x-max-age", str)
		if err != nil {
			return s, err
		}
		s.MaxAge = d
	}
	var def map[string]any
	if l.Policy != nil {
		def = l.Policy.Definition
	}
	for k, v := range def {
		switch k {
		case "max-length-bytes":
			if n, ok := policyInt(v); ok && n >= 0 {
				s.MaxLengthBytes = n
			}
		case "stream-max-segment-size-bytes":
			if n, ok := policyInt(v); ok && n >= 0 && n <= MaxSegmentSize {
				s.SegmentSize = n
			}
		case "max-age":
			if str, ok := v.(string); ok {
				if d, err := group.ParseInterval("max-age", str); err == nil {
					s.MaxAge = d
				}
			}
		}
	}
	return s, nil
}

// policyInt reads a policy's integer: int64, or a whole float64 (JSON).
func policyInt(v any) (int64, bool) {
	if f, ok := v.(float64); ok {
		if f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
			return 0, false
		}
		return int64(f), true
	}
	return queue.IntValue(v)
}

// errSegmentTooLarge is RabbitMQ's refusal of a segment size above
// MaxSegmentSize, a 406 with its own text.
var errSegmentTooLarge = &queue.RefusedError{Text: "Exceeded max value for x-stream-max-segment-size-bytes"}

// New implements queue.Type: the declaration is stored first (its id
// names the stream's directory), then an empty log is created.
func (t *Type) New(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, error) {
	switch {
	case !d.Durable:
		return nil, &queue.PropertyError{Property: "non-durable"}
	case d.Exclusive:
		return nil, &queue.PropertyError{Property: "exclusive-owner"}
	case d.AutoDelete:
		return nil, &queue.PropertyError{Property: "auto-delete"}
	}
	s, err := ParseSettings(d.Args, l)
	if err != nil {
		return nil, err
	}
	if t.cfg.Store != nil {
		rec := persist.QueueRecord{VHost: d.VHost, Name: d.Name, Durable: true, Args: persist.EncodeArgs(d.Args)}
		if err := t.cfg.Store.SaveQueue(&rec); err != nil {
			return nil, fmt.Errorf("cannot store queue: %w", err)
		}
		d.ID = rec.ID
	}
	dir := t.dirFor(d)
	// A new stream starts empty, whatever a crash left under its name.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	q, err := t.open(d, s, dir, h)
	if err != nil && t.cfg.Store != nil {
		t.logErr(t.cfg.Store.DeleteQueue(d.VHost, d.Name, d.ID), "durable store write failed")
	}
	return q, err
}

func (t *Type) dirFor(d queue.Decl) string {
	name := strconv.FormatUint(d.ID, 10)
	if d.ID == 0 {
		name = "anon-" + strconv.FormatUint(t.anon.Add(1), 10)
	}
	dir := filepath.Join(t.cfg.Dir, name)
	t.mu.Lock()
	t.known[name] = true
	t.mu.Unlock()
	return dir
}

// Recover implements the broker's recovery of a stored stream: its log is
// opened (a torn tail cut off, damage refused) and its length returned.
func (t *Type) Recover(d queue.Decl, l queue.Limits, h queue.Hooks) (queue.Queue, int, error) {
	s, err := ParseSettings(d.Args, l)
	if err != nil {
		s = Settings{SegmentSize: DefaultSegmentSize, MaxLengthBytes: -1}
	}
	q, err := t.open(d, s, t.dirFor(d), h)
	if err != nil {
		return nil, 0, err
	}
	n, _ := q.retained()
	return q, n, nil
}

// Recovered removes the directories of streams that are no longer
// defined (a crash between a stream's deletion and its files'), once the
// broker recovered its definitions.
func (t *Type) Recovered() {
	ents, err := os.ReadDir(t.cfg.Dir)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range ents {
		if !t.known[e.Name()] {
			t.logErr(os.RemoveAll(filepath.Join(t.cfg.Dir, e.Name())), "cannot remove a deleted stream's files")
		}
	}
}

// Publish implements queue.Type: m is appended to each stream (to the
// partition its headers or its stream's round robin pick); done runs once
// every append is synced, with the first error.
func (t *Type) Publish(m *queue.Message, qs []queue.Queue, ctx any, done func(error)) (routed, dropped bool) {
	cb := done
	if done != nil && len(qs) != 1 {
		j := newJoin(len(qs)+1, done)
		cb = j.one
		defer cb(nil)
	}
	now := t.cfg.Now().UnixMilli()
	var local publishHeaders
	h := headersOf(m, false, &local)
	for _, x := range qs {
		q := x.(*Queue)
		n, err := q.route(m, h)
		if err != nil {
			// CheckPublish refused it before; it is never misrouted.
			t.logErr(err, "stream publish with invalid partition headers dropped")
			if cb != nil {
				cb(nil)
			}
			continue
		}
		if q.parts[n].append(m, now, h.filter, h.hasFilter, cb) {
			routed = true
		}
	}
	return routed, false
}

// Commit implements queue.Transactional: a transaction's publishes are
// appended as Publish does, its settlements applied, and the consumer
// groups' offsets they moved committed; done runs once all of it is
// synced. (The streams' logs and their offsets files are separate files:
// after a crash a commit's publishes may be there without its offsets'
// move, never the other way round for a commit-ok that was sent.)
func (t *Type) Commit(pubs []queue.TxPublish, settles []queue.TxSettle, ctx any, done func(error)) {
	j := newJoin(len(pubs)+1, done)
	for i := range pubs {
		p := &pubs[i]
		p.Routed, p.Dropped = t.Publish(p.Msg, p.Queues, ctx, j.one)
	}
	var moved []*Queue
	for _, s := range settles {
		s.Queue.Settle(s.Entries, s.Op)
		q := s.Queue.(*Queue)
		if !slices.Contains(moved, q) && slices.ContainsFunc(s.Entries, func(e queue.Entry) bool { return refCursor(e.Ref) != 0 }) {
			moved = append(moved, q)
		}
	}
	if len(moved) == 0 {
		j.one(nil)
		return
	}
	go func() {
		var first error
		for _, q := range moved {
			if err := q.commitOffsets(); err != nil && first == nil {
				first = err
			}
		}
		j.one(first)
	}()
}

// join calls done once n completions arrived, with the first error.
type join struct {
	done  func(error)
	left  atomic.Int32
	first atomic.Pointer[error]
}

func newJoin(n int, done func(error)) *join {
	j := &join{done: done}
	j.left.Store(int32(n))
	return j
}

func (j *join) one(err error) {
	if err != nil {
		e := err // only a failure's error goes to the heap
		j.first.CompareAndSwap(nil, &e)
	}
	if j.left.Add(-1) == 0 {
		if p := j.first.Load(); p != nil {
			j.done(*p)
		} else {
			j.done(nil)
		}
	}
}

// parsePartitions reads x-stream-partitions and x-stream-partition-by:
// the partition count, whether the routing key is hashed, and whether
// the stream is partitioned (declared with x-stream-partitions).
func parsePartitions(args map[string]any) (n int, byKey, partitioned bool, err error) {
	n = 1
	if v, ok := args[group.ArgPartitions]; ok {
		x, isInt := queue.IntValue(v)
		switch {
		case !isInt:
			return 0, false, false, &queue.ArgError{Arg: group.ArgPartitions, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		case x < 1 || x > group.MaxPartitions:
			return 0, false, false, &queue.ArgError{Arg: group.ArgPartitions, Reason: fmt.Sprintf("{value_out_of_range,%d}: from 1 to %d", x, group.MaxPartitions)}
		}
		n, partitioned = int(x), true
	}
	if v, ok := args[group.ArgPartitionBy]; ok {
		s, isStr := v.(string)
		switch {
		case !isStr:
			return 0, false, false, &queue.ArgError{Arg: group.ArgPartitionBy, Reason: fmt.Sprintf("{unacceptable_type,%s}", amqp.FieldTypeName(v))}
		case s != "routing-key":
			return 0, false, false, &queue.ArgError{Arg: group.ArgPartitionBy, Reason: fmt.Sprintf("unknown value '%s': the one value is 'routing-key'", s)}
		}
		byKey = true
	}
	return n, byKey, partitioned, nil
}

// errClosed: the stream was deleted or the broker is stopping.
var errClosed = errors.New("stream: closed")
