package amqp

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Property flag bits of the basic class, in wire order from bit 15 down.
const (
	FlagContentType     = 0x8000
	FlagContentEncoding = 0x4000
	FlagHeaders         = 0x2000
	FlagDeliveryMode    = 0x1000
	FlagPriority        = 0x0800
	FlagCorrelationID   = 0x0400
	FlagReplyTo         = 0x0200
	FlagExpiration      = 0x0100
	FlagMessageID       = 0x0080
	FlagTimestamp       = 0x0040
	FlagType            = 0x0020
	FlagUserID          = 0x0010
	FlagAppID           = 0x0008
	FlagClusterID       = 0x0004

	flagContinuation = 0x0001
	flagsKnown       = 0xfffc
)

// ContentHeader is a decoded content header frame payload.
type ContentHeader struct {
	ClassID  uint16
	Weight   uint16
	BodySize uint64
	RawProps []byte // property flags + property list; aliases the payload
	// Props indexes RawProps (and any copy of it).
	Props PropIndex
}

// DecodeContentHeader decodes a header frame payload, checks that the
// property flags and list, including the headers table, are well formed
// and indexes them (without building Properties or allocating), so that
// DecodeProperties, the Prop* accessors and Props cannot fail on RawProps
// later.
// Errors are *Error with code FrameError; RawProps aliases payload.
func DecodeContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < 14 {
		return ContentHeader{}, Errorf(FrameError, 0, 0, "content header of %d bytes is too short", len(payload))
	}
	h := ContentHeader{
		ClassID:  binary.BigEndian.Uint16(payload),
		Weight:   binary.BigEndian.Uint16(payload[2:]),
		BodySize: binary.BigEndian.Uint64(payload[4:]),
		RawProps: payload[12:],
	}
	x, err := indexProps(h.RawProps)
	if err != nil {
		return ContentHeader{}, propsError(h.ClassID, err)
	}
	h.Props = x
	return h, nil
}

func propsError(classID uint16, err error) *Error {
	e := Errorf(FrameError, classID, 0, "malformed content properties: %v", err)
	e.Cause = err
	return e
}

// Properties are the basic class content properties. Flags records which are
// present; Append writes a property when its flag is set or its value is
// non-zero, so either way of building Properties works.
type Properties struct {
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string
	MessageID       string
	Timestamp       time.Time
	Type            string
	UserID          string
	AppID           string
	ClusterID       string
	Flags           uint16
}

var (
	errPropsTruncated = &decodeError{"property list truncated"}
	errPropsFlags     = &decodeError{"property flags have the continuation bit set"}
	errPropsTrailing  = &decodeError{"trailing bytes after property list"}
)

// propsFlags parses the flag word(s) and returns the flags and the offset of
// the property list. The basic class has 14 properties, so a continuation
// bit is an error (RabbitMQ fails on it too); bit 1 is ignored, as RabbitMQ
// ignores it.
func propsFlags(raw []byte) (uint16, int, error) {
	if len(raw) < 2 {
		return 0, 0, errPropsTruncated
	}
	flags := binary.BigEndian.Uint16(raw)
	if flags&flagContinuation != 0 {
		return 0, 0, errPropsFlags
	}
	return flags & flagsKnown, 2, nil
}

// walkProps checks the property list; if visit is non-nil it is called with
// each present property's flag and its encoded value (after the length
// prefix for strings, the whole table including the prefix for headers).
// Without visit, the headers table is validated in place (no allocation),
// so a list accepted here always decodes.
func walkProps(raw []byte, visit func(flag uint16, v []byte) error) error {
	flags, off, err := propsFlags(raw)
	if err != nil {
		return err
	}
	b := raw[off:]
	for bit := uint16(0x8000); bit > flagContinuation<<1; bit >>= 1 {
		if flags&bit == 0 {
			continue
		}
		n, ok := propSize(bit, b)
		if !ok {
			return errPropsTruncated
		}
		v := b[:n]
		if isShortstr(bit) {
			v = v[1:]
		}
		b = b[n:]
		if bit == FlagHeaders && visit == nil {
			if err := validateTableBody(v[4:], 0); err != nil {
				return err
			}
		}
		if visit != nil {
			if err := visit(bit, v); err != nil {
				return err
			}
		}
	}
	if len(b) != 0 {
		return errPropsTrailing
	}
	return nil
}

