package persist

import (
	"bytes"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
	"google.golang.org/protobuf/proto"
)

// DamagedFile is one file of the Badger store that fails its check.
type DamagedFile struct {
	Name   string // base name: 000012.sst, MANIFEST, 000003.vlog
	Reason string // what is wrong with it
}

// DamagedStoreError is returned by Open when files of the Badger store are
// damaged (or missing) and Options.RepairStore is not set, or cannot open
// the store anyway; it names each file and what is wrong with it.
type DamagedStoreError struct {
	Dir   string
	Files []DamagedFile
	// Repairable is whether Options.RepairStore can open the store
	// anyway (it cannot rebuild a MANIFEST damaged before its end).
	Repairable bool
}

func (e *DamagedStoreError) Error() string {
	var b strings.Builder
	b.WriteString("persist: ")
	tables, vlogs := 0, 0
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("; ")
		}
		kind := "badger table"
		switch {
		case f.Name == badger.ManifestFilename:
			kind = "badger"
			tables++ // a cut one: its tables are set aside
		case strings.HasSuffix(f.Name, ".vlog"):
			kind = "badger value log"
			vlogs++
		default:
			tables++
		}
		fmt.Fprintf(&b, "%s %s %s", kind, f.Name, f.Reason)
	}
	if !e.Repairable {
		b.WriteString("; restore the data directory from a backup (the message log cannot rebuild the store)")
		return b.String()
	}
	b.WriteString("; start with --repair-store to ")
	if tables > 0 {
		b.WriteString("move the damaged tables to a damaged-<time> folder in the data directory and open the rest " +
			"(the messages, queue entries and definitions they hold are lost)")
	}
	if vlogs > 0 {
		if tables > 0 {
			b.WriteString(" and to ")
		}
		b.WriteString("keep the value log's intact message bodies and drop the messages whose bodies are damaged")
	}
	b.WriteString(", or restore the data directory from a backup")
	return b.String()
}

// storeTables is what checkTables found: the tables Badger's MANIFEST lists
// (with their compression, which the MANIFEST keeps per table) and which
// of them are damaged or missing.
type storeTables struct {
	listed  map[uint64]badger.TableManifest
	damaged []DamagedFile
	ids     []uint64 // the damaged or missing tables the MANIFEST lists
	// cut: the tables only the MANIFEST's damaged tail lists (see
	// checkTables), which Badger's open would delete.
	cut []uint64
}

// checkTables reads Badger's MANIFEST in dir and checks every table it
// lists, every block against its checksum, before Badger opens: Badger
// opens tables in goroutines of its own, where a panic of its check (4.9
// dereferences nil while it words a block it cannot decode) kills the
// process, and at run time it drops block errors, so damage would read as
// missing messages. Each table is opened read-only through Badger's own
// table package and closed again, never released (DecrRef at zero deletes
// the file). A store without a MANIFEST (a new one) has nothing to check.
//
// An error is returned only for what is not damage (an I/O error); a
// MANIFEST that cannot be read is reported as damaged. The caller holds
// the directory's lock (lockDir).
func checkTables(dir string, bo badger.Options) (storeTables, error) {
	var st storeTables
	path := filepath.Join(dir, badger.ManifestFilename)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	defer f.Close()
	m, end, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		st.damaged = append(st.damaged, DamagedFile{Name: badger.ManifestFilename, Reason: "cannot be read: " + err.Error()})
		return st, nil
	}
	st.listed = m.Tables
	// Badger's replay stops at a change set it cannot read whole and
	// takes the rest for a write torn by a crash: its open cuts it off
	// and deletes every table the MANIFEST then does not list. A damaged
	// length field reads that way too, and the tables it deletes are then
	// ones that hold data. A torn append lists at most the tables of one
	// flush or compaction, which the store has not used yet: tables not
	// listed are damage only when the MANIFEST is cut too, and then they
	// are reported rather than deleted.
	if fi, err := f.Stat(); err == nil && end < fi.Size() {
		ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
		var names []string
		for _, p := range ssts {
			if id, ok := table.ParseFileID(p); ok {
				if _, listed := m.Tables[id]; !listed {
					st.cut = append(st.cut, id)
					names = append(names, filepath.Base(p))
				}
			}
		}
		if len(st.cut) > 0 {
			slices.Sort(names)
			st.damaged = append(st.damaged, DamagedFile{Name: badger.ManifestFilename, Reason: fmt.Sprintf(
				"is damaged: its last %d bytes do not read as a change set, and Badger's open would cut them off and delete the tables they list (%s)",
				fi.Size()-end, strings.Join(names, ", "))})
		}
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tm := m.Tables[id]
		if tm.KeyID != 0 {
			continue // encrypted: the store never encrypts, Badger checks it
		}
		reason, err := checkTable(table.NewFilename(id, dir), tm, bo)
		if err != nil {
			return st, err
		}
		if reason != "" {
			st.damaged = append(st.damaged, DamagedFile{Name: table.IDToFilename(id), Reason: reason})
			st.ids = append(st.ids, id)
		}
	}
	return st, nil
}

