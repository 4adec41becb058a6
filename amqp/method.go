package amqp

import "encoding/binary"

// Method is one AMQP method with its arguments. Every generated struct
// (ConnectionStart, BasicPublish, ...) implements it with a pointer receiver.
type Method interface {
	ClassID() uint16
	MethodID() uint16
	Name() string      // "basic.publish"
	HasContent() bool  // spec content="1": a content header and body follow
	Synchronous() bool // spec synchronous="1": expects a reply
	// AppendArgs appends the arguments only (no class/method ids). It fails
	// if a value cannot be encoded, e.g. a shortstr longer than 255 bytes.
	AppendArgs(dst []byte) ([]byte, error)
	decodeArgs(b []byte) error
}

// DecodeMethod decodes a whole method-frame payload: class id, method id and
// arguments. Strings and tables in the result are copies, so the payload may
// be reused afterwards.
//
// Errors are *Error: unknown class or method ids give CommandInvalid (503);
// truncated arguments, trailing bytes and malformed field tables give
// FrameError (501) with ClassID and MethodID set, as RabbitMQ does for
// arguments it "cannot decode". See codec.go for the observed behaviour.
func DecodeMethod(payload []byte) (Method, error) {
	if len(payload) < 4 {
		return nil, &Error{Code: FrameError, Text: "method frame too short for class and method ids"}
	}
	classID := binary.BigEndian.Uint16(payload)
	methodID := binary.BigEndian.Uint16(payload[2:])
	m := newMethod(classID, methodID)
	if m == nil {
		return nil, Errorf(codeUnknownMethod, classID, methodID, "unknown method %d.%d", classID, methodID)
	}
	if err := m.decodeArgs(payload[4:]); err != nil {
		return nil, argsError(m, err)
	}
	return m, nil
}

func argsError(m Method, err error) *Error {
	code := uint16(codeMalformedArgs)
	if _, ok := err.(*badTagError); ok {
		code = codeBadFieldType
	}
	e := Errorf(code, m.ClassID(), m.MethodID(), "cannot decode %s arguments: %v", m.Name(), err)
	e.Cause = err
	return e
}

// AppendMethodFrame appends a complete method frame (type, channel, size,
// class id, method id, arguments, frame-end). On error dst is returned
// unchanged in length.
func AppendMethodFrame(dst []byte, channel uint16, m Method) ([]byte, error) {
	orig := len(dst)
	dst = append(dst, FrameMethod, byte(channel>>8), byte(channel), 0, 0, 0, 0)
	dst = appendU16(dst, m.ClassID())
	dst = appendU16(dst, m.MethodID())
	dst, err := m.AppendArgs(dst)
	if err != nil {
		return dst[:orig], err
	}
	size := len(dst) - orig - FrameHeaderSize
	binary.BigEndian.PutUint32(dst[orig+3:], uint32(size))
	return append(dst, FrameEnd), nil
}

// ShortstrsValid reports whether every short string argument of m is UTF-8
// as RabbitMQ requires of the methods a client sends it (it checks them all
// but basic.publish's, and closes the connection with 501 FRAME_ERROR
// "Malformed UTF-8 in shortstr" otherwise). Surrogates and four-byte
// sequences above U+10FFFF pass, as they do in RabbitMQ 3.10.
func ShortstrsValid(m Method) bool {
	if c, ok := m.(interface{ shortstrsValid() bool }); ok {
		return c.shortstrsValid()
	}
	return true
}