// DecodeProperties decodes a property flags + list (ContentHeader.RawProps).
// Errors are *Error with code FrameError. (RabbitMQ decodes properties lazily
// and, on malformed ones, crashes the channel and closes the connection with
// 541 INTERNAL_ERROR; we report the more useful 501.)
func DecodeProperties(raw []byte) (Properties, error) {
	var p Properties
	err := walkProps(raw, func(bit uint16, v []byte) error {
		p.Flags |= bit
		switch bit {
		case FlagContentType:
			p.ContentType = string(v)
		case FlagContentEncoding:
			p.ContentEncoding = string(v)
		case FlagHeaders:
			t, _, err := decodeTable(v)
			if err != nil {
				return err
			}
			p.Headers = t
		case FlagDeliveryMode:
			p.DeliveryMode = v[0]
		case FlagPriority:
			p.Priority = v[0]
		case FlagCorrelationID:
			p.CorrelationID = string(v)
		case FlagReplyTo:
			p.ReplyTo = string(v)
		case FlagExpiration:
			p.Expiration = string(v)
		case FlagMessageID:
			p.MessageID = string(v)
		case FlagTimestamp:
			p.Timestamp = timeFromWire(binary.BigEndian.Uint64(v))
		case FlagType:
			p.Type = string(v)
		case FlagUserID:
			p.UserID = string(v)
		case FlagAppID:
			p.AppID = string(v)
		case FlagClusterID:
			p.ClusterID = string(v)
		}
		return nil
	})
	if err != nil {
		e := propsError(ClassBasic, err)
		if _, ok := err.(*badTagError); ok {
			e.Code = codeBadFieldType
		}
		return Properties{}, e
	}
	return p, nil
}

// present returns the flags Append will write.
func (p *Properties) present() uint16 {
	f := p.Flags & flagsKnown
	set := func(bit uint16, ok bool) {
		if ok {
			f |= bit
		}
	}
	set(FlagContentType, p.ContentType != "")
	set(FlagContentEncoding, p.ContentEncoding != "")
	set(FlagHeaders, p.Headers != nil)
	set(FlagDeliveryMode, p.DeliveryMode != 0)
	set(FlagPriority, p.Priority != 0)
	set(FlagCorrelationID, p.CorrelationID != "")
	set(FlagReplyTo, p.ReplyTo != "")
	set(FlagExpiration, p.Expiration != "")
	set(FlagMessageID, p.MessageID != "")
	set(FlagTimestamp, !p.Timestamp.IsZero())
	set(FlagType, p.Type != "")
	set(FlagUserID, p.UserID != "")
	set(FlagAppID, p.AppID != "")
	set(FlagClusterID, p.ClusterID != "")
	return f
}

// Append appends the property flags and list. On error dst is returned
// unchanged in length.
func (p *Properties) Append(dst []byte) ([]byte, error) {
	orig := len(dst)
	flags := p.present()
	dst = appendU16(dst, flags)
	var err error
	str := func(bit uint16, s string) {
		if err == nil && flags&bit != 0 {
			dst, err = appendShortstr(dst, s)
			if err != nil {
				err = fmt.Errorf("property 0x%04x: %w", bit, err)
			}
		}
	}
	str(FlagContentType, p.ContentType)
	str(FlagContentEncoding, p.ContentEncoding)
	if err == nil && flags&FlagHeaders != 0 {
		if dst, err = AppendTable(dst, p.Headers); err != nil {
			err = fmt.Errorf("headers: %w", err)
		}
	}
	if flags&FlagDeliveryMode != 0 {
		dst = append(dst, p.DeliveryMode)
	}
	if flags&FlagPriority != 0 {
		dst = append(dst, p.Priority)
	}
	str(FlagCorrelationID, p.CorrelationID)
	str(FlagReplyTo, p.ReplyTo)
	str(FlagExpiration, p.Expiration)
	str(FlagMessageID, p.MessageID)
	if flags&FlagTimestamp != 0 {
		dst = appendTimestamp(dst, p.Timestamp)
	}
	str(FlagType, p.Type)
	str(FlagUserID, p.UserID)
	str(FlagAppID, p.AppID)
	str(FlagClusterID, p.ClusterID)
	if err != nil {
		return dst[:orig], err
	}
	return dst, nil
}

