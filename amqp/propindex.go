package amqp

import (
	"encoding/binary"
	"slices"
)

// PropIndex is what a broker reads of a message's content properties, found
// in one pass over the raw property list without allocating: the flags, the
// one-byte properties, and where the string and headers properties are.
// Its spans are offsets into the list it was built from (or an identical
// copy of it), read with the methods below.
type PropIndex struct {
	Flags        uint16
	DeliveryMode uint8
	Priority     uint8
	replyTo      span
	expiration   span
	userID       span
	headers      span // the whole table, length prefix included
}

type span struct{ off, end uint32 }

func (s span) of(raw []byte) []byte { return raw[s.off:s.end:s.end] }

// Has reports whether the property flag is set.
func (x *PropIndex) Has(flag uint16) bool { return x.Flags&flag != 0 }

// ReplyTo returns the reply-to property; it aliases raw.
func (x *PropIndex) ReplyTo(raw []byte) ([]byte, bool) {
	return x.replyTo.of(raw), x.Has(FlagReplyTo)
}

// Expiration returns the expiration property; it aliases raw.
func (x *PropIndex) Expiration(raw []byte) ([]byte, bool) {
	return x.expiration.of(raw), x.Has(FlagExpiration)
}

// UserID returns the user-id property; it aliases raw.
func (x *PropIndex) UserID(raw []byte) ([]byte, bool) {
	return x.userID.of(raw), x.Has(FlagUserID)
}

// HeadersRaw returns the encoded headers table, length prefix included
// (nil when absent); it aliases raw.
func (x *PropIndex) HeadersRaw(raw []byte) []byte {
	if !x.Has(FlagHeaders) {
		return nil
	}
	return x.headers.of(raw)
}

// Headers decodes the headers property; nil, nil when absent.
func (x *PropIndex) Headers(raw []byte) (Table, error) {
	if !x.Has(FlagHeaders) {
		return nil, nil
	}
	t, _, err := decodeTable(x.headers.of(raw))
	if err != nil {
		e := propsError(ClassBasic, err)
		if _, ok := err.(*badTagError); ok {
			e.Code = codeBadFieldType
		}
		return nil, e
	}
	return t, nil
}

// IndexProperties checks a property flags + list as DecodeContentHeader
// does and indexes it.
func IndexProperties(raw []byte) (PropIndex, error) {
	x, err := indexProps(raw)
	if err != nil {
		return PropIndex{}, propsError(ClassBasic, err)
	}
	return x, nil
}

// indexProps walks the list once, validating it (the headers table in
// place) and recording what PropIndex holds.
func indexProps(raw []byte) (PropIndex, error) {
	var x PropIndex
	flags, off, err := propsFlags(raw)
	if err != nil {
		return x, err
	}
	x.Flags = flags
	pos := off
	for bit := uint16(0x8000); bit > flagContinuation<<1; bit >>= 1 {
		if flags&bit == 0 {
			continue
		}
		b := raw[pos:]
		n, ok := propSize(bit, b)
		if !ok {
			return x, errPropsTruncated
		}
		s := span{uint32(pos + 1), uint32(pos + n)} // a short string's
		switch bit {
		case FlagHeaders:
			if err := validateTableBody(b[4:n], 0); err != nil {
				return x, err
			}
			x.headers = span{uint32(pos), uint32(pos + n)}
		case FlagDeliveryMode:
			x.DeliveryMode = b[0]
		case FlagPriority:
			x.Priority = b[0]
		case FlagReplyTo:
			x.replyTo = s
		case FlagExpiration:
			x.expiration = s
		case FlagUserID:
			x.userID = s
		}
		pos += n
	}
	if pos != len(raw) {
		return x, errPropsTrailing
	}
	return x, nil
}

// AddHeaders returns a copy of the property flags + list raw with the
// headers keys[i] = vals[i] added, without decoding the rest: the fields
// are appended to the encoded headers table, or a table is inserted (and
// its flag set) where raw has none. It is how a queue adds delivery
// headers (x-stream-offset, x-delivery-count) to a message at the cost of
// one copy. ok is false, and raw is returned as it is, when raw does not
// index, a value does not encode, or the table already has one of the
// keys (a header is never there twice); the caller then decodes and
// re-encodes instead.
func AddHeaders(raw []byte, keys []string, vals []any) (out []byte, ok bool) {
	x, err := indexProps(raw)
	if err != nil || len(keys) != len(vals) {
		return raw, false
	}
	n := 0
	for _, k := range keys {
		n += 1 + len(k) + 9
	}
	fields := make([]byte, 0, n)
	for i, k := range keys {
		if len(k) > 255 {
			return raw, false
		}
		fields = append(fields, byte(len(k)))
		fields = append(fields, k...)
		if fields, err = appendFieldValue(fields, vals[i], 0); err != nil {
			return raw, false
		}
	}
	if x.Has(FlagHeaders) {
		tbl := x.headers.of(raw)
		for body := tbl[4:]; len(body) > 0; {
			kl := int(body[0])
			if slices.Contains(keys, string(body[1:1+kl])) {
				return raw, false
			}
			if body, err = skipFieldValue(body[1+kl:], 0); err != nil {
				return raw, false
			}
		}
		out = make([]byte, 0, len(raw)+len(fields))
		out = append(out, raw[:x.headers.end]...)
		out = append(out, fields...)
		out = append(out, raw[x.headers.end:]...)
		binary.BigEndian.PutUint32(out[x.headers.off:], uint32(len(tbl)-4+len(fields)))
		return out, true
	}
	// The headers come after content-type and content-encoding.
	pos := 2
	for _, bit := range []uint16{FlagContentType, FlagContentEncoding} {
		if x.Flags&bit != 0 {
			pos += 1 + int(raw[pos])
		}
	}
	out = make([]byte, 0, len(raw)+4+len(fields))
	out = append(out, raw[:pos]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(fields)))
	out = append(out, fields...)
	out = append(out, raw[pos:]...)
	binary.BigEndian.PutUint16(out, binary.BigEndian.Uint16(out)|FlagHeaders)
	return out, true
}
