package classic

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warrenmq/warren/queue"
)

// spillLog is a non-durable queue's overflow on disk: messages past the
// queue's in-memory window, appended in order to segment files and read
// back in the same order, each segment removed once read. Nothing is
// fsynced and nothing survives a restart (the broker empties the spill
// directory at start): the messages are transient, the file only keeps
// them out of memory. It is a fraction of the cost of the store's write
// path (no index, no log-structured merge, no msync).
//
// Guarded by its queue's lock, like the backlog that owns it.
type spillLog struct {
	dir    string
	segMax int64

	w      *os.File
	bw     *bufio.Writer
	wSeg   int
	wBytes int64

	r    *os.File
	br   *bufio.Reader
	rSeg int
	// unflushed: records appended since the last flush; a read of the
	// segment being written flushes first.
	unflushed bool
}

// spillSegmentBytes is the size at which a spill segment is closed and the
// next one started; read segments are deleted whole.
const spillSegmentBytes = 16 << 20

func newSpillLog(dir string) *spillLog {
	return &spillLog{dir: dir, segMax: spillSegmentBytes, rSeg: 1}
}

func (s *spillLog) segPath(n int) string { return filepath.Join(s.dir, fmt.Sprintf("%08d.spill", n)) }

// append writes e at the end of the log.
func (s *spillLog) append(e queue.Entry) error {
	if s.w == nil || s.wBytes >= s.segMax {
		if err := s.nextWriteSegment(); err != nil {
			return err
		}
	}
	m := e.Msg
	var hdr [8 + 8 + 1 + 1 + 1 + 4 + 4]byte
	binary.BigEndian.PutUint64(hdr[0:], e.Seq)
	binary.BigEndian.PutUint64(hdr[8:], uint64(e.Expires))
	if e.Redelivered {
		hdr[16] = 1
	}
	hdr[17] = byte(len(m.Exchange))
	hdr[18] = byte(len(m.RoutingKey))
	binary.BigEndian.PutUint32(hdr[19:], uint32(len(m.Props)))
	binary.BigEndian.PutUint32(hdr[23:], uint32(len(m.Body)))
	s.bw.Write(hdr[:])
	s.bw.WriteString(m.Exchange)
	s.bw.WriteString(m.RoutingKey)
	s.bw.Write(m.Props)
	if _, err := s.bw.Write(m.Body); err != nil {
		return err
	}
	s.wBytes += int64(len(hdr) + len(m.Exchange) + len(m.RoutingKey) + len(m.Props) + len(m.Body))
	s.unflushed = true
	return nil
}

func (s *spillLog) nextWriteSegment() error {
	if s.w != nil {
		if err := s.bw.Flush(); err != nil {
			return err
		}
		if err := s.w.Close(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	s.wSeg++
	f, err := os.OpenFile(s.segPath(s.wSeg), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	s.w, s.wBytes, s.unflushed = f, 0, false
	if s.bw == nil {
		s.bw = bufio.NewWriterSize(f, 64<<10)
	} else {
		s.bw.Reset(f)
	}
	return nil
}

// next reads the oldest entry left in the log.
func (s *spillLog) next() (queue.Entry, error) {
	for {
		if s.r == nil {
			if s.rSeg > s.wSeg {
				return queue.Entry{}, io.EOF
			}
			f, err := os.Open(s.segPath(s.rSeg))
			if err != nil {
				return queue.Entry{}, err
			}
			s.r = f
			if s.br == nil {
				s.br = bufio.NewReaderSize(f, 64<<10)
			} else {
				s.br.Reset(f)
			}
		}
		if s.rSeg == s.wSeg && s.unflushed {
			if err := s.bw.Flush(); err != nil {
				return queue.Entry{}, err
			}
			s.unflushed = false
		}
		e, err := s.readEntry()
		if err == nil {
			return e, nil
		}
		if !errors.Is(err, io.EOF) || s.rSeg == s.wSeg {
			return queue.Entry{}, err
		}
		// A finished segment: drop it and go on with the next.
		s.r.Close()
		os.Remove(s.segPath(s.rSeg))
		s.r = nil
		s.rSeg++
	}
}

func (s *spillLog) readEntry() (queue.Entry, error) {
	var hdr [27]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return queue.Entry{}, fmt.Errorf("spill segment %d is truncated", s.rSeg)
		}
		return queue.Entry{}, err
	}
	xl, kl := int(hdr[17]), int(hdr[18])
	pl, bl := int(binary.BigEndian.Uint32(hdr[19:])), int(binary.BigEndian.Uint32(hdr[23:]))
	buf := make([]byte, xl+kl+pl+bl)
	if _, err := io.ReadFull(s.br, buf); err != nil {
		return queue.Entry{}, fmt.Errorf("spill segment %d is truncated: %w", s.rSeg, err)
	}
	props := buf[xl+kl : xl+kl+pl : xl+kl+pl]
	m := queue.NewStored(string(buf[:xl]), string(buf[xl:xl+kl]), props, buf[xl+kl+pl:], 0)
	return queue.Entry{
		Seq: binary.BigEndian.Uint64(hdr[0:]), Msg: m, Redelivered: hdr[16] == 1,
		Expires: int64(binary.BigEndian.Uint64(hdr[8:])),
	}, nil
}

// remove closes the log and deletes its files.
func (s *spillLog) remove() error {
	if s.w != nil {
		s.w.Close()
		s.w = nil
	}
	if s.r != nil {
		s.r.Close()
		s.r = nil
	}
	s.wSeg, s.rSeg, s.wBytes, s.unflushed = 0, 1, 0, false
	return os.RemoveAll(s.dir)
}
