package quorum

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/warrenmq/warren/queue"
)

// Body files keep the bodies of messages that came inline with a
// snapshot this replica restored (one installed from the leader, or a
// version 2 snapshot of its own): their log entries are not in this
// replica's log, and keeping them in memory would cost a replica of a
// 10 GB backlog 10 GB of RAM. A restore writes them, in the snapshot's
// order, to a file of that snapshot's, and each such message refers to its record
// there (bodyRef); the replica's own later snapshots carry the
// reference, not the body (flagFile). A delivery reads the body back
// with one pread, unless the restore put it in the machine's body cache.
//
// The files are in the group's snapshot directory, beside the
// directories raft's FileSnapshotStore keeps there (which ignores plain
// files): snapshots/<group>/bodies-<16 hex digits>. So raftstore's
// DeleteGroup (the queue's deletion, a leave, a cleanup at start) removes
// them with the snapshots, and CopyGroup copies them.
//
// A file is named after the nonce of the snapshot its bodies came with:
// restoring the same snapshot again (a restart before this replica takes
// a snapshot of its own) finds them written already.
//
// A file goes once nothing may need it (collect): no message of the
// machine refers to it (live), no snapshot encoded and not yet persisted
// (pending), and none of the snapshots raft may restore from (List: the
// newest the store retains). Crash safety: a file is written, fdatasynced,
// renamed into place and its directory synced before Restore returns, so
// it is durable before any snapshot can refer to it; it is removed only
// once the snapshots that referred to it are gone from the list, and the
// directory is synced first so that their removal is durable before the
// file's.
//
// The file's format: bodyMagic, then records, each the fields of a
// message as a snapshot has them inline (exchange, routing key, props,
// body, each with its length) followed by their CRC-32C.
const (
	bodyPrefix = "bodies-"
	tmpSuffix  = ".tmp"
	spoolGlob  = "spool-*" + tmpSuffix // a snapshot expanded for a replica (sendingSnapshots.Open)
	bodyMagic  = "WQBODY01"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodyFileName is the name of the body file of a snapshot's nonce.
func bodyFileName(nonce uint64) string { return fmt.Sprintf("%s%016x", bodyPrefix, nonce) }

// validBodyName reports whether name is a body file's (a name read from a
// snapshot never leaves the directory).
func validBodyName(name string) bool {
	hex, ok := strings.CutPrefix(name, bodyPrefix)
	if !ok || len(hex) != 16 {
		return false
	}
	_, err := strconv.ParseUint(hex, 16, 64)
	return err == nil
}

// bodyFile is one open body file.
type bodyFile struct {
	name string
	f    *os.File
	size int64
}

// holds reports whether a record of n bytes at off lies within the file.
func (f *bodyFile) holds(off uint64, n uint32) bool {
	size := uint64(f.size)
	return off >= uint64(len(bodyMagic)) && off <= size && uint64(n)+4 <= size-off
}

// bodyRef is where a message's body is in a body file: its fields at off,
// n bytes, and their CRC-32C after them.
type bodyRef struct {
	file *bodyFile
	off  int64
	n    uint32
}

// record reads the referenced record and checks its CRC.
func (r *bodyRef) record() ([]byte, error) {
	buf := make([]byte, int(r.n)+4)
	if _, err := r.file.f.ReadAt(buf, r.off); err != nil {
		return nil, fmt.Errorf("quorum: body file %s at %d: %w", r.file.name, r.off, err)
	}
	rec := buf[:r.n]
	if crc32.Checksum(rec, castagnoli) != binary.BigEndian.Uint32(buf[r.n:]) {
		return nil, fmt.Errorf("quorum: body file %s at %d: damaged record", r.file.name, r.off)
	}
	return rec, nil
}

// read reads the referenced message back.
func (r *bodyRef) read() (*queue.Message, error) {
	rec, err := r.record()
	if err != nil {
		return nil, err
	}
	m, err := parseRecord(rec, false)
	if err != nil {
		return nil, fmt.Errorf("quorum: body file %s at %d: %w", r.file.name, r.off, err)
	}
	return m, nil
}

// parseRecord decodes a message's inline fields. The message's props and
// body are slices of rec, or, copied, of a buffer of their own (rec is
// the caller's scratch).
func parseRecord(rec []byte, copied bool) (*queue.Message, error) {
	d := &decoder{b: rec}
	ex, rk, props, body := d.str(), d.str(), d.bytes(), d.bytes()
	if d.err != nil || len(d.b) != 0 {
		return nil, errSnapshot
	}
	if copied {
		buf := make([]byte, len(props)+len(body))
		copy(buf, props)
		copy(buf[len(props):], body)
		props, body = buf[:len(props):len(props)], buf[len(props):]
	}
	return queue.NewStored(ex, rk, props, body, 0), nil
}

// stored reads m's body from where this replica keeps it: its body file,
// or its log entry (through q.reader). q.mu is held.
func (q *Queue) stored(m *msg) (*queue.Message, error) {
	if m.ref != nil {
		return m.ref.read()
	}
	return q.reader.message(q, m.idx, m.pos)
}

// bodyFiles are one group's body files.
//
// Goroutines: Restore and encode's setLive run on raft's FSM goroutine
// (or its main one at the start), collect on its snapshot goroutine (after
// a snapshot is persisted) and at open, reads of records on the FSM
// goroutine and raft's replication goroutines (a snapshot sent). mu
// guards the maps and pins; an open file is read without it (ReadAt).
type bodyFiles struct {
	dir    string
	noSync bool
	// list is the snapshots raft may restore from, newest first.
	list func() ([]*raft.SnapshotMeta, error)

	mu    sync.Mutex
	files map[string]*bodyFile // open, by name
	// live: the files the machine may refer to (those of its last
	// encode or restore; a machine only drops references in between).
	live map[string]bool
	// pending: the files of each snapshot encoded and not yet released.
	pending map[*snapshot][]string
	// refs: the files each snapshot of the store refers to, by id, as
	// read from its header (or written by Persist).
	refs map[string][]string
	// pins: restores and snapshot expansions under way, which read or
	// write files collect must not remove.
	pins   int
	closed bool
}

func newBodyFiles(dir string, noSync bool, list func() ([]*raft.SnapshotMeta, error)) *bodyFiles {
	return &bodyFiles{dir: dir, noSync: noSync, list: list, files: map[string]*bodyFile{}, live: map[string]bool{},
		pending: map[*snapshot][]string{}, refs: map[string][]string{}}
}

func (b *bodyFiles) pin() {
	b.mu.Lock()
	b.pins++
	b.mu.Unlock()
}

func (b *bodyFiles) unpin() {
	b.mu.Lock()
	b.pins--
	b.mu.Unlock()
}

// setLive records the files the machine refers to now (its encode or
// restore found them all).
func (b *bodyFiles) setLive(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.live)
	for _, n := range names {
		b.live[n] = true
	}
}

