package amqp

import (
	"runtime"
	"strings"
	"testing"
)

// TestDecodedStringsDoNotKeepTables: a queue name decoded from a
// queue.declare whose arguments table is large does not keep the table's
// bytes alive (the broker keeps the name for the queue's whole life).
func TestDecodedStringsDoNotKeepTables(t *testing.T) {
	const argSize = 4 << 20
	payload := func() []byte {
		b, err := AppendMethodFrame(nil, 1, &QueueDeclare{
			Queue:     "q",
			Arguments: Table{"x-big": strings.Repeat("a", argSize)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b[FrameHeaderSize : len(b)-1]
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	names := make([]string, 4)
	for i := range names {
		m, err := DecodeMethod(payload)
		if err != nil {
			t.Fatal(err)
		}
		names[i] = m.(*QueueDeclare).Queue
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > argSize {
		t.Fatalf("4 decoded queue names keep %d bytes alive (arguments of %d bytes each)", grew, argSize)
	}
	for _, n := range names {
		if n != "q" {
			t.Fatalf("queue name %q", n)
		}
	}
	runtime.KeepAlive(payload)
}

// TestDecodeStringRuns: the strings of a method share one allocation per
// run that no table interrupts, and every string lands in its field, also
// past the decoder's batch of pending strings.
func TestDecodeStringRuns(t *testing.T) {
	pub := &BasicPublish{Exchange: "amq.direct", RoutingKey: "some.key", Mandatory: true}
	b, _ := AppendMethodFrame(nil, 1, pub)
	payload := b[FrameHeaderSize : len(b)-1]
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := DecodeMethod(payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 2 { // the method and one arena
		t.Fatalf("basic.publish decodes with %v allocations, want 2", allocs)
	}
	var d decoder
	var got [20]string
	var in []byte
	for i := range got {
		in, _ = appendShortstr(in, strings.Repeat("x", i))
	}
	d = newDecoder(in)
	for i := range got {
		d.shortstr(&got[i])
	}
	if err := d.finish(); err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if s != strings.Repeat("x", i) {
			t.Fatalf("string %d is %q", i, s)
		}
	}
}

// TestValidShortstr: the UTF-8 rule for method short strings: malformed,
// truncated and overlong sequences are refused, as RabbitMQ 3.10 refuses
// them; so are surrogates and code points above U+10FFFF, which RabbitMQ
// takes but no definitions export can carry (see validShortstr).
func TestValidShortstr(t *testing.T) {
	for s, want := range map[string]bool{
		"":                     true,
		"plain.ascii\x00":      true,
		"\xc3\xa9":             true,
		"\xc2\x80":             true,
		"\xe0\xa0\x80":         true,
		"\xef\xbf\xbe":         true,
		"\xed\xa0\x80":         false, // high surrogate
		"\xed\xbf\xbf":         false, // low surrogate
		"\xf0\x90\x80\x80":     true,
		"\xf4\x8f\xbf\xbf":     true,
		"\xf4\x90\x80\x80":     false, // above U+10FFFF
		"\xf5\x80\x80\x80":     false,
		"\xf7\xbf\xbf\xbf":     false,
		"\xff":                 false,
		"\xfe":                 false,
		"\x80":                 false,
		"\xc3":                 false,
		"\xc3A":                false,
		"\xe2\x82":             false,
		"\xc0\xaf":             false,
		"\xc1\xbf":             false,
		"\xe0\x80\xaf":         false,
		"\xe0\x9f\xbf":         false,
		"\xf0\x80\x80\xaf":     false,
		"\xf0\x8f\xbf\xbf":     false,
		"\xf8\x88\x80\x80\x80": false,
	} {
		if got := validShortstr(s); got != want {
			t.Errorf("validShortstr(%q) = %v, want %v", s, got, want)
		}
	}
	if ShortstrsValid(&QueueDeclare{Queue: "q\xff"}) || !ShortstrsValid(&QueueDeclare{Queue: "q\xc3\xa9"}) || !ShortstrsValid(&BasicAck{}) {
		t.Error("ShortstrsValid")
	}
}
