package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fill sets every field of the struct v points to (recursively, entries
// of a slice of *raft.Log included) to a value of its own, non-zero, so
// that a field an encoding leaves out comes back different.
func fill(v reflect.Value, next *uint64) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), next)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			*next++
			v.Set(reflect.ValueOf(time.Unix(1700000000, int64(*next))))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), next)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			*next++
			v.SetBytes([]byte{byte(*next), 'x', byte(*next >> 8)})
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), next)
		}
		v.Set(s)
	case reflect.Uint64, reflect.Uint32, reflect.Uint8, reflect.Int, reflect.Int64:
		*next++
		if v.CanUint() {
			v.SetUint(*next % 200)
			if v.Kind() == reflect.Uint64 {
				v.SetUint(*next<<40 | *next)
			}
		} else {
			v.SetInt(int64(*next) << 20)
		}
	case reflect.Bool:
		v.SetBool(true)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// equal compares a and b as the codec carries them: times by instant.
func equal(a, b reflect.Value) bool {
	if a.Type() == reflect.TypeOf(time.Time{}) {
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	}
	switch a.Kind() {
	case reflect.Pointer:
		return equal(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equal(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	}
	return a.Interface() == b.Interface()
}

// TestRaftCodecFields: every field of every request and response raft
// sends comes back as it went, and a struct raft gives a new field fails
// here until the codec carries it.
func TestRaftCodecFields(t *testing.T) {
	var next uint64
	for _, req := range []any{&raft.AppendEntriesRequest{}, &raft.RequestVoteRequest{}, &raft.RequestPreVoteRequest{},
		&raft.TimeoutNowRequest{}, &raft.InstallSnapshotRequest{}} {
		fill(reflect.ValueOf(req), &next)
		b, kind, err := encodeRequest(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRequest(kind, b)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if !equal(reflect.ValueOf(req), reflect.ValueOf(got)) {
			t.Fatalf("%T: sent %+v, got %+v", req, req, got)
		}
		// Every truncation is an error, never a panic.
		for i := range len(b) {
			if _, err := decodeRequest(kind, b[:i]); err == nil {
				t.Fatalf("%T cut at %d of %d decoded", req, i, len(b))
			}
		}
	}
	for _, resp := range []any{&raft.AppendEntriesResponse{}, &raft.RequestVoteResponse{}, &raft.RequestPreVoteResponse{},
		&raft.TimeoutNowResponse{}, &raft.InstallSnapshotResponse{}} {
		fill(reflect.ValueOf(resp), &next)
		b, err := encodeResponse(nil, resp)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(resp).Elem()).Interface()
		if err := decodeResponse(b, got); err != nil {
			t.Fatalf("%T: %v", resp, err)
		}
		if !equal(reflect.ValueOf(resp), reflect.ValueOf(got)) {
			t.Fatalf("%T: sent %+v, got %+v", resp, resp, got)
		}
	}
}

// TestRaftCodecZero: zero values (no entries, empty byte strings, the
// zero time a follower's late-delivery check looks at) come back zero,
// and a heartbeat is still told from an AppendEntries.
func TestRaftCodecZero(t *testing.T) {
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a:1")}, Term: 3,
		Entries: []*raft.Log{{Index: 1, Term: 3, Type: raft.LogCommand}}}
	b, kind, _ := encodeRequest(nil, req)
	got, err := decodeRequest(kind, b)
	if err != nil {
		t.Fatal(err)
	}
	g := got.(*raft.AppendEntriesRequest)
	if l := g.Entries[0]; !l.AppendedAt.IsZero() || l.Data != nil || l.Extensions != nil {
		t.Fatalf("zero entry came back as %+v", l)
	}
	if isHeartbeat(g) {
		t.Fatal("an AppendEntries with an entry taken for a heartbeat")
	}
	g.Entries = nil
	b, kind, _ = encodeRequest(nil, g)
	got, _ = decodeRequest(kind, b)
	if !isHeartbeat(got.(*raft.AppendEntriesRequest)) {
		t.Fatal("a heartbeat not told")
	}
	// A frame's entry count is checked before it is allocated.
	huge := append(rbuf(nil), b[:len(b)-2]...)
	huge.u64(1 << 40)
	huge.u64(0)
	if _, err := decodeRequest(kindAppend, huge); err == nil {
		t.Fatal("an entry count beyond the frame decoded")
	}
}

// An AppendEntries is encoded into the one buffer requestSize sizes: it
// never outgrows it, whatever its fields' varint lengths.
func TestRequestSizeFits(t *testing.T) {
	big := ^uint64(0)
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("node-1"), Addr: []byte("127.0.0.1:25711")},
		Term: big, Leader: []byte("127.0.0.1:25711"), PrevLogEntry: big, PrevLogTerm: big, LeaderCommitIndex: big}
	for i := range 20 {
		req.Entries = append(req.Entries, &raft.Log{Index: big - uint64(i), Term: big, Type: raft.LogCommand,
			Data: make([]byte, i*1000), Extensions: make([]byte, i), AppendedAt: time.Unix(1<<40, 999)})
	}
	size := requestSize(req)
	b, _, err := encodeRequest(make(rbuf, 0, size), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > size {
		t.Fatalf("encoded %d bytes, sized %d", len(b), size)
	}
	if n := testing.AllocsPerRun(10, func() { encodeRequest(make(rbuf, 0, requestSize(req)), req) }); n > 1 {
		t.Fatalf("%v allocations per encoding, want 1", n)
	}
}
