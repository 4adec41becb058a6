package main

import (
	"encoding/binary"
	"errors"
)

// minBodySize is the smallest body the tool can send: an 8-byte send
// timestamp (Unix ns), a 4-byte producer id and a 4-byte sequence number.
const minBodySize = 16

var errShortBody = errors.New("body shorter than 16 bytes")

// encodeBody writes the header fields into the first 16 bytes of b. The rest
// of b is left as it is (padding).
func encodeBody(b []byte, sentNs int64, producer, seq uint32) {
	binary.BigEndian.PutUint64(b[0:8], uint64(sentNs))
	binary.BigEndian.PutUint32(b[8:12], producer)
	binary.BigEndian.PutUint32(b[12:16], seq)
}

// decodeBody reads the fields written by encodeBody.
func decodeBody(b []byte) (sentNs int64, producer, seq uint32, err error) {
	if len(b) < minBodySize {
		return 0, 0, 0, errShortBody
	}
	sentNs = int64(binary.BigEndian.Uint64(b[0:8]))
	producer = binary.BigEndian.Uint32(b[8:12])
	seq = binary.BigEndian.Uint32(b[12:16])
	return sentNs, producer, seq, nil
}
