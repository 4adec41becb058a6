package amqp

import (
	"errors"
	"fmt"
)

// Error is an AMQP exception: a reply code with its text and, when known, the
// class and method that caused it. Decoders return *Error for malformed input
// so the server can close the connection with the right code.
type Error struct {
	Code     uint16
	Text     string // human part, without the "NOT_FOUND - " prefix
	ClassID  uint16 // 0 if unknown
	MethodID uint16 // 0 if unknown
	// Cause is the decoding error behind it, if any (see ErrBadFieldType).
	Cause error
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// ErrBadFieldType is the cause of an *Error for a field table holding an
// unknown field value type tag.
var ErrBadFieldType = errors.New("amqp: unknown field value type")

// Error formats the error the way RabbitMQ formats reply texts:
// "NOT_FOUND - no queue 'q'".
func (e *Error) Error() string {
	if e.Text == "" {
		return ReplyText(e.Code)
	}
	return ReplyText(e.Code) + " - " + e.Text
}

// ReplyString is the reply-text to send in channel.close/connection.close,
// truncated to fit a shortstr.
func (e *Error) ReplyString() string {
	s := e.Error()
	if len(s) > 255 {
		s = s[:255]
	}
	return s
}

// Hard reports whether the code is a connection-level exception
// (320, 402, 501-506, 530, 540, 541) per the spec's hard-error class.
func (e *Error) Hard() bool { return isHardCode(e.Code) }

// Errorf builds an *Error with a formatted text.
func Errorf(code uint16, classID, methodID uint16, format string, args ...any) *Error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...), ClassID: classID, MethodID: methodID}
}

// ErrStringTooLong is wrapped by encoders when a shortstr exceeds 255 bytes
// or a longstr/table exceeds 2^32-1 bytes.
var ErrStringTooLong = errors.New("amqp: string too long for its field")

// ErrUnsupportedValue is wrapped by AppendTable for Go values that have no
// field-table encoding.
var ErrUnsupportedValue = errors.New("amqp: unsupported field value type")

func fieldErr(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}
