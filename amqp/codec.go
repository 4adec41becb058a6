package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Reply codes used for malformed input, checked against RabbitMQ 4 with
// rabbitmq_probe_test.go:
//
//   - arguments that do not parse (truncated, trailing bytes, a length
//     overrunning the payload): RabbitMQ closes with 501 FRAME_ERROR
//     "cannot decode <<...>>" and the method's class and method ids. We do
//     the same, and also use 501 where RabbitMQ's reader crashes and drops
//     the socket without a close (an unknown field-table tag inside method
//     arguments).
//   - unknown class or method ids: RabbitMQ's reader crashes
//     ({unknown_method_id,{C,M}}) and drops the socket without a close. We
//     answer 503 COMMAND_INVALID with the ids, which a client can act on.
//   - a method payload shorter than 4 bytes: RabbitMQ 501 "unknown_frame".
const (
	codeMalformedArgs = FrameError
	codeUnknownMethod = CommandInvalid
	codeBadFieldType  = FrameError
)

// errShort is the sentinel a decoder records when input ends early.
type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

var (
	errTruncated = &decodeError{"truncated arguments"}
	errTrailing  = &decodeError{"trailing bytes after arguments"}
)

// decoder reads big-endian AMQP primitives from b. The first failure is kept
// in err; later reads return zero values, so generated code checks once.
//
// Strings are copied out of b, but not one by one: the strings of a run of
// fields that no table interrupts share one Go string (the arena), copied
// from the first string's bytes to the last one's, so basic.publish costs
// one string allocation instead of two. A string is stored into its field
// only when its run ends (a table, or finish): until then the decoder does
// not know how far the arena reaches. The arena never spans a table, whose
// bytes would otherwise stay alive for as long as any of the strings does
// (a queue name kept the whole arguments table of its queue.declare).
type decoder struct {
	all  []byte // the arguments, as given
	b    []byte // what is left to read
	err  error
	strs [8]pendingStr
	ns   int
}

// pendingStr is a string read but not yet stored: all[off:off+n] goes to
// *dst.
type pendingStr struct {
	dst    *string
	off, n int
}

func newDecoder(b []byte) decoder { return decoder{all: b, b: b} }

// str records that b[:n] is the string for *dst.
func (d *decoder) str(dst *string, n int) {
	if n == 0 {
		*dst = ""
		return
	}
	if d.ns == len(d.strs) {
		d.storeStrs()
	}
	d.strs[d.ns] = pendingStr{dst: dst, off: len(d.all) - len(d.b), n: n}
	d.ns++
}

// storeStrs ends the current run of strings: one arena for all of them.
func (d *decoder) storeStrs() {
	if d.ns == 0 {
		return
	}
	lo := d.strs[0].off
	last := d.strs[d.ns-1]
	arena := string(d.all[lo : last.off+last.n])
	for _, p := range d.strs[:d.ns] {
		*p.dst = arena[p.off-lo : p.off-lo+p.n]
	}
	d.ns = 0
}

// validShortstr reports whether s, a short string of a method's arguments,
// is valid UTF-8. RabbitMQ 3.10 checks the structure only, and so takes
// surrogates (U+D800..U+DFFF) and four-byte sequences above U+10FFFF in a
// queue or exchange name; but such a name cannot survive a definitions
// export (JSON has no way to carry it, and RabbitMQ's own export crashes on
// it), so Warren refuses it as RabbitMQ refuses a malformed one: 501
// FRAME_ERROR.
func validShortstr(s string) bool { return utf8.ValidString(s) }

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.fail(errTruncated)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u16() uint16 {
	if len(d.b) < 2 {
		d.fail(errTruncated)
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.fail(errTruncated)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail(errTruncated)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) shortstr(dst *string) {
	n := int(d.u8())
	if d.err != nil {
		return
	}
	if len(d.b) < n {
		d.fail(errTruncated)
		return
	}
	d.str(dst, n)
	d.b = d.b[n:]
}

func (d *decoder) longstr(dst *string) {
	n := d.u32()
	if d.err != nil {
		return
	}
	if uint64(len(d.b)) < uint64(n) {
		d.fail(errTruncated)
		return
	}
	d.str(dst, int(n))
	d.b = d.b[n:]
}

func (d *decoder) table() Table {
	if d.err != nil {
		return nil
	}
	d.storeStrs() // a table ends a run of strings
	t, n, err := decodeTable(d.b)
	if err != nil {
		d.fail(err)
		return nil
	}
	d.b = d.b[n:]
	return t
}

// finish stores the strings still pending and reports the first error, or
// an error if bytes remain unread.
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	d.storeStrs()
	if len(d.b) != 0 {
		return errTrailing
	}
	return nil
}

func noArgs(b []byte) error {
	if len(b) != 0 {
		return errTrailing
	}
	return nil
}

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

func appendTimestamp(dst []byte, t time.Time) []byte { return appendU64(dst, timeToWire(t)) }

func appendShortstr(dst []byte, s string) ([]byte, error) {
	if len(s) > math.MaxUint8 {
		return dst, fmt.Errorf("shortstr of %d bytes: %w", len(s), ErrStringTooLong)
	}
	dst = append(dst, uint8(len(s)))
	return append(dst, s...), nil
}

func appendLongstr(dst []byte, s string) ([]byte, error) {
	if uint64(len(s)) > math.MaxUint32 {
		return dst, fmt.Errorf("longstr of %d bytes: %w", len(s), ErrStringTooLong)
	}
	dst = appendU32(dst, uint32(len(s)))
	return append(dst, s...), nil
}

// timeFromWire converts AMQP's 64-bit POSIX seconds to UTC time.
func timeFromWire(sec uint64) time.Time { return time.Unix(int64(sec), 0).UTC() }

// timeToWire converts t to POSIX seconds; the zero time and times before
// 1970 encode as 0.
func timeToWire(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint64(s)
}
