package raftstore

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
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// The log of every group of a node is one write-ahead log: a sequence of
// segment files <dir>/wal/<seq>.wal (seq in hex, rising), written
// front to back by the committer and never rewritten in place. A record:
//
//	u32 length of the body
//	u32 CRC-32C of the segment's seq (8 bytes, big-endian) and the body
//	body: kind (1 byte), group (8 bytes), payload
//
// A record whose length is zero or runs past the file, or whose checksum
// fails, ends a segment: that is the torn tail a crash leaves in the last
// one (a group commit is acknowledged only after its fdatasync, so what
// lies past the tail was never acknowledged). The checksum covers the
// seq, so a recycled file's old records fail it. A segment is closed by a
// seal record before the next is created, and a store opened after a crash
// seals its last segment at the tail it found and starts a new one: so
// every segment but the last ends in a seal, and one that does not is
// damage, reported at open.
//
// Segments are filled up to Options.SegmentBytes; the next one comes from
// a spare file made ahead of time, zero-filled (or an old segment of the
// same size, recycled), so that an fdatasync inside it updates no file
// size or extent map. Segments are removed from the oldest on once no
// group has a live entry in them (compaction, deleted groups); the
// oldest, when mostly dead, has its live entries copied to the head first.
const (
	recEntry  = 1 // a log entry: payload as encodeEntry
	recCommit = 2 // the group's commit index: u64
	recDelete = 3 // the group's entries min..max (u64, u64) are gone
	recDrop   = 4 // everything of the group is gone
	recSeal   = 5 // the end of the segment (group 0)

	recHeader = 8     // length, CRC
	recBody   = 1 + 8 // kind, group
	sealSize  = recHeader + recBody
)

// appendRecord appends a record with an empty CRC (the committer fills it
// in: it depends on the segment) and returns b.
func appendRecord(b []byte, kind byte, group uint64, payload ...[]byte) []byte {
	n := recBody
	for _, p := range payload {
		n += len(p)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, group)
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

// entryHeader: index, term, type, appended-at, data length.
const entryHeader = 8 + 8 + 1 + 8 + 4

// seqSeed is the CRC state after a segment's seq.
func seqSeed(seq uint64) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return crc32.Update(0, castagnoli, b[:])
}

// sealRecords fills in the CRC of every record in b (whole records) for
// segment seq.
func sealRecords(b []byte, seed uint32) {
	for len(b) >= recHeader {
		n := int(binary.BigEndian.Uint32(b))
		binary.BigEndian.PutUint32(b[4:], crc32.Update(seed, castagnoli, b[recHeader:recHeader+n]))
		b = b[recHeader+n:]
	}
}

// checkRecord verifies the record r (header and body) of segment seed
// and returns its body.
func checkRecord(r []byte, seed uint32) ([]byte, bool) {
	if len(r) < recHeader+recBody {
		return nil, false
	}
	n := int(binary.BigEndian.Uint32(r))
	if n < recBody || recHeader+n != len(r) {
		return nil, false
	}
	body := r[recHeader:]
	return body, crc32.Update(seed, castagnoli, body) == binary.BigEndian.Uint32(r[4:])
}

// decodeEntry decodes an entry record's payload (after kind and group).
func decodeEntry(group, idx uint64, p []byte, l *raft.Log) error {
	if len(p) < entryHeader+4 {
		return &CorruptError{group, idx, fmt.Sprintf("%d bytes, shorter than a header", len(p))}
	}
	l.Index = binary.BigEndian.Uint64(p)
	l.Term = binary.BigEndian.Uint64(p[8:])
	l.Type = raft.LogType(p[16])
	at := int64(binary.BigEndian.Uint64(p[17:]))
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	dn := int(binary.BigEndian.Uint32(p[25:]))
	if entryHeader+dn+4 > len(p) {
		return &CorruptError{group, idx, "data length past the end"}
	}
	l.Data = p[entryHeader : entryHeader+dn : entryHeader+dn]
	q := p[entryHeader+dn:]
	en := int(binary.BigEndian.Uint32(q))
	if 4+en != len(q) {
		return &CorruptError{group, idx, "extensions length does not match"}
	}
	l.Extensions = nil
	if en > 0 {
		l.Extensions = q[4 : 4+en : 4+en]
	}
	if l.Index != idx {
		return &CorruptError{group, idx, fmt.Sprintf("holds index %d", l.Index)}
	}
	return nil
}

