package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Large bodies. Badger refuses a value larger than its value-log file
// (64 MiB here), and the broker accepts messages up to --max-message-size
// (128 MiB by default, and more if configured). A body longer than
// bodyChunkSize is therefore stored in chunks: the message record under
// kindBody holds everything but the body (format codecChunked) with the
// body's length and chunk count, and chunk i of the body is the value of
// kindChunk | msgID | i. Head and chunks are written in the transaction
// that writes the message's entries and are deleted with its last entry,
// so a crash leaves all or none of them.
//
// The committer keeps the chunk count of each chunked message in memory
// (engine.chunked) so that deleting one needs no read; Open rebuilds it
// from the chunk keys, and deletes chunks whose message has no entry.

const (
	bodyChunkSize = 16 << 20
	chunkKeyLen   = 1 + 8 + 4
	// codecChunked is the message record of a body stored in chunks.
	codecChunked = 2
)

func appendChunkKey(b []byte, msgID uint64, i uint32) []byte {
	b = append(b, kindChunk)
	b = binary.BigEndian.AppendUint64(b, msgID)
	return binary.BigEndian.AppendUint32(b, i)
}

func parseChunkKey(k []byte) (msgID uint64, i uint32, ok bool) {
	if len(k) != chunkKeyLen || k[0] != kindChunk {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint32(k[9:]), true
}

// chunks is the number of chunks a body of n bytes is stored in; 0 means
// it is stored inline in the message record.
func chunks(n int) uint32 {
	if n <= bodyChunkSize {
		return 0
	}
	return uint32((n + bodyChunkSize - 1) / bodyChunkSize)
}

// appendChunkedHead encodes the message record of a chunked body.
func appendChunkedHead(b []byte, m *MessageRecord) []byte {
	b = append(b, codecChunked)
	b = appendString(b, m.Exchange)
	b = appendString(b, m.RoutingKey)
	b = appendBytes(b, m.Props)
	b = binary.AppendUvarint(b, uint64(len(m.Body)))
	return binary.AppendUvarint(b, uint64(chunks(len(m.Body))))
}

func chunkedHeadSize(m *MessageRecord) int {
	return 1 + 5*binary.MaxVarintLen64 + len(m.Exchange) + len(m.RoutingKey) + len(m.Props)
}

// setBody writes the message record of m (and its chunks) in txn. Chunk
// values alias m.Body, which must stay untouched until the commit.
func (s *engine) setBody(txn kvTxn, msgID uint64, m *MessageRecord) error {
	n := chunks(len(m.Body))
	if n == 0 {
		v := appendMessage(s.alloc(messageSize(m)), m)
		return txn.set(appendBodyKey(s.alloc(bodyKeyLen), msgID), v)
	}
	v := appendChunkedHead(s.alloc(chunkedHeadSize(m)), m)
	if err := txn.set(appendBodyKey(s.alloc(bodyKeyLen), msgID), v); err != nil {
		return err
	}
	for i := range n {
		lo := int(i) * bodyChunkSize
		hi := min(lo+bodyChunkSize, len(m.Body))
		if err := txn.set(appendChunkKey(s.alloc(chunkKeyLen), msgID, i), m.Body[lo:hi:hi]); err != nil {
			return err
		}
	}
	s.txnChunked = append(s.txnChunked, chunkCount{msgID, n})
	return nil
}

// delBody deletes the message record of msgID and its chunks in txn.
func (s *engine) delBody(txn kvTxn, msgID uint64) error {
	if err := txn.del(appendBodyKey(s.alloc(bodyKeyLen), msgID)); err != nil {
		return err
	}
	s.bodiesDeleted++
	n := s.chunked[msgID]
	for i := range n {
		if err := txn.del(appendChunkKey(s.alloc(chunkKeyLen), msgID, i)); err != nil {
			return err
		}
	}
	if n > 0 {
		s.txnChunked = append(s.txnChunked, chunkCount{msgID, 0})
	}
	return nil
}

type chunkCount struct {
	msgID uint64
	n     uint32 // 0: deleted
}

// commitChunked takes the chunk counts of a committed transaction.
func (s *engine) commitChunked() {
	for _, c := range s.txnChunked {
		if c.n == 0 {
			delete(s.chunked, c.msgID)
		} else {
			s.chunked[c.msgID] = c.n
		}
	}
	s.txnChunked = s.txnChunked[:0]
}

// readMessage decodes the message record v of msgID, reading the chunks of
// a chunked body through r. v is copied: the result does not alias it.
func readMessage(r kvReader, msgID uint64, v []byte) (MessageRecord, error) {
	if len(v) == 0 || v[0] != codecChunked {
		return decodeMessage(append([]byte(nil), v...))
	}
	rd := walReader{reader{b: append([]byte(nil), v[1:]...)}}
	var m MessageRecord
	m.Exchange, m.RoutingKey = rd.str(), rd.str()
	m.Props = rd.bytes()
	size, n := rd.uvarint(), rd.uvarint()
	if err := rd.end(); err != nil {
		return MessageRecord{}, fmt.Errorf("message %d: %w", msgID, err)
	}
	if n != uint64(chunks(int(size))) || size > 1<<40 {
		return MessageRecord{}, fmt.Errorf("%w: message %d: %d bytes in %d chunks", ErrCorrupt, msgID, size, n)
	}
	body := make([]byte, 0, size)
	var key [chunkKeyLen]byte
	for i := range uint32(n) {
		err := r.get(appendChunkKey(key[:0], msgID, i), func(c []byte) error {
			body = append(body, c...)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			return MessageRecord{}, fmt.Errorf("%w: message %d: chunk %d of %d missing", ErrCorrupt, msgID, i, n)
		}
		if err != nil {
			return MessageRecord{}, err
		}
	}
	if uint64(len(body)) != size {
		return MessageRecord{}, fmt.Errorf("%w: message %d: chunks hold %d of %d bytes", ErrCorrupt, msgID, len(body), size)
	}
	m.Body = body
	return m, nil
}