// checkTable checks one table file and says what is wrong with it, or "";
// err is for a file that cannot be opened at all (not damage: it would
// not be set aside).
func checkTable(path string, tm badger.TableManifest, bo badger.Options) (reason string, err error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "is listed in the MANIFEST but missing", nil
	}
	if err != nil {
		return "", err
	}
	if st.Size() == 0 {
		return "is empty", nil
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer mf.Close(-1) // unmap and close; -1: never truncate
	topt := table.Options{
		ReadOnly:    true,
		BlockSize:   bo.BlockSize,
		Compression: tm.Compression,
		// OpenTable checks no block itself then (VerifyChecksum below
		// does), and it closes mf only when the file's Stat fails or its
		// name is not a table's, which cannot be here.
		ChkMode:              options.NoVerification,
		ZSTDCompressionLevel: bo.ZSTDCompressionLevel,
		BloomFalsePositive:   bo.BloomFalsePositive,
		TableSize:            uint64(bo.BaseTableSize),
	}
	decoding := "an index"
	defer func() {
		// Badger panics on a table it cannot decode: its index (a re-panic
		// with a dump), or a block whose error it words through a nil
		// block (4.9).
		if r := recover(); r != nil {
			reason, err = "is damaged: it has "+decoding+" that cannot be decoded", nil
		}
	}()
	t, err := table.OpenTable(mf, topt)
	if err != nil {
		return "is damaged: its index cannot be read: " + err.Error(), nil
	}
	decoding = "a block"
	if err := t.VerifyChecksum(); err != nil {
		return tableBlockReason(err), nil
	}
	return "", nil
}

var badgerBlockRe = regexp.MustCompile(`block: (\d+), offset:(\d+)`)

// tableBlockReason words a failed table check: which block, at which
// offset, fails its checksum.
func tableBlockReason(err error) string {
	if m := badgerBlockRe.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("is damaged: block %s (at byte %s) fails its checksum", m[1], m[2])
	}
	return "is damaged: " + err.Error()
}

// setAside moves the damaged tables of st (and those only a damaged tail
// of the MANIFEST lists) out of dir into a new damaged-<time> folder in
// dir, with a copy of the MANIFEST as it was, and then removes them from
// Badger's MANIFEST, so that Badger opens what remains. The files are moved first: Badger deletes a table file its
// MANIFEST does not list, and an interrupted repair is simply done again
// (a listed table that is missing is set aside by removing it from the
// MANIFEST). It returns the folder.
//
// Badger has no call that drops a table from its MANIFEST (its own
// compactions write deletions through an unexported method), so the
// deletions are appended as Badger appends them: one ManifestChangeSet of
// its own protobuf type, framed by its length and CRC-32C, after the last
// whole change set Badger's own ReplayManifestFile reads. The result is
// read back through ReplayManifestFile before the open goes on.
func setAside(dir string, st storeTables, bo badger.Options, now time.Time) (string, error) {
	aside := filepath.Join(dir, "damaged-"+now.UTC().Format("20060102T150405.000Z"))
	if err := os.Mkdir(aside, 0o755); err != nil {
		return "", err
	}
	manifest := filepath.Join(dir, badger.ManifestFilename)
	if err := copyFile(manifest, filepath.Join(aside, badger.ManifestFilename)); err != nil {
		return aside, fmt.Errorf("copy the MANIFEST to %s: %w", aside, err)
	}
	for _, id := range slices.Concat(st.ids, st.cut) {
		name := table.IDToFilename(id)
		err := os.Rename(filepath.Join(dir, name), filepath.Join(aside, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return aside, fmt.Errorf("move %s to %s: %w", name, aside, err)
		}
	}
	if err := syncDirs(aside, dir); err != nil {
		return aside, err
	}
	if len(st.ids) == 0 {
		return aside, nil // a cut MANIFEST: Badger's open cuts it
	}
	changes := make([]*pb.ManifestChange, 0, len(st.ids))
	for _, id := range st.ids {
		changes = append(changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_DELETE})
	}
	if err := appendManifest(manifest, changes, bo); err != nil {
		return aside, fmt.Errorf("remove the damaged tables from the MANIFEST: %w", err)
	}
	f, err := os.Open(manifest)
	if err != nil {
		return aside, err
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		return aside, fmt.Errorf("the MANIFEST does not read back: %w", err)
	}
	for _, id := range st.ids {
		if _, ok := m.Tables[id]; ok {
			return aside, fmt.Errorf("the MANIFEST still lists table %d", id)
		}
	}
	return aside, nil
}

