// journal.go: the journal of a partitioned stream, so that a write cycle
// of the stream costs one sync whatever the number of partitions it
// touched. The writer appends each partition's records to its log
// (unsynced), then writes the cycle's records of every partition as one
// entry to the journal and syncs only the journal; the records are
// readable and confirmed once it is synced. The partitions' files are
// synced behind it, at a checkpoint, when the journal file has grown to
// journalMax: the writer starts a new journal file, a goroutine syncs the
// partitions' active files and then removes the older journal files. A
// stream with one partition has no journal: its log is the one file a
// cycle syncs anyway.
//
// Files: <stream dir>/<seq>.wjl, seq counting up from 1 (20 digits).
// Entry: magic u32 ("WJE1") | len u32 | crc u32 (CRC-32C of the len
// bytes after it) | parts
// u16 | per part: partition u16 | records u32 | bytes u32 | the records,
// encoded as in the partition's segment files. Little-endian.
//
// Recovery (openJournal, before the partitions' logs open): a partition's
// records from the first one a journal file holds for it are the
// journal's; older ones were synced in its log by a checkpoint (or when a
// segment rolled). Its log opens cut at that offset (OpenLogCut), the
// journal's records are appended again and synced, and only then are the
// journal files removed. A torn tail of the last journal file (an entry
// cut short or failing its CRC with nothing valid after it) was never
// confirmed and is ignored; anything else invalid is damage and the
// stream does not open. A stream without journal files (a clean stop, or
// one written before the journal existed) opens as it is.

package stream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

const (
	journalExt    = ".wjl"
	journalHeader = 12
	journalMagic  = "WJE1"
	// maxJournalEntry bounds an entry's length field: a cycle holds at
	// most a few records of maxRecord per partition in practice; this
	// only keeps a damaged length from allocating without limit.
	maxJournalEntry = 1 << 31
)

// journalMax: a journal file this large starts a checkpoint (a variable
// for tests).
var journalMax int64 = 64 << 20

func journalName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, journalExt) }

// journal is a partitioned stream's journal. Only the writer calls it.
type journal struct {
	dir   string
	seq   uint64 // the file written
	f     *os.File
	size  int64
	buf   []byte
	parts []journalPart // write's, kept between cycles

	// A checkpoint in flight: done is closed when it ended, err says how.
	ckpt *checkpoint
	// broken: a checkpoint or a journal write failed. A file whose sync
	// failed may have lost its pages while a later sync succeeds, so the
	// journal files stay from then on, for the next open to replay.
	broken error
}

type checkpoint struct {
	done chan struct{}
	err  error
}

// journalFiles lists the journal files in dir by sequence.
func journalFiles(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, journalExt) {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, journalExt), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stream: unexpected file %s in %s", name, dir)
		}
		seqs = append(seqs, n)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// journalPart is one partition's records in an entry.
type journalPart struct {
	partition int
	recs      []Record // slices into the entry's bytes
}

// readEntries calls fn for each entry of the journal file at path, in
// order. last says the file is the newest, whose torn tail is ignored.
// The records fn gets are valid until it returns.
func readEntries(path string, partitions int, last bool, fn func([]journalPart) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(f, 256<<10)
	var pos int64
	var body []byte
	var parts []journalPart
	torn := func(reason string) error {
		if last && !validEntryAfter(path, pos+1, st.Size(), partitions) {
			return nil
		}
		return &DamageError{File: path, Offset: pos, Reason: reason}
	}
	for pos < st.Size() {
		var h [journalHeader]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return torn("journal entry header cut short")
		}
		if string(h[:4]) != journalMagic {
			return torn("no journal entry magic")
		}
		n := int64(binary.LittleEndian.Uint32(h[4:]))
		if n < 2 || n > maxJournalEntry || pos+journalHeader+n > st.Size() {
			return torn(fmt.Sprintf("bad journal entry length %d", n))
		}
		if int64(cap(body)) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			return torn("journal entry cut short")
		}
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(h[8:]) {
			return torn("journal entry fails its CRC")
		}
		parts, err = decodeEntry(body, partitions, parts[:0])
		if err != nil {
			// The CRC held: the writer wrote it so.
			return &DamageError{File: path, Offset: pos, Reason: err.Error()}
		}
		if err := fn(parts); err != nil {
			return err
		}
		pos += journalHeader + n
	}
	return nil
}

