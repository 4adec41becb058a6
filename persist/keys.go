package persist

// Key layout. Every key starts with a one-byte record kind. Ids and sequence
// numbers are fixed-width big-endian uint64, so byte order is numeric order
// and a prefix scan over a kind (and an id) visits records in id/seq order.
// Names never appear joined by separators: they are length-prefixed with a
// big-endian uint16 (AMQP short strings are at most 255 bytes), so no name
// can be a prefix of another record's key.
//
//	kind  key                                                    value
//	0x01  kindExchange | len16 vhost | vhost | len16 name | name  exchange record (codec.go)
//	0x02  kindQueue    | queueID u64                              queue record (vhost and name inside)
//	0x03  kindBinding  | len16 vhost | vhost | len16 src | src |
//	        destKind u8 (0 queue, 1 exchange) | len16 dst | dst |
//	        len16 rkey | rkey | sha256(args) [32]                 binding record
//	0x04  kindBody     | msgID u64                                message record
//	0x05  kindEntry    | queueID u64 | seq u64                    msgID u64 | flags u8 (bit 0: delivered,
//	                                                                bit 1: expiry follows) | [expiry u64, Unix ns]
//	0x06  kindBlob     | key bytes (rest of the key)              blob value
//	0x07  kindMeta     | meta id u8                               u64 counter
//	0x08  kindChunk    | msgID u64 | chunk u32                    chunk of a large body (chunks.go)
//	0x09  kindFlush    (the kind alone)                           empty; written and dropped at once to
//	                                                                flush Badger's memtables (badgerKV.reclaim)
//
// Meta ids: metaQueueID holds the largest queue id ever assigned, metaMsgID
// the largest message id ever stored; both are written in the same
// transaction as the record that raised them. metaWAL is the message log's
// checkpoint: the log position (segment u64 | offset u64) from which a
// replay at Open must start.
//
// Message bodies are stored once (kindBody) and referenced by entries; the
// reference counts are kept in memory by the committer and rebuilt at Open
// by scanning kindEntry.

import (
	"crypto/sha256"
	"encoding/binary"
)

const (
	kindExchange byte = 0x01
	kindQueue    byte = 0x02
	kindBinding  byte = 0x03
	kindBody     byte = 0x04
	kindEntry    byte = 0x05
	kindBlob     byte = 0x06
	kindMeta     byte = 0x07
	kindChunk    byte = 0x08
	kindFlush    byte = 0x09
)

const (
	metaQueueID byte = 0x01
	metaMsgID   byte = 0x02
	metaWAL     byte = 0x03 // message log checkpoint: segment u64 | offset u64
)

const (
	entryKeyLen   = 1 + 8 + 8
	entryValLen   = 8 + 1
	bodyKeyLen    = 1 + 8
	flagDelivered = 0x01
	flagExpires   = 0x02 // an 8-byte expiry (Unix ns) follows the flags
)

func appendName(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func exchangeKey(vhost, name string) []byte {
	b := make([]byte, 0, 1+2+len(vhost)+2+len(name))
	b = append(b, kindExchange)
	b = appendName(b, vhost)
	return appendName(b, name)
}

func queueKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindQueue}, id)
}

func bindingKey(r BindingRecord) []byte {
	b := make([]byte, 0, 1+2+len(r.VHost)+2+len(r.Source)+1+2+len(r.Destination)+2+len(r.RoutingKey)+sha256.Size)
	b = append(b, kindBinding)
	b = appendName(b, r.VHost)
	b = appendName(b, r.Source)
	if r.DestIsExchange {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendName(b, r.Destination)
	b = appendName(b, r.RoutingKey)
	sum := sha256.Sum256(r.Args)
	return append(b, sum[:]...)
}

func appendBodyKey(b []byte, msgID uint64) []byte {
	b = append(b, kindBody)
	return binary.BigEndian.AppendUint64(b, msgID)
}

func bodyKey(msgID uint64) []byte { return appendBodyKey(make([]byte, 0, bodyKeyLen), msgID) }

func appendEntryKey(b []byte, queueID, seq uint64) []byte {
	b = append(b, kindEntry)
	b = binary.BigEndian.AppendUint64(b, queueID)
	return binary.BigEndian.AppendUint64(b, seq)
}

func entryKey(queueID, seq uint64) []byte {
	return appendEntryKey(make([]byte, 0, entryKeyLen), queueID, seq)
}

// entryPrefix is the prefix of every entry of one queue.
func entryPrefix(queueID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindEntry}, queueID)
}

// parseEntryKey returns the queue id and seq of an entry key.
func parseEntryKey(k []byte) (queueID, seq uint64, ok bool) {
	if len(k) != entryKeyLen || k[0] != kindEntry {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17]), true
}

func parseBodyKey(k []byte) (uint64, bool) {
	if len(k) != bodyKeyLen || k[0] != kindBody {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// appendEntryVal encodes an entry's value; an expiry other than 0 is
// appended (and flagged) after the flags byte.
func appendEntryVal(b []byte, msgID uint64, flags byte, expires int64) []byte {
	b = binary.BigEndian.AppendUint64(b, msgID)
	if expires == 0 {
		return append(b, flags&^flagExpires)
	}
	b = append(b, flags|flagExpires)
	return binary.BigEndian.AppendUint64(b, uint64(expires))
}

func parseEntryVal(v []byte) (msgID uint64, flags byte, ok bool) {
	msgID, flags, _, ok = parseEntryValExpires(v)
	return msgID, flags, ok
}

func parseEntryValExpires(v []byte) (msgID uint64, flags byte, expires int64, ok bool) {
	switch {
	case len(v) == entryValLen && v[8]&flagExpires == 0:
		return binary.BigEndian.Uint64(v), v[8], 0, true
	case len(v) == entryValLen+8 && v[8]&flagExpires != 0:
		return binary.BigEndian.Uint64(v), v[8], int64(binary.BigEndian.Uint64(v[9:])), true
	}
	return 0, 0, 0, false
}

func blobKey(key string) []byte {
	b := make([]byte, 0, 1+len(key))
	b = append(b, kindBlob)
	return append(b, key...)
}

func metaKey(id byte) []byte { return []byte{kindMeta, id} }

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func parseU64(v []byte) (uint64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}
