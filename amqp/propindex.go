package amqp

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