// validEntryAfter reports whether a whole valid entry (magic, CRC and
// parts) starts anywhere in the file at path from byte from on.
func validEntryAfter(path string, from, size int64, partitions int) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) != size {
		return true // cannot tell: not a torn tail
	}
	for i := from; i+journalHeader <= size; i++ {
		if string(b[i:i+4]) != journalMagic {
			continue
		}
		n := int64(binary.LittleEndian.Uint32(b[i+4:]))
		if n < 2 || i+journalHeader+n > size {
			continue
		}
		body := b[i+journalHeader : i+journalHeader+n]
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[i+8:]) {
			continue
		}
		if _, err := decodeEntry(body, partitions, nil); err == nil {
			return true
		}
	}
	return false
}

func decodeEntry(b []byte, partitions int, parts []journalPart) ([]journalPart, error) {
	np := int(binary.LittleEndian.Uint16(b))
	i := 2
	for range np {
		if len(b)-i < 10 {
			return nil, errors.New("journal part cut short")
		}
		p := int(binary.LittleEndian.Uint16(b[i:]))
		nr := int(binary.LittleEndian.Uint32(b[i+2:]))
		nb := int(binary.LittleEndian.Uint32(b[i+6:]))
		i += 10
		if p >= partitions || nb > len(b)-i {
			return nil, fmt.Errorf("bad journal part: partition %d of %d, %d bytes", p, partitions, nb)
		}
		jp := journalPart{partition: p}
		rb := b[i : i+nb]
		for range nr {
			r, n, err := decodeRecord(rb)
			if err != nil {
				return nil, fmt.Errorf("journal record of partition %d: %v", p, err)
			}
			jp.recs = append(jp.recs, r)
			rb = rb[n:]
		}
		if len(rb) != 0 {
			return nil, fmt.Errorf("journal part of partition %d has %d bytes after its records", p, len(rb))
		}
		parts = append(parts, jp)
		i += nb
	}
	if i != len(b) {
		return nil, errors.New("journal entry has bytes after its parts")
	}
	return parts, nil
}