// appendManifest appends one change set to the MANIFEST at path, as
// Badger's manifestFile.addChanges does, after cutting off a torn change
// set at its end (as Badger's open would), and syncs it.
func appendManifest(path string, changes []*pb.ManifestChange, bo badger.Options) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, end, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		return err
	}
	buf, err := proto.Marshal(&pb.ManifestChangeSet{Changes: changes})
	if err != nil {
		return err
	}
	rec := make([]byte, 8, 8+len(buf))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(buf)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(buf, y.CastagnoliCrcTable))
	rec = append(rec, buf...)
	if err := f.Truncate(end); err != nil {
		return err
	}
	if _, err := f.WriteAt(rec, end); err != nil {
		return err
	}
	return f.Sync()
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func syncDirs(dirs ...string) error {
	for _, d := range dirs {
		f, err := os.Open(d)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// errValueDamaged wraps the error for a value Badger cannot read from its
// value log.
var errValueDamaged = errors.New("persist: damaged value")

// valueFaults keeps what Badger logged about the values it could not read:
// Badger's Item.Value does not return such an error (a value that fails its
// checksum, or lies past the end of its file); it logs it, with the key,
// and yields an empty value. The store's values in the value log are never
// empty, so an empty one is the fault, and its log line names the file.
type valueFaults struct {
	mu    sync.Mutex
	byKey map[string]error // key -> Badger's read error
}

// note takes Badger's log line for a failed value read, if f is one.
func (vf *valueFaults) note(f string, a []any) {
	if !strings.HasPrefix(f, "Unable to read: Key:") || len(a) == 0 {
		return
	}
	key, ok := a[0].([]byte)
	err, eok := a[len(a)-1].(error)
	if !ok || !eok {
		return
	}
	vf.mu.Lock()
	defer vf.mu.Unlock()
	if vf.byKey == nil || len(vf.byKey) >= 1024 {
		vf.byKey = map[string]error{}
	}
	vf.byKey[string(key)] = err
}

var (
	badgerVPRe     = regexp.MustCompile(`Fid:(\d+) Len:(\d+) Offset:(\d+)`)
	badgerNoFileRe = regexp.MustCompile(`file with ID: (\d+) not found`)
)

// fault is the error for key, whose value Badger yielded empty: it names
// the value-log file and what is wrong, from what Badger logged.
func (vf *valueFaults) fault(key []byte) error {
	vf.mu.Lock()
	berr := vf.byKey[string(key)]
	delete(vf.byKey, string(key))
	vf.mu.Unlock()
	if berr == nil {
		return fmt.Errorf("%w: a value in Badger's value log cannot be read", errValueDamaged)
	}
	msg := berr.Error()
	if m := badgerNoFileRe.FindStringSubmatch(msg); m != nil {
		fid, _ := strconv.ParseUint(m[1], 10, 32)
		return fmt.Errorf("%w: badger value log %06d.vlog is missing (a value points into it)", errValueDamaged, fid)
	}
	m := badgerVPRe.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%w: a value in Badger's value log cannot be read: %v", errValueDamaged, berr)
	}
	fid, _ := strconv.ParseUint(m[1], 10, 32)
	what := "cannot be read: " + msg
	switch {
	case strings.Contains(msg, "checksum mismatch"):
		what = "fails its checksum"
	case strings.Contains(msg, "EOF"):
		what = "lies past the end of the file"
	}
	return fmt.Errorf("%w: badger value log %06d.vlog is damaged: the value at byte %s (%s bytes) %s", errValueDamaged, fid, m[3], m[2], what)
}

// checkNewestVlog checks the newest value-log file in dir before Badger
// opens. Badger reads that file at open to find where its writes ended and
// cuts it at the first entry that fails its checksum, silently, and with
// it every value after that entry: it takes damage for a write torn by a
// crash. A torn write is the end of the file (nothing valid follows it; a
// kill leaves zeros after it), so an invalid entry with a valid one after
// it is damage, reported before Badger cuts anything. It returns nil when
// all is well, else the damaged file and its fid.
func checkNewestVlog(dir string) (*DamagedFile, uint32, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil || len(paths) == 0 {
		return nil, 0, err
	}
	var newest string
	var fid uint64
	for _, p := range paths {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(p), ".vlog"), 10, 32)
		if err == nil && (newest == "" || n > fid) {
			newest, fid = p, n
		}
	}
	if newest == "" {
		return nil, 0, nil
	}
	f, err := os.Open(newest)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	// Only the bytes up to the last one that is not zero are mapped: a
	// file a kill left is mapped at twice its size by Badger, the rest a
	// hole, and on tmpfs a read of a hole through a mapping allocates a
	// page (SIGBUS on a full one), where read(2) does not.
	size, err := dataEnd(f)
	if err != nil || size < vlogHeaderSize {
		return nil, 0, err // Badger bootstraps a short one
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, 0, err
	}
	defer syscall.Munmap(b)
	if binary.BigEndian.Uint64(b[:8]) != 0 {
		return nil, 0, nil // encrypted: not the store's
	}
	off := vlogHeaderSize
	for {
		n := vlogEntryAt(b, off)
		if n == 0 {
			break
		}
		off += n
	}
	for p := off + 1; p < len(b); p++ {
		if vlogEntryAt(b, p) > 0 {
			return &DamagedFile{Name: filepath.Base(newest), Reason: fmt.Sprintf(
				"is damaged: the entry at byte %d fails its checksum and intact entries follow it (Badger's open would cut the file there, losing them)", off)}, uint32(fid), nil
		}
	}
	return nil, 0, nil
}

