package quorum

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/queue"
)

// A snapshot is the machine's state: the messages' places in the log,
// their counters and owners, the consumers, the proposers' last batches.
// Where this replica keeps a message's body is not state, but the
// snapshot says it, since the replica restores from it: a message whose
// entry is in its log is a reference to that (the entries live messages
// are in are kept from compaction: floor); one that came inline with a
// snapshot it restored is a reference to its record in a body file
// (bodies.go). A snapshot sent to another replica (raft's
// InstallSnapshot) is expanded first (expand): every message carries its
// body inline, since the receiver has neither the entries nor the files;
// the receiver's restore writes those bodies to a body file of its own.
//
// Version 3:
//
//	snapshot = version(1) flags(1) nonce(8) files(4) name* state
//	state    = config counters consumers enqueuers returns ready checked-out (as version 2)
//	message  = id idx pos size expires count owner flag(1) [inline | file]
//	inline   = exchange routing-key props body (each with its length)
//	file     = index(4) (in the header's names) offset(8) length(4)
//
// flags: flagSelfContained (every message inline: what a replica is
// sent, sent again as it is). nonce: names the body file a restore
// writes the inline bodies to (an expanded snapshot's own, random; 0 in
// one with no inline body). Version 2 (no header, no file references)
// and version 1 (no proposer of a consumer, no batches, no message flag)
// are still read; what they carry inline goes to a body file too. A
// node of before version 3 cannot read a version 3 snapshot: in a
// cluster upgraded one node at a time, a replica that needs a snapshot
// from an upgraded leader catches up once it is upgraded too.
const (
	snapshotV1      = 1
	snapshotV2      = 2
	snapshotVersion = 3
)

// Message flags.
const (
	flagInline = 1 // exchange, routing key, props and body follow
	flagFile   = 2 // version 3: body file, offset and length follow
)

// snapRejecting, in a snapshot's overflow byte (whose top bit is
// fifoRules, its low bits the x-overflow), says that the machine refuses
// publishes (machine.rejecting). Snapshots of before have it clear: they
// never refused publishes that way.
const snapRejecting = 0x40

// flagSelfContained, in a version 3 header: no message refers to a log
// entry or a body file.
const flagSelfContained = 1

// encode writes the state; floor is the lowest log index a message of it
// lives in (0: none); files are the body files its messages refer to.
func (s *machine) encode() (b []byte, floor uint64, files []string) {
	out := make([]*msg, 0, len(s.out))
	for _, m := range s.out {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *msg) int { return cmpU(a.id, b.id) })
	index := map[*bodyFile]uint32{}
	note := func(m *msg) {
		if m.ref == nil {
			return
		}
		if _, ok := index[m.ref.file]; !ok {
			index[m.ref.file] = uint32(len(files))
			files = append(files, m.ref.file.name)
		}
	}
	s.returns.each(note)
	s.ready.each(note)
	for _, m := range out {
		note(m)
	}

	e := &encoder{}
	e.u8(snapshotVersion)
	var flags uint8
	if s.returns.len()+s.ready.len()+len(out) == 0 {
		flags = flagSelfContained
	}
	e.u8(flags)
	e.u64(0) // no inline body
	e.u32(uint32(len(files)))
	for _, n := range files {
		e.str(n)
	}
	e.i64(s.cfg.TTL)
	e.i64(s.cfg.MaxLen)
	e.i64(s.cfg.MaxBytes)
	e.u8(uint8(s.cfg.Overflow) | b2u(s.rejecting)*snapRejecting)
	e.i64(s.cfg.DeliveryLimit)
	e.u8(b2u(s.cfg.SAC))
	e.u64(s.nextID)
	e.u64(s.service)
	e.i64(s.now)
	e.u32(uint32(len(s.consumers)))
	for _, c := range s.consumers {
		e.u64(c.key)
		e.str(c.node)
		e.u64(c.pid)
		e.u32(c.prefetch)
		e.u32(uint32(c.priority))
		e.u8(b2u(c.exclusive))
		e.u8(b2u(c.blocked) | b2u(c.cancelled)<<1) // bit 1: cancelled (a version 2 snapshot of before has 0 there)
		e.u64(c.served)
	}
	keys := make([]uint64, 0, len(s.enqueuers))
	for k := range s.enqueuers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.u32(uint32(len(keys)))
	for _, k := range keys {
		q := s.enqueuers[k]
		e.u64(k)
		e.u64(q.seq)
		e.u64(q.last)
		e.ids(q.batches)
	}
	put := func(m *msg) {
		e.u64(m.id)
		e.u64(m.idx)
		e.u32(m.pos)
		e.u32(m.size)
		e.i64(m.expires)
		e.u32(m.count)
		e.u64(m.owner)
		if m.ref != nil {
			e.u8(flagFile)
			e.u32(index[m.ref.file])
			e.u64(uint64(m.ref.off))
			e.u32(m.ref.n)
			return
		}
		e.u8(0)
		if floor == 0 || m.idx < floor {
			floor = m.idx
		}
	}
	e.u32(uint32(s.returns.len()))
	s.returns.each(put)
	e.u32(uint32(s.ready.len()))
	s.ready.each(put)
	e.u32(uint32(len(out)))
	for _, m := range out {
		put(m)
	}
	return e.b, floor, files
}

