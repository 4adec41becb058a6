package cluster

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// requestFrame is a raw request frame of the raft channel.
func requestFrame(size uint32, id uint64, kind byte, group string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, size)
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, kind, byte(len(group)))
	b = append(b, group...)
	return append(b, body...)
}

// TestServeRaftGarbage: what a peer sends that is not a request (a
// length beyond the limit, an unknown kind, a body cut short) ends its
// connection without a panic or an allocation of what it claims; a
// request for a group this node does not have is answered as such and
// the connection goes on.
func TestServeRaftGarbage(t *testing.T) {
	n := &Node{groups: map[string]*GroupTransport{}, timing: DefaultTiming(),
		ctx: context.Background(), log: zerolog.Nop()}
	n.cfg.NodeName = "me"
	g := &GroupTransport{n: n, group: "g", consume: make(chan raft.RPC), closed: make(chan struct{})}
	n.groups["g"] = g
	hb, _, _ := encodeRequest(nil, &raft.AppendEntriesRequest{Term: 1, RPCHeader: raft.RPCHeader{Addr: []byte("x")}})
	for _, tc := range []struct {
		name  string
		first []byte // answered with raftNoGroup before the garbage, when set
		bad   []byte
	}{
		{"a length over the limit", requestFrame(uint32(10+len("nope")+len(hb)), 1, kindAppend, "nope", hb), requestFrame(maxRaftFrame+1, 2, kindAppend, "g", nil)},
		{"an unknown kind", nil, requestFrame(10+1+3, 3, 99, "g", []byte{1, 2, 3})},
		{"a body cut short", nil, requestFrame(uint32(10+1+len(hb)-2), 4, kindAppend, "g", hb[:len(hb)-2])},
		{"a group longer than its frame", nil, requestFrame(10, 5, kindAppend, "gggg", nil)[:14]},
	} {
		c1, c2 := net.Pipe()
		ended := make(chan struct{})
		go func() { n.serveRaft(c2, peer{name: "peer"}); close(ended) }()
		_ = c1.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.first != nil {
			if _, err := c1.Write(tc.first); err != nil {
				t.Fatal(tc.name, err)
			}
			var hdr [13]byte
			if _, err := io.ReadFull(c1, hdr[:]); err != nil {
				t.Fatal(tc.name, err)
			}
			size := binary.BigEndian.Uint32(hdr[:4])
			rest := make([]byte, size-9)
			io.ReadFull(c1, rest)
			if id := binary.BigEndian.Uint64(hdr[4:12]); id != 1 || hdr[12] != raftNoGroup {
				t.Fatalf("%s: answer id %d status %d (%s), want 1 and raftNoGroup", tc.name, id, hdr[12], rest)
			}
		}
		go c1.Write(tc.bad)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the connection goes on", tc.name)
		}
		c1.Close()
		c2.Close()
	}
}