// propSize is how many bytes the property bit takes at the start of b, its
// length prefix included; false if b is too short for it.
func propSize(bit uint16, b []byte) (int, bool) {
	var n int
	switch bit {
	case FlagHeaders:
		if len(b) < 4 {
			return 0, false
		}
		l := binary.BigEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return 0, false
		}
		n = 4 + int(l)
	case FlagDeliveryMode, FlagPriority:
		n = 1
	case FlagTimestamp:
		n = 8
	default: // shortstr
		if len(b) < 1 {
			return 0, false
		}
		n = 1 + int(b[0])
	}
	return n, len(b) >= n
}

// isShortstr reports whether property bit is a short string.
func isShortstr(bit uint16) bool {
	switch bit {
	case FlagHeaders, FlagDeliveryMode, FlagPriority, FlagTimestamp:
		return false
	}
	return true
}

// findProp returns the encoded value of one property without allocating.
// ok is false if the property is absent or the list is malformed up to it.
func findProp(raw []byte, want uint16) (v []byte, ok bool) {
	flags, off, err := propsFlags(raw)
	if err != nil || flags&want == 0 {
		return nil, false
	}
	b := raw[off:]
	for bit := uint16(0x8000); bit > flagContinuation<<1; bit >>= 1 {
		if flags&bit == 0 {
			continue
		}
		n, ok := propSize(bit, b)
		if !ok {
			return nil, false
		}
		if bit == want {
			return b[:n], true
		}
		b = b[n:]
	}
	return nil, false
}

// PropDeliveryMode returns the delivery-mode property, 0 if absent or
// malformed. It does not allocate.
func PropDeliveryMode(raw []byte) uint8 {
	v, ok := findProp(raw, FlagDeliveryMode)
	if !ok {
		return 0
	}
	return v[0]
}

// PropDeliveryModeOK returns the delivery-mode property and whether it is
// present (a malformed property list reads as absent).
func PropDeliveryModeOK(raw []byte) (uint8, bool) {
	v, ok := findProp(raw, FlagDeliveryMode)
	if !ok {
		return 0, false
	}
	return v[0], true
}

// PropPriority returns the priority property and whether it is present.
func PropPriority(raw []byte) (uint8, bool) {
	v, ok := findProp(raw, FlagPriority)
	if !ok {
		return 0, false
	}
	return v[0], true
}

// PropExpiration returns the expiration property and whether it is present.
// The string is a copy (its only allocation); PropExpirationBytes avoids it.
func PropExpiration(raw []byte) (string, bool) {
	v, ok := findProp(raw, FlagExpiration)
	if !ok {
		return "", false
	}
	return string(v[1:]), true
}

// PropExpirationBytes is PropExpiration without the copy: the result aliases
// raw.
func PropExpirationBytes(raw []byte) ([]byte, bool) {
	v, ok := findProp(raw, FlagExpiration)
	if !ok {
		return nil, false
	}
	return v[1:], true
}

// PropHeaders decodes only the headers property; nil, nil if absent.
func PropHeaders(raw []byte) (Table, error) {
	v, ok := findProp(raw, FlagHeaders)
	if !ok {
		if err := walkProps(raw, nil); err != nil {
			return nil, propsError(ClassBasic, err)
		}
		return nil, nil
	}
	t, _, err := decodeTable(v)
	if err != nil {
		e := propsError(ClassBasic, err)
		if _, ok := err.(*badTagError); ok {
			e.Code = codeBadFieldType
		}
		return nil, e
	}
	return t, nil
}
