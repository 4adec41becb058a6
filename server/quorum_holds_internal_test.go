package server

import (
	"slices"
	"testing"
)

// quorum.holds carries a group id and keys, and answers keys: 8 bytes
// each; anything else is refused, not misread.
func TestQuorumHoldsCodec(t *testing.T) {
	for _, vs := range [][]uint64{{}, {1 << 62}, {1<<62 | 7, 0, 1<<64 - 1}} {
		got, err := decodeUint64s(encodeUint64s(vs))
		if err != nil || !slices.Equal(got, vs) {
			t.Fatalf("%v came back as %v (%v)", vs, got, err)
		}
	}
	if _, err := decodeUint64s(make([]byte, 12)); err == nil {
		t.Fatal("12 bytes decoded")
	}
}