// dataEnd is the offset past the last byte of f that is not zero, read
// with read(2) a MiB at a time.
func dataEnd(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var end int64
	for p := int64(0); p < st.Size(); {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-p)], p)
		if i := lastNonZero(buf[:n]); i >= 0 {
			end = p + int64(i) + 1
		}
		p += int64(n)
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return end, nil
}

// zeroPage is a page of zeros, for lastNonZero.
var zeroPage [4096]byte

// lastNonZero is the index of b's last byte that is not zero, -1 none.
// A page of zeros is passed over whole (bytes.Equal: no loop per byte,
// which matters under the race detector).
func lastNonZero(b []byte) int {
	for len(b) > 0 {
		k := max(len(b)-len(zeroPage), 0)
		if page := b[k:]; !bytes.Equal(page, zeroPage[:len(page)]) {
			for i := len(page) - 1; i >= 0; i-- {
				if page[i] != 0 {
					return k + i
				}
			}
		}
		b = b[:k]
	}
	return -1
}

const vlogHeaderSize = 20 // Badger's value-log file header: key id, IV

// vlogEntryAt is the length of the value-log entry at off of b (header,
// key, value, CRC-32C of them), or 0 when none that is intact starts
// there. Only entries the store writes are taken: no user meta, a key of
// at most 1 KiB with its 8-byte version, meta bits Badger writes to the
// value log; this keeps a scan over damaged bytes cheap.
func vlogEntryAt(b []byte, off int) int {
	if off+5 > len(b) {
		return 0
	}
	meta, userMeta := b[off], b[off+1]
	if userMeta != 0 || meta&^(1|4|8|64|128) != 0 {
		return 0
	}
	p := off + 2
	klen, n := binary.Uvarint(b[p:])
	if n <= 0 || klen < 8 || klen > 1<<10 {
		return 0
	}
	p += n
	vlen, n := binary.Uvarint(b[p:])
	if n <= 0 || vlen > uint64(len(b)) {
		return 0
	}
	p += n
	if _, n = binary.Uvarint(b[p:]); n <= 0 {
		return 0
	}
	p += n
	end := p + int(klen) + int(vlen)
	if end+4 > len(b) {
		return 0
	}
	if crc32.Checksum(b[off:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(b[end:]) {
		return 0
	}
	return end + 4 - off
}

// newVlogFile writes an empty value-log file (its header only) with fid,
// so that Badger's open looks for the end of its writes in that one and
// leaves the damaged file before it whole: only the values that are
// damaged are lost, each found when read. Badger deletes the empty file at
// a later open.
func newVlogFile(dir string, fid uint32) error {
	hdr := make([]byte, vlogHeaderSize) // key id 0: not encrypted
	if _, err := cryptorand.Read(hdr[8:]); err != nil {
		return err
	}
	path := filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDirs(dir)
}

// lockDir takes the lock Badger takes on dir while it is open (flock on the
// directory), so that nothing moves tables under checkTables and setAside;
// the caller releases it (closes the file) before badger.Open takes it
// again. ok is false when another process holds it: badger.Open then says
// the store is in use.
func lockDir(dir string) (f *os.File, ok bool) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, false
	}
	if syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		d.Close()
		return nil, false
	}
	return d, true
}