func putBody(e *encoder, m *queue.Message) {
	e.str(m.Exchange)
	e.str(m.RoutingKey)
	e.bytes(m.Props)
	e.bytes(m.Body)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

var errSnapshot = errors.New("quorum: snapshot does not decode")

// header is what precedes the state: all of it in version 3, the
// version alone before.
type header struct {
	version uint8
	flags   uint8
	nonce   uint64
	files   []string
}

func readHeader(d *sdec) (header, error) {
	h := header{version: d.u8()}
	if d.err == nil && h.version != snapshotV1 && h.version != snapshotV2 && h.version != snapshotVersion {
		d.fail(fmt.Errorf("version %d", h.version))
	}
	if h.version == snapshotVersion {
		h.flags, h.nonce = d.u8(), d.u64()
		for range d.u32() {
			if d.err != nil {
				break
			}
			h.files = append(h.files, d.str())
		}
	}
	return h, d.err
}

// readMachine reads a snapshot back from a stream, one message at a time.
// Inline bodies go to rs's body file (the first ones also into the body
// cache, within its budget: budgetN bodies, budgetB bytes); references to
// body files are opened through rs. rs nil: the snapshot must carry no
// body and refer to no body file.
func readMachine(r io.Reader, rs *restoring, budgetN int, budgetB int64) (*machine, error) {
	d := &sdec{r: bufio.NewReaderSize(r, 256<<10)}
	h, err := readHeader(d)
	if err != nil {
		return nil, err
	}
	v := h.version
	var files []*bodyFile
	for _, n := range h.files {
		if rs == nil {
			return nil, fmt.Errorf("%w: refers to body files", errSnapshot)
		}
		f, err := rs.fileNamed(n)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if rs != nil {
		rs.nonce = h.nonce
	}
	var c config
	c.TTL, c.MaxLen, c.MaxBytes = d.i64(), d.i64(), d.i64()
	o := d.u8()
	c.Overflow = queue.Overflow(o &^ snapRejecting)
	c.DeliveryLimit = d.i64()
	c.SAC = d.u8() == 1
	s := newMachine(c)
	s.rejecting = o&snapRejecting != 0
	s.budgetN, s.budgetB = budgetN, budgetB
	s.nextID, s.service, s.now = d.u64(), d.u64(), d.i64()
	for range d.u32() {
		if d.err != nil {
			break
		}
		k := &consumer{key: d.u64(), node: d.str()}
		if v >= snapshotV2 {
			k.pid = d.u64()
		}
		k.prefetch, k.priority, k.exclusive = d.u32(), int32(d.u32()), d.u8() == 1
		flags := d.u8()
		k.blocked, k.cancelled, k.served = flags&1 != 0, flags&2 != 0, d.u64()
		s.consumers = append(s.consumers, k)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		k := d.u64()
		e := &enqueuer{seq: d.u64(), last: d.u64()}
		if v >= snapshotV2 {
			e.batches = d.ids()
		}
		s.enqueuers[k] = e
	}
	var rec []byte // an inline body's fields, reused
	get := func() *msg {
		m := &msg{id: d.u64(), idx: d.u64(), pos: d.u32(), size: d.u32(), expires: d.i64(), count: d.u32(), owner: d.u64()}
		if v < snapshotV2 {
			return m
		}
		switch flag := d.u8(); {
		case d.err != nil || flag == 0:
		case flag == flagInline:
			rec = d.raw(d.raw(d.raw(d.raw(rec[:0]))))
			if d.err != nil {
				break
			}
			if rs == nil {
				d.fail(errors.New("inline bodies"))
				break
			}
			ref, err := rs.put(rec)
			if err != nil {
				d.setErr(err)
				break
			}
			m.ref = ref
			if s.roomFor(m.size) {
				body, err := parseRecord(rec, true)
				if err != nil {
					d.fail(err)
					break
				}
				s.cache(m, body)
			}
		case flag == flagFile && v >= snapshotVersion:
			i, off, n := d.u32(), d.u64(), d.u32()
			if d.err != nil {
				break
			}
			if int(i) >= len(files) || !files[i].holds(off, n) {
				d.fail(fmt.Errorf("message %d refers outside its body file", m.id))
				break
			}
			m.ref = &bodyRef{file: files[i], off: int64(off), n: n}
		default:
			d.fail(fmt.Errorf("message flag %d", flag))
		}
		return m
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.returns.pushBack(m)
		s.readyN++
		s.readyB += int64(m.size)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.ready.pushBack(m)
		s.readyN++
		s.readyB += int64(m.size)
	}
	for range d.u32() {
		if d.err != nil {
			break
		}
		m := get()
		s.out[m.id] = m
		if k := s.consumer(m.owner); k != nil {
			k.out++
		}
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return s, nil
}

// bodySource reads the bodies a snapshot refers to, for expand.
type bodySource struct {
	message func(idx uint64, pos uint32) (*queue.Message, error) // a log entry's
	file    func(name string) (*bodyFile, error)                 // a body file
}

// expand copies the snapshot r to w with every message's body inline,
// one message at a time: what another replica needs to be sent. nonce
// names the receiver's body file.
func expand(w io.Writer, r io.Reader, src bodySource, nonce uint64) error {
	d := &sdec{r: bufio.NewReaderSize(r, 256<<10)}
	h, err := readHeader(d)
	if err != nil {
		return err
	}
	v := h.version
	var files []*bodyFile
	for _, n := range h.files {
		if src.file == nil {
			return fmt.Errorf("%w: refers to body files", errSnapshot)
		}
		f, err := src.file(n)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	e := &encoder{}
	flush := func() {
		bw.Write(e.b)
		e.b = e.b[:0]
	}
	e.u8(snapshotVersion)
	e.u8(flagSelfContained)
	e.u64(nonce)
	e.u32(0)
	e.i64(d.i64())
	e.i64(d.i64())
	e.i64(d.i64())
	e.u8(d.u8())
	e.i64(d.i64())
	e.u8(d.u8())
	e.u64(d.u64())
	e.u64(d.u64())
	e.i64(d.i64())
	n := d.u32()
	e.u32(n)
	for range n {
		if d.err != nil {
			break
		}
		e.u64(d.u64())
		e.str(d.str())
		if v >= snapshotV2 {
			e.u64(d.u64())
		} else {
			e.u64(0)
		}
		e.u32(d.u32())
		e.u32(d.u32())
		e.u8(d.u8())
		e.u8(d.u8())
		e.u64(d.u64())
		flush()
	}
	n = d.u32()
	e.u32(n)
	for range n {
		if d.err != nil {
			break
		}
		e.u64(d.u64())
		e.u64(d.u64())
		e.u64(d.u64())
		if v >= snapshotV2 {
			e.ids(d.ids())
		} else {
			e.ids(nil)
		}
		flush()
	}
	for range 3 { // returns, ready, checked out
		n = d.u32()
		e.u32(n)
		for range n {
			if d.err != nil {
				break
			}
			id, idx, pos := d.u64(), d.u64(), d.u32()
			e.u64(id)
			e.u64(idx)
			e.u32(pos)
			e.u32(d.u32())
			e.i64(d.i64())
			e.u32(d.u32())
			e.u64(d.u64())
			e.u8(flagInline)
			var flag uint8
			if v >= snapshotV2 {
				flag = d.u8()
			}
			if d.err != nil {
				break
			}
			switch {
			case flag == flagInline:
				e.b = d.raw(d.raw(d.raw(d.raw(e.b))))
			case flag == flagFile && v >= snapshotVersion:
				i, off, n := d.u32(), d.u64(), d.u32()
				if d.err != nil {
					break
				}
				if int(i) >= len(files) || !files[i].holds(off, n) {
					d.fail(fmt.Errorf("message %d refers outside its body file", id))
					break
				}
				rec, err := (&bodyRef{file: files[i], off: int64(off), n: n}).record()
				if err != nil {
					return err
				}
				e.b = append(e.b, rec...)
			case flag == 0:
				if src.message == nil {
					return fmt.Errorf("%w: refers to the log", errSnapshot)
				}
				m, err := src.message(idx, pos)
				if err != nil {
					return err
				}
				putBody(e, m)
			default:
				d.fail(fmt.Errorf("message flag %d", flag))
			}
			flush()
		}
		flush()
	}
	d.end()
	if d.err != nil {
		return d.err
	}
	flush()
	return bw.Flush()
}

// sdec reads a snapshot from a stream as decoder reads an entry: the
// first failure sticks (err) and later reads return zero values. A
// length read from the stream allocates no more than the bytes that
// actually follow it.
type sdec struct {
	r   *bufio.Reader
	err error
}

// fail records that the snapshot does not decode.
func (d *sdec) fail(err error) {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	d.setErr(fmt.Errorf("%w: %w", errSnapshot, err))
}

// setErr records err (a failure to read or to keep a body).
func (d *sdec) setErr(err error) {
	if d.err == nil {
		d.err = err
	}
}

// next returns the next n (at most the reader's buffer) bytes, valid
// until the next read.
func (d *sdec) next(n int) []byte {
	if d.err != nil {
		return nil
	}
	b, err := d.r.Peek(n)
	if err != nil {
		d.fail(err)
		return nil
	}
	d.r.Discard(n)
	return b
}

func (d *sdec) u8() uint8 {
	if b := d.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *sdec) u32() uint32 {
	if b := d.next(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *sdec) u64() uint64 {
	if b := d.next(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *sdec) i64() int64 { return int64(d.u64()) }

// read appends the next n bytes to dst, growing it only as they come.
func (d *sdec) read(dst []byte, n int) []byte {
	for n > 0 && d.err == nil {
		k := min(n, 64<<10)
		dst = slices.Grow(dst, k)
		got, err := io.ReadFull(d.r, dst[len(dst):len(dst)+k])
		dst = dst[:len(dst)+got]
		if err != nil {
			d.fail(err)
		}
		n -= k
	}
	return dst
}

// raw appends a length-prefixed field to dst, its length included.
func (d *sdec) raw(dst []byte) []byte {
	n := d.u32()
	if d.err != nil {
		return dst
	}
	return d.read(binary.BigEndian.AppendUint32(dst, n), int(n))
}

func (d *sdec) str() string { return string(d.read(nil, int(d.u32()))) }

func (d *sdec) ids() []uint64 {
	n := d.u32()
	var v []uint64
	for i := uint32(0); i < n && d.err == nil; i++ {
		v = append(v, d.u64())
	}
	return v
}

// end checks that nothing follows the snapshot.
func (d *sdec) end() {
	if d.err != nil {
		return
	}
	if _, err := d.r.ReadByte(); err == nil {
		d.fail(errors.New("trailing bytes"))
	} else if !errors.Is(err, io.EOF) {
		d.setErr(err)
	}
}

// Snapshot implements raft.FSM: the state is encoded now (on the FSM
// goroutine), and the log below the lowest entry a message still lives
// in is kept from compaction; the body files its messages refer to are
// kept too.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	q := (*Queue)(f)
	q.mu.Lock()
	b, floor, files := q.m.encode()
	q.mu.Unlock()
	// The machine refers to no other file (it only drops references).
	q.bodies.setLive(files)
	if floor == 0 {
		floor = math.MaxUint64
	}
	q.logs.setFloor(floor)
	s := &snapshot{b: b, files: files, q: q}
	q.bodies.encoded(s, files)
	return s, nil
}

// Restore implements raft.FSM: the snapshot is read as a stream; its
// inline bodies are written to a body file, durable before Restore
// returns (so before any snapshot of this replica refers to it).
func (f *fsm) Restore(rc io.ReadCloser) error {
	q := (*Queue)(f)
	defer rc.Close()
	q.mu.Lock()
	budgetN, budgetB := q.m.budgetN, q.m.budgetB // the queue's, not the snapshot's
	q.mu.Unlock()
	rs := q.bodies.restore()
	m, err := readMachine(rc, rs, budgetN, budgetB)
	if err == nil {
		err = rs.finish()
	}
	if err != nil {
		rs.abort()
		return err
	}
	q.mu.Lock()
	q.m = m
	q.mu.Unlock()
	rs.done()
	return nil
}

// sendingSnapshots is a group's snapshot store. A snapshot raft opens
// once the group runs is one it sends to another replica
// (InstallSnapshot), or one it has just installed and restores now: the
// first, which has none of the log entries and body files the
// snapshot's messages refer to, gets it expanded, every message with its
// body; one that is self-contained already (an installed one) is read as
// stored. At the start (raft's own restore) it is read as stored.
type sendingSnapshots struct {
	raft.SnapshotStore
	q       *Queue
	dir     string // the group's snapshot directory
	started atomic.Bool
}

// newSnapshots makes group q's snapshot store over inner, whose
// directory is dir, and q's body files (there too).
func newSnapshots(q *Queue, inner raft.SnapshotStore, dir string) *sendingSnapshots {
	q.bodies = newBodyFiles(dir, q.typ.cfg.NoSync, inner.List)
	return &sendingSnapshots{SnapshotStore: inner, q: q, dir: dir}
}

// start: raft's restore at the start is done. The body files the
// restored state and the stored snapshots do not refer to go, with what
// a crash left half written; from now on a snapshot opened is one raft
// sends to a replica.
func (s *sendingSnapshots) start() {
	s.q.typ.logErr(s.q.bodies.collect(true), "quorum queue: cannot remove unused body files")
	s.started.Store(true)
}

// Open implements raft.SnapshotStore.
//
// The expansion is spooled to a temporary file of the group's snapshot
// directory, and the file is what is sent (removed on Close), rather
// than generated as it is sent. raft sends meta.Size before the first
// byte and the receiver checks it read exactly that many, so a
// generated stream would need a first pass that reads every body (an
// entry's or a record's fields) only to learn its size, and a second
// one during the whole transfer, while this node goes on applying,
// taking snapshots and compacting: the log entries and body files the
// snapshot refers to may be gone before its end. The spooled file is
// written in one pass, with the body files pinned, and depends on
// nothing once Open returns; it costs the disk space of one expanded
// snapshot while it is sent.
func (s *sendingSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !s.started.Load() {
		return s.SnapshotStore.Open(id)
	}
	// From before the store opens the snapshot: a snapshot persisted
	// meanwhile may reap this one, whose body files must stay until
	// its expansion is written.
	s.q.bodies.pin()
	defer s.q.bodies.unpin()
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return meta, rc, err
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	if h, err := br.Peek(2); err == nil && h[0] == snapshotVersion && h[1]&flagSelfContained != 0 {
		return meta, &bufferedSnapshot{Reader: br, c: rc}, nil
	}
	sp, err := s.spool(br)
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("quorum: group %d: snapshot %s for a replica: %w", s.q.gid, id, err)
	}
	m := *meta
	m.Size = sp.size
	return &m, sp, nil
}

// spool writes the expansion of the snapshot r to a temporary file; the
// body files are pinned.
func (s *sendingSnapshots) spool(r io.Reader) (*spooled, error) {
	f, err := os.CreateTemp(s.dir, spoolGlob)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*spooled, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	// Messages of one entry are next to each other: the entry is read
	// once for all of them.
	var er entryReader
	src := bodySource{
		message: func(idx uint64, pos uint32) (*queue.Message, error) { return er.message(s.q, idx, pos) },
		file:    s.q.bodies.open,
	}
	if err := expand(f, r, src, newPID()); err != nil {
		return fail(err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fail(err)
	}
	return &spooled{f: f, r: bufio.NewReaderSize(f, 64<<10), size: size}, nil
}

// spooled is a snapshot expanded for a replica, in a temporary file that
// Close removes.
type spooled struct {
	f    *os.File
	r    *bufio.Reader
	size int64
}

func (s *spooled) Read(p []byte) (int, error) { return s.r.Read(p) }

func (s *spooled) Close() error {
	err := s.f.Close()
	if rerr := os.Remove(s.f.Name()); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// bufferedSnapshot is a stored snapshot read through the buffer its
// header was peeked from.
type bufferedSnapshot struct {
	*bufio.Reader
	c io.Closer
}

func (b *bufferedSnapshot) Close() error { return b.c.Close() }

// snapshot is an encoded state on its way to the store.
type snapshot struct {
	b     []byte
	files []string // the body files it refers to
	q     *Queue
}

// Persist implements raft.FSMSnapshot: once it is stored, the body files
// no snapshot raft may restore from refers to any more go.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.b); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.q.bodies.persisted(sink.ID(), s.files)
	s.q.typ.logErr(s.q.bodies.collect(false), "quorum queue: cannot remove unused body files")
	return nil
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() { s.q.bodies.released(s) }