// encoded protects a snapshot's files until it is released (persisted,
// then listed, or failed).
func (b *bodyFiles) encoded(s *snapshot, names []string) {
	b.mu.Lock()
	b.pending[s] = names
	b.mu.Unlock()
}

func (b *bodyFiles) released(s *snapshot) {
	b.mu.Lock()
	delete(b.pending, s)
	b.mu.Unlock()
}

// persisted records the files snapshot id refers to (known, so its
// header need not be read).
func (b *bodyFiles) persisted(id string, names []string) {
	b.mu.Lock()
	b.refs[id] = names
	b.mu.Unlock()
}

// open returns body file name, opened for reading.
func (b *bodyFiles) open(name string) (*bodyFile, error) {
	if !validBodyName(name) {
		return nil, fmt.Errorf("%w: body file name %q", errSnapshot, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.files[name]; f != nil {
		return f, nil
	}
	if b.closed {
		return nil, errClosed
	}
	f, err := os.Open(filepath.Join(b.dir, name))
	if err != nil {
		return nil, fmt.Errorf("quorum: body file: %w", err)
	}
	st, err := f.Stat()
	if err == nil {
		err = checkMagic(f)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: body file %s: %w", name, err)
	}
	bf := &bodyFile{name: name, f: f, size: st.Size()}
	b.files[name] = bf
	return bf, nil
}

func checkMagic(f *os.File) error {
	var m [len(bodyMagic)]byte
	if _, err := f.ReadAt(m[:], 0); err != nil || string(m[:]) != bodyMagic {
		return errors.New("not a body file")
	}
	return nil
}

// close closes the open files (the group stopped).
func (b *bodyFiles) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for n, f := range b.files {
		f.f.Close()
		delete(b.files, n)
	}
}

// collect removes the body files nothing may need any more (see the
// top of this file). At open it also removes what a crash left: body
// files being written and snapshots being expanded for a replica.
func (b *bodyFiles) collect(atOpen bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pins > 0 || b.closed {
		return nil // a later snapshot collects
	}
	keep := map[string]bool{}
	for n := range b.live {
		keep[n] = true
	}
	for _, names := range b.pending {
		for _, n := range names {
			keep[n] = true
		}
	}
	metas, err := b.list()
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, m := range metas {
		listed[m.ID] = true
		names, ok := b.refs[m.ID]
		if !ok {
			names, err = snapshotRefs(filepath.Join(b.dir, m.ID, "state.bin"))
			if errors.Is(err, os.ErrNotExist) {
				continue // removed since it was listed: raft cannot restore it
			}
			if err != nil {
				return fmt.Errorf("quorum: read snapshot %s's body files: %w", m.ID, err)
			}
			b.refs[m.ID] = names
		}
		for _, n := range names {
			keep[n] = true
		}
	}
	for id := range b.refs {
		if !listed[id] {
			delete(b.refs, id)
		}
	}
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	var gone []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			continue
		}
		if validBodyName(n) && !keep[n] {
			gone = append(gone, n)
		} else if atOpen && strings.HasPrefix(n, bodyPrefix) && strings.HasSuffix(n, tmpSuffix) {
			gone = append(gone, n)
		} else if ok, _ := filepath.Match(spoolGlob, n); atOpen && ok {
			gone = append(gone, n)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	// The snapshots that referred to these files were removed (raft's
	// reaping, which does not sync the directory): that is made durable
	// before the files go.
	if err := b.syncDir(); err != nil {
		return err
	}
	for _, n := range gone {
		if f := b.files[n]; f != nil {
			f.f.Close()
			delete(b.files, n)
		}
		if err := os.Remove(filepath.Join(b.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (b *bodyFiles) syncDir() error {
	if b.noSync {
		return nil
	}
	d, err := os.Open(b.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// restoring is one Restore's use of the body files: the file it writes
// the snapshot's inline bodies to (or finds written already), and the
// files the restored machine refers to.
type restoring struct {
	b     *bodyFiles
	nonce uint64
	file  *bodyFile     // the inline bodies' file, once the first comes
	w     *bufio.Writer // writes file (nil: found complete, offsets counted)
	off   int64
	used  map[string]bool
}

// restore starts a restore; done or abort ends it.
func (b *bodyFiles) restore() *restoring {
	b.pin()
	return &restoring{b: b, used: map[string]bool{}}
}

// put keeps one inline body's record and returns where it is.
func (r *restoring) put(rec []byte) (*bodyRef, error) {
	if r.file == nil {
		if err := r.start(); err != nil {
			return nil, err
		}
	}
	ref := &bodyRef{file: r.file, off: r.off, n: uint32(len(rec))}
	r.off += int64(len(rec)) + 4
	if r.w == nil {
		if r.off > r.file.size {
			return nil, fmt.Errorf("quorum: body file %s is shorter than its snapshot's bodies", r.file.name)
		}
		return ref, nil
	}
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.Checksum(rec, castagnoli))
	r.w.Write(rec)
	if _, err := r.w.Write(crc[:]); err != nil {
		return nil, fmt.Errorf("quorum: write body file %s: %w", r.file.name, err)
	}
	return ref, nil
}

// start opens the inline bodies' file: the one of the snapshot's nonce
// if a restore of it completed before (its records are the ones this
// restore would write), else a new one.
func (r *restoring) start() error {
	if r.nonce == 0 {
		r.nonce = newPID() // a snapshot with no nonce: a file of its own
	}
	name := bodyFileName(r.nonce)
	r.used[name] = true
	if f, err := r.b.open(name); err == nil {
		r.file, r.off = f, int64(len(bodyMagic))
		return nil
	}
	f, err := os.OpenFile(filepath.Join(r.b.dir, name+tmpSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("quorum: body file: %w", err)
	}
	r.file = &bodyFile{name: name, f: f}
	r.w = bufio.NewWriterSize(f, 256<<10)
	r.w.WriteString(bodyMagic)
	r.off = int64(len(bodyMagic))
	return nil
}

// file is a body file a snapshot refers to.
func (r *restoring) fileNamed(name string) (*bodyFile, error) {
	f, err := r.b.open(name)
	if err != nil {
		return nil, err
	}
	r.used[name] = true
	return f, nil
}

// finish makes the inline bodies durable and their file found under its
// name, before the restored machine refers to it.
func (r *restoring) finish() error {
	if r.file == nil {
		return nil
	}
	if r.w == nil {
		if r.off != r.file.size {
			return fmt.Errorf("quorum: body file %s is longer than its snapshot's bodies", r.file.name)
		}
		return nil
	}
	f := r.file.f
	path := filepath.Join(r.b.dir, r.file.name)
	err := r.w.Flush()
	if err == nil && !r.b.noSync {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if err == nil {
		err = os.Rename(path+tmpSuffix, path)
	}
	if err == nil {
		err = r.b.syncDir()
	}
	if err != nil {
		return fmt.Errorf("quorum: body file %s: %w", r.file.name, err)
	}
	r.file.size = r.off
	r.w = nil
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	if r.b.closed {
		return errClosed
	}
	r.b.files[r.file.name] = r.file
	return nil
}

// done ends a restore whose machine is in place: the files it refers to
// are the live ones.
func (r *restoring) done() {
	names := make([]string, 0, len(r.used))
	for n := range r.used {
		names = append(names, n)
	}
	r.b.setLive(names)
	r.b.unpin()
}

// abort ends a restore that failed: a file it was writing goes.
func (r *restoring) abort() {
	if r.w != nil {
		r.file.f.Close()
		os.Remove(filepath.Join(r.b.dir, r.file.name+tmpSuffix))
	} else if r.file != nil && r.off != r.file.size {
		// Found complete, but it does not match its snapshot: a restore
		// again writes it anew.
		r.b.mu.Lock()
		if r.b.files[r.file.name] == r.file && !r.b.live[r.file.name] {
			delete(r.b.files, r.file.name)
			r.file.f.Close()
			os.Remove(filepath.Join(r.b.dir, r.file.name))
		}
		r.b.mu.Unlock()
	}
	r.b.unpin()
}

// snapshotRefs reads the body files a stored snapshot's header names
// (raft's FileSnapshotStore keeps its state in <id>/state.bin); none
// before version 3.
func snapshotRefs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &sdec{r: bufio.NewReaderSize(f, 4<<10)}
	h, err := readHeader(d)
	if err != nil {
		return nil, err
	}
	return h.files, nil
}