// segment is one file of the log.
type segment struct {
	seq  uint64
	seed uint32
	f    *os.File
	size int64 // capacity: a record is written only below size-sealSize
	end  int64 // where the next record goes
	// prealloc: made from a spare (every byte written before): its
	// fdatasync updates no metadata.
	prealloc bool
	// live counts the entries of this segment some group still holds,
	// liveBytes their records' bytes.
	live, liveBytes int64
}

func segName(seq uint64) string { return fmt.Sprintf("%016x.wal", seq) }

const spareName = "spare"

// maxSpares is how many spare segments the log keeps: reclaimed segments
// are recycled into them, up to this many, so that the segments one
// compaction frees (raft compacts a group's log only at its snapshots,
// several segments at once under load) serve the next ones instead of
// being zero-filled again; what a zero-fill costs is the 64 MiB its
// sync pushes to the disk at once, which every other sync waits behind.
const maxSpares = 4

// spareSlot is the name of spare slot i: the spare maker's is spareName.
func spareSlot(i int) string {
	if i == 0 {
		return spareName
	}
	return fmt.Sprintf("%s.%d", spareName, i)
}

// listSegments returns the seqs of dir's segments, rising.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".wal")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// scanSegment reads seg's records from the start, calling fn with each
// valid one's offset, length and body, until a seal (sealed true), the
// end of the file or the first record that is not whole and valid (the
// tail). It sets seg.end past the last valid record.
func scanSegment(seg *segment, fn func(off int64, n int, body []byte) error) (sealed bool, err error) {
	if _, err := seg.f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	r := bufio.NewReaderSize(seg.f, 1<<20)
	var off int64
	var hdr [recHeader]byte
	buf := make([]byte, 0, 64<<10)
	for {
		seg.end = off
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return false, nil
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if n < recBody || off+int64(recHeader+n) > seg.size {
			return false, nil
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		body := buf[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return false, nil
		}
		if crc32.Update(seg.seed, castagnoli, body) != binary.BigEndian.Uint32(hdr[4:]) {
			return false, nil
		}
		if body[0] == recSeal {
			seg.end = off + int64(recHeader+n)
			return true, nil
		}
		if err := fn(off, recHeader+n, body); err != nil {
			return false, err
		}
		off += int64(recHeader + n)
	}
}

// makeSpare creates dir/name (a spare slot) of size bytes, zero-filled
// and synced, unless one is there; made says whether it wrote one.
func makeSpare(dir, name string, size int64, stop <-chan struct{}) (made bool, err error) {
	final := filepath.Join(dir, name)
	if fi, err := os.Stat(final); err == nil {
		if fi.Size() == size {
			return false, nil
		}
		os.Remove(final) // made for another segment size
	}
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return false, err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		select {
		case <-stop:
			f.Close()
			os.Remove(tmp)
			return false, errors.New("stopped")
		default:
		}
		w := zero
		if size-off < int64(len(w)) {
			w = w[:size-off]
		}
		if _, err := f.WriteAt(w, off); err != nil {
			f.Close()
			os.Remove(tmp)
			return false, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return false, err
	}
	f.Close()
	if err := os.Rename(tmp, final); err != nil {
		return false, err
	}
	return true, syncDir(dir)
}

// writev writes bufs at off of f, all of them.
func writev(f *os.File, bufs [][]byte, off int64) error {
	fd := int(f.Fd())
	for len(bufs) > 0 {
		chunk := bufs
		if len(chunk) > 512 {
			chunk = chunk[:512]
		}
		n, err := unix.Pwritev(fd, chunk, off)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		off += int64(n)
		// Drop what was written, keeping a partly written buffer's rest.
		for n > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][n:]
			n = 0
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