// journalCuts reads the journal files in dir and returns, per partition,
// the first offset the journal holds (noCut: none), and the files.
func journalCuts(dir string, partitions int) ([]uint64, []uint64, error) {
	seqs, err := journalFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	cuts := make([]uint64, partitions)
	for i := range cuts {
		cuts[i] = noCut
	}
	for i, seq := range seqs {
		err := readEntries(filepath.Join(dir, journalName(seq)), partitions, i == len(seqs)-1, func(parts []journalPart) error {
			for _, jp := range parts {
				if len(jp.recs) > 0 && cuts[jp.partition] == noCut {
					cuts[jp.partition] = jp.recs[0].Offset
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return cuts, seqs, nil
}

// replayJournal appends the journal's records to the partitions' logs
// (opened cut at journalCuts' offsets), syncs the logs, removes the
// journal files and starts a new one.
func replayJournal(dir string, logs []*Log, seqs []uint64) (*journal, error) {
	for i, seq := range seqs {
		err := readEntries(filepath.Join(dir, journalName(seq)), len(logs), i == len(seqs)-1, func(parts []journalPart) error {
			for _, jp := range parts {
				l := logs[jp.partition]
				recs := jp.recs
				// Records the log kept below its cut.
				for len(recs) > 0 && recs[0].Offset < l.Next() {
					recs = recs[1:]
				}
				if len(recs) == 0 {
					continue
				}
				if err := l.replay(recs); err != nil {
					return &DamageError{File: filepath.Join(dir, journalName(seq)), Reason: fmt.Sprintf("partition %d: %v", jp.partition, err)}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, l := range logs {
		if err := l.Sync(); err != nil {
			return nil, err
		}
	}
	next := uint64(1)
	for _, seq := range seqs {
		if err := os.Remove(filepath.Join(dir, journalName(seq))); err != nil {
			return nil, err
		}
		next = seq + 1
	}
	return newJournal(dir, next)
}

// newJournal creates journal file seq.
func newJournal(dir string, seq uint64) (*journal, error) {
	f, err := os.OpenFile(filepath.Join(dir, journalName(seq)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &journal{dir: dir, seq: seq, f: f}, nil
}

// write appends the batch's records of every partition as one entry and
// syncs it.
func (j *journal) write(batch []written) error {
	parts := j.parts[:0]
	for i := range batch {
		if w := &batch[i]; w.err == nil && len(w.recs) > 0 {
			parts = append(parts, journalPart{partition: w.p.n, recs: w.recs})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	b := j.encode(parts)
	clear(parts)
	j.parts = parts[:0]
	defer func() {
		if cap(b) <= maxKeptWriteBuf {
			j.buf = b[:0]
		} else {
			j.buf = nil
		}
	}()
	if _, err := j.f.Write(b); err != nil {
		j.broken = err
		return err
	}
	j.size += int64(len(b))
	if err := j.f.Sync(); err != nil {
		j.broken = err
		return err
	}
	return nil
}

// encode returns the entry of parts, in the journal's buffer.
func (j *journal) encode(parts []journalPart) []byte {
	b := append(j.buf[:0], make([]byte, journalHeader+2)...)
	for _, jp := range parts {
		at := len(b)
		b = binary.LittleEndian.AppendUint16(b, uint16(jp.partition))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(jp.recs)))
		b = binary.LittleEndian.AppendUint32(b, 0)
		start := len(b)
		for k := range jp.recs {
			b = encodeRecord(b, &jp.recs[k])
		}
		binary.LittleEndian.PutUint32(b[at+6:], uint32(len(b)-start))
	}
	copy(b, journalMagic)
	binary.LittleEndian.PutUint16(b[journalHeader:], uint16(len(parts)))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-journalHeader))
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[journalHeader:], crcTable))
	return b
}

// failed returns the error that broke the journal, if any: a checkpoint
// that ended with one, or a failed write.
func (j *journal) failed() error {
	if c := j.ckpt; c != nil && j.broken == nil {
		select {
		case <-c.done:
			j.ckpt = nil
			j.broken = c.err
		default:
		}
	}
	return j.broken
}

// maybeCheckpoint starts a checkpoint when the journal file is full and
// none is in flight: a new journal file takes the next entries while a
// goroutine syncs the partitions' active files (everything appended so
// far is in them or in segments synced when they rolled) and then
// removes the older journal files.
func (j *journal) maybeCheckpoint(parts []*partition) error {
	if j.size < journalMax || j.ckpt != nil {
		return nil
	}
	return j.checkpoint(parts, false)
}

// checkpoint starts one (wait: and waits for it).
func (j *journal) checkpoint(parts []*partition, wait bool) error {
	if j.broken != nil {
		return j.broken
	}
	files := make([]*os.File, 0, len(parts))
	for _, p := range parts {
		if f := p.log.activeFile(); f != nil {
			files = append(files, f)
		}
	}
	old := j.seq
	nj, err := newJournal(j.dir, j.seq+1)
	if err != nil {
		j.broken = err
		return err
	}
	j.f.Close()
	j.f, j.seq, j.size = nj.f, nj.seq, 0
	c := &checkpoint{done: make(chan struct{})}
	j.ckpt = c
	run := func() {
		defer close(c.done)
		c.err = syncFiles(files)
		if c.err != nil {
			return
		}
		// Oldest first: a crash meanwhile leaves journal files that
		// follow each other, their first one's records the oldest the
		// partitions' files may lack.
		seqs, err := journalFiles(j.dir)
		if err != nil {
			c.err = err
			return
		}
		for _, seq := range seqs {
			if seq > old {
				break
			}
			if err := os.Remove(filepath.Join(j.dir, journalName(seq))); err != nil {
				c.err = err
				return
			}
		}
		c.err = syncDir(j.dir)
	}
	if wait {
		run()
		j.ckpt, j.broken = nil, c.err
		return c.err
	}
	go run()
	return nil
}

// syncFiles syncs files in parallel; a file closed meanwhile (its
// segment rolled, which synced it) is not an error.
func syncFiles(files []*os.File) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// wait waits for a checkpoint in flight and returns the journal's error.
func (j *journal) wait() error {
	if c := j.ckpt; c != nil {
		<-c.done
		j.ckpt = nil
		if j.broken == nil {
			j.broken = c.err
		}
	}
	return j.broken
}

// close ends the journal at a clean stop: the partitions' files are
// synced and the journal files removed, so that the stream opens without
// a replay. On an error the journal stays for the next open.
func (j *journal) close(parts []*partition) error {
	err := j.wait()
	if err == nil {
		err = j.checkpoint(parts, true)
	}
	if err == nil {
		// The empty file the checkpoint started.
		err = os.Remove(filepath.Join(j.dir, journalName(j.seq)))
	}
	j.f.Close()
	return err
}
