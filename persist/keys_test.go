package persist

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestKeyOrder(t *testing.T) {
	seqs := []uint64{0, 1, 255, 256, 65535, 1 << 32, 1<<63 - 1, 1 << 63, ^uint64(0)}
	for i := 1; i < len(seqs); i++ {
		if bytes.Compare(entryKey(7, seqs[i-1]), entryKey(7, seqs[i])) >= 0 {
			t.Fatalf("entry key of seq %d does not sort before seq %d", seqs[i-1], seqs[i])
		}
	}
	// Every entry of queue 7 sorts between queue 6's and queue 8's and has
	// queue 7's prefix only.
	if !bytes.HasPrefix(entryKey(7, ^uint64(0)), entryPrefix(7)) || bytes.HasPrefix(entryKey(8, 0), entryPrefix(7)) {
		t.Fatal("entry prefix")
	}
	if q, s, ok := parseEntryKey(entryKey(1<<40, 99)); !ok || q != 1<<40 || s != 99 {
		t.Fatal("parseEntryKey")
	}
	if id, ok := parseBodyKey(bodyKey(12345)); !ok || id != 12345 {
		t.Fatal("parseBodyKey")
	}
}

func TestKeysNoSeparatorCollisions(t *testing.T) {
	pairs := [][2][]byte{
		{exchangeKey("a.b", "c"), exchangeKey("a", "b.c")},
		{exchangeKey("a", "bc"), exchangeKey("ab", "c")},
		{exchangeKey("", "ab"), exchangeKey("a", "b")},
		{bindingKey(BindingRecord{VHost: "/", Source: "a", Destination: "b.c", RoutingKey: "d"}),
			bindingKey(BindingRecord{VHost: "/", Source: "a", Destination: "b", RoutingKey: "c.d"})},
		{bindingKey(BindingRecord{Source: "a", Destination: "q"}), bindingKey(BindingRecord{Source: "a", Destination: "q", DestIsExchange: true})},
		{bindingKey(BindingRecord{Source: "a", Destination: "q"}), bindingKey(BindingRecord{Source: "a", Destination: "q", Args: []byte{0}})},
	}
	for _, p := range pairs {
		if bytes.Equal(p[0], p[1]) || bytes.HasPrefix(p[0], p[1]) || bytes.HasPrefix(p[1], p[0]) {
			t.Fatalf("keys collide or nest: %x %x", p[0], p[1])
		}
	}
	// A name is never a prefix scan for a longer name.
	if bytes.HasPrefix(exchangeKey("/", "orders.eu"), exchangeKey("/", "orders")) {
		t.Fatal("exchange key of orders is a prefix of orders.eu")
	}
}

func TestCodecRoundTrip(t *testing.T) {
	x := ExchangeRecord{VHost: "/", Name: "x", Kind: "topic", Durable: true, Internal: true, Args: []byte{1, 2}}
	if got, err := decodeExchange(encodeExchange(x)); err != nil || !reflect.DeepEqual(got, x) {
		t.Fatalf("exchange %+v, %v", got, err)
	}
	q := QueueRecord{VHost: "v", Name: "q", ID: 1 << 50, Durable: true, AutoDelete: true, Exclusive: true}
	if got, err := decodeQueue(encodeQueue(&q)); err != nil || !reflect.DeepEqual(got, q) {
		t.Fatalf("queue %+v, %v", got, err)
	}
	b := BindingRecord{VHost: "v", Source: "s", Destination: "d", DestIsExchange: true, RoutingKey: "#", Args: []byte("t")}
	if got, err := decodeBinding(encodeBinding(b)); err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("binding %+v, %v", got, err)
	}
	m := MessageRecord{Exchange: "e", RoutingKey: "r", Props: []byte{0x80, 0}, Body: []byte("hello")}
	enc := appendMessage(nil, &m)
	if len(enc) > messageSize(&m) {
		t.Fatalf("messageSize %d < encoded %d", messageSize(&m), len(enc))
	}
	if got, err := decodeMessage(enc); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("message %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0xff}, encodeQueue(&q)[:5], append(encodeExchange(x), 0)} {
		if _, err := decodeExchange(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeExchange(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
}
