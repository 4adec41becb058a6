// offsets.go: a stream's consumer groups' committed offsets on disk
// (issue 13, section 3), in <stream dir>/offsets: an append-only file of
// CRC-checked records, each the state of one (group, partition) at a
// commit, fsynced before the commit counts; the last record of a (group,
// partition) wins. At open a torn tail is cut and the file is rewritten
// with one record per live (group, partition); it is rewritten the same
// way when it grows to many times that.
//
// Record: len u32 | crc u32 (CRC-32C of the len bytes after it) | flags
// u8 | group (u8 length) | partition uvarint | committed uvarint | the
// number of skipped offsets uvarint | each skipped offset as its
// distance from the one before (from committed for the first) uvarint.
// Little-endian. The skipped offsets are those above the committed one
// that the group already processed (acked out of order): a group resumed
// after a restart passes over them, so that no offset whose ack was
// committed is read again.

package stream

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Record flags.
const (
	offAuto    = 1 // the group is a consumer's x-stream-automatic-offset-tracking
	offDeleted = 2 // the group was deleted: forget its records before this one
)

// offsetRec is one (group, partition)'s committed state.
type offsetRec struct {
	group     string
	auto      bool
	deleted   bool // the whole group is gone (part is ignored)
	part      int
	committed int64
	skip      []int64 // processed offsets above committed, ascending
}

// offsetStore is one stream's offsets file.
type offsetStore struct {
	// mu serialises commits: a commit takes it, snapshots the groups'
	// state (under the stream's lock) and writes and syncs it before the
	// next commit snapshots, so the file's order is the state's.
	mu     sync.Mutex
	path   string
	f      *os.File
	size   int64
	closed bool
	// loaded is what the file held at open: the live records.
	loaded []offsetRec
}

const (
	offsetsFile = "offsets"
	// compactAt: the file is rewritten once it is this many times the
	// size of its live records, and at least compactMin bytes.
	compactAt  = 8
	compactMin = 1 << 20
)

func openOffsets(dir string) (*offsetStore, error) {
	s := &offsetStore{path: filepath.Join(dir, offsetsFile)}
	b, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	live := map[string]map[int]offsetRec{}
	var order []string
	for len(b) > 0 {
		r, n, err := decodeOffsetRec(b)
		if err != nil {
			break // a torn tail: the commit it was never counted
		}
		b = b[n:]
		if r.deleted {
			delete(live, r.group)
			continue
		}
		m := live[r.group]
		if m == nil {
			m = map[int]offsetRec{}
			live[r.group] = m
			order = append(order, r.group)
		}
		m[r.part] = r
	}
	for _, g := range order {
		m, ok := live[g]
		if !ok {
			continue
		}
		parts := make([]int, 0, len(m))
		for p := range m {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			s.loaded = append(s.loaded, m[p])
		}
		delete(live, g) // a group deleted and created again is listed once
	}
	if err := s.rewrite(s.loaded); err != nil {
		return nil, err
	}
	return s, nil
}

func encodeOffsetRec(dst []byte, r *offsetRec) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var flags byte
	if r.auto {
		flags |= offAuto
	}
	if r.deleted {
		flags |= offDeleted
	}
	dst = append(dst, flags, byte(len(r.group)))
	dst = append(dst, r.group...)
	dst = binary.AppendUvarint(dst, uint64(r.part))
	dst = binary.AppendUvarint(dst, uint64(r.committed))
	dst = binary.AppendUvarint(dst, uint64(len(r.skip)))
	prev := r.committed
	for _, o := range r.skip {
		dst = binary.AppendUvarint(dst, uint64(o-prev))
		prev = o
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-8))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], crcTable))
	return dst
}

var errBadOffsetRec = errors.New("stream: bad offsets record")

func decodeOffsetRec(b []byte) (offsetRec, int, error) {
	var r offsetRec
	if len(b) < 8 {
		return r, 0, errBadOffsetRec
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < 2 || len(b)-8 < n {
		return r, 0, errBadOffsetRec
	}
	p := b[8 : 8+n]
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return r, 0, errBadOffsetRec
	}
	r.auto, r.deleted = p[0]&offAuto != 0, p[0]&offDeleted != 0
	gl := int(p[1])
	if 2+gl > n {
		return r, 0, errBadOffsetRec
	}
	r.group = string(p[2 : 2+gl])
	p = p[2+gl:]
	var vals [3]uint64
	for i := range vals {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return r, 0, errBadOffsetRec
		}
		vals[i], p = v, p[k:]
	}
	r.part, r.committed = int(vals[0]), int64(vals[1])
	prev := r.committed
	for range vals[2] {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return r, 0, errBadOffsetRec
		}
		prev += int64(v)
		r.skip = append(r.skip, prev)
		p = p[k:]
	}
	return r, 8 + n, nil
}

// rewrite replaces the file with recs: written to a new file, synced, and
// renamed over the old one. s.mu is held (or s unpublished).
func (s *offsetStore) rewrite(recs []offsetRec) error {
	var b []byte
	for i := range recs {
		b = encodeOffsetRec(b, &recs[i])
	}
	tmp := s.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		f.Close()
		return err
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		f.Close()
		return err
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.size = f, int64(len(b))
	return nil
}

// write appends recs and syncs them; all is every live record, for a
// rewrite when the file has grown to many times their size. s.mu is held.
func (s *offsetStore) write(recs []offsetRec, all func() []offsetRec) error {
	if s.closed || len(recs) == 0 {
		return nil
	}
	var b []byte
	for i := range recs {
		b = encodeOffsetRec(b, &recs[i])
	}
	if s.size+int64(len(b)) > compactMin {
		live := all()
		var n int64
		for i := range live {
			n += int64(len(encodeOffsetRec(nil, &live[i])))
		}
		if s.size+int64(len(b)) > compactAt*n {
			return s.rewrite(live)
		}
	}
	if _, err := s.f.Write(b); err != nil {
		return err
	}
	s.size += int64(len(b))
	return s.f.Sync()
}

// close closes the file; later writes do nothing.
func (s *offsetStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && s.f != nil {
		s.f.Close()
	}
	s.closed = true
}
