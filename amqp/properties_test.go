package amqp

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// allProps has every one of the 14 basic properties set.
func allProps() Properties {
	return Properties{
		ContentType:     "text/plain",
		ContentEncoding: "gzip",
		Headers:         Table{"h": int32(1)},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageID:       "m1",
		Timestamp:       time.Unix(1700000000, 0).UTC(),
		Type:            "t",
		UserID:          "guest",
		AppID:           "app",
		ClusterID:       "c",
		Flags:           0xfffc,
	}
}

const goldenAllProps = `
fffc                                   // flags: all 14
0a 746578742f706c61696e                // content-type "text/plain"
04 677a6970                            // content-encoding "gzip"
00000007 01 68 49 00000001             // headers {"h": I 1}
02                                     // delivery-mode 2
09                                     // priority 9
04 636f7272                            // correlation-id "corr"
15 616d712e7261626269746d712e7265706c792d746f // reply-to "amq.rabbitmq.reply-to"
05 3630303030                          // expiration "60000"
02 6d31                                // message-id "m1"
000000006553f100                       // timestamp 1700000000
01 74                                  // type "t"
05 6775657374                          // user-id "guest"
03 617070                              // app-id "app"
01 63                                  // cluster-id "c"
`

func TestPropertiesGolden(t *testing.T) {
	want := unhex(t, goldenAllProps)
	p := allProps()
	got, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode:\n got %x\nwant %x", got, want)
	}
	dec, err := DecodeProperties(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, p) {
		t.Fatalf("decode:\n got %#v\nwant %#v", dec, p)
	}
	if PropDeliveryMode(want) != 2 {
		t.Error("PropDeliveryMode")
	}
	if v, ok := PropPriority(want); !ok || v != 9 {
		t.Error("PropPriority")
	}
	if v, ok := PropExpiration(want); !ok || v != "60000" {
		t.Errorf("PropExpiration %q %v", v, ok)
	}
	if h, err := PropHeaders(want); err != nil || !reflect.DeepEqual(h, Table{"h": int32(1)}) {
		t.Errorf("PropHeaders %v %v", h, err)
	}
}

func TestPropertiesEachAlone(t *testing.T) {
	full := allProps()
	fv := reflect.ValueOf(full)
	for i := 0; i < fv.NumField()-1; i++ { // all but Flags
		bit := uint16(0x8000) >> i
		var p Properties
		reflect.ValueOf(&p).Elem().Field(i).Set(fv.Field(i))
		raw, err := p.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := uint16(raw[0])<<8 | uint16(raw[1]); got != bit {
			t.Fatalf("field %s: flags %04x, want %04x", fv.Type().Field(i).Name, got, bit)
		}
		dec, err := DecodeProperties(raw)
		if err != nil {
			t.Fatal(err)
		}
		p.Flags = bit
		if !reflect.DeepEqual(dec, p) {
			t.Fatalf("field %s:\n got %#v\nwant %#v", fv.Type().Field(i).Name, dec, p)
		}
		if _, err := DecodeContentHeader(append(make([]byte, 12), raw...)); err != nil {
			t.Fatalf("content header: %v", err)
		}
	}
}

func TestPropertiesFlagsKeepZeroValues(t *testing.T) {
	p := Properties{Flags: FlagContentType | FlagPriority | FlagHeaders}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "a800 00 00000000 00")
	if !bytes.Equal(raw, want) {
		t.Fatalf("got %x want %x", raw, want)
	}
	if v, ok := PropPriority(raw); !ok || v != 0 {
		t.Fatal("priority 0 should be present")
	}
	if h, err := PropHeaders(raw); h != nil || err != nil {
		t.Fatalf("empty headers: %v %v", h, err)
	}
	if _, ok := PropExpiration(raw); ok {
		t.Fatal("expiration absent")
	}
	if PropDeliveryMode(raw) != 0 {
		t.Fatal("delivery mode absent")
	}
}

func TestPropertiesErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
	}{
		{"empty", ""},
		{"one byte", "80"},
		{"continuation bit", "0001 0000"},
		{"truncated shortstr", "8000 05 61"},
		{"missing delivery mode", "1000"},
		{"truncated timestamp", "0040 00000000"},
		{"headers overrun", "2000 000000ff 00"},
		{"bad header tag", "2000 00000004 01 6b 5a 00"},
		{"trailing bytes", "0000 01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := unhex(t, tc.raw)
			_, err := DecodeProperties(raw)
			wantCode(t, err, FrameError)
			_, err = DecodeContentHeader(append(make([]byte, 12), raw...))
			wantCode(t, err, FrameError)
			if PropDeliveryMode(raw) != 0 {
				t.Error("PropDeliveryMode on malformed")
			}
		})
	}
	// Bit 1 is undefined for basic and ignored, as RabbitMQ does.
	if _, err := DecodeProperties([]byte{0, 2}); err != nil {
		t.Fatalf("bit 1: %v", err)
	}
	if _, err := DecodeContentHeader(make([]byte, 13)); err == nil {
		t.Fatal("13-byte content header should fail")
	}
}

func TestPropAccessorsDoNotAllocate(t *testing.T) {
	p := allProps()
	raw, _ := p.Append(nil)
	payload := append(make([]byte, 12), raw...)
	allocs := testing.AllocsPerRun(100, func() {
		_ = PropDeliveryMode(raw)
		_, _ = PropPriority(raw)
		if v, ok := PropExpirationBytes(raw); !ok || string(v) != "60000" {
			t.Fatal("PropExpirationBytes")
		}
		if _, err := DecodeContentHeader(payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// TestPropIndex checks the index against DecodeProperties for every
// property alone and for all of them, and that reading it allocates
// nothing.
func TestPropIndex(t *testing.T) {
	all := allProps()
	cases := []Properties{all, {}}
	for bit := uint16(0x8000); bit > flagContinuation<<1; bit >>= 1 {
		p := all
		p.Flags = bit
		cases = append(cases, p)
	}
	for _, c := range cases {
		raw, err := c.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeProperties(raw)
		if err != nil {
			t.Fatal(err)
		}
		x, err := IndexProperties(raw)
		if err != nil {
			t.Fatalf("flags %04x: %v", c.Flags, err)
		}
		checkIndex(t, x, raw, want)
	}
	if _, err := IndexProperties([]byte{0x10, 0}); err == nil {
		t.Fatal("a list without its delivery mode indexed")
	}
	raw, _ := all.Append(nil)
	x, _ := IndexProperties(raw)
	allocs := testing.AllocsPerRun(100, func() {
		if v, ok := x.Expiration(raw); !ok || string(v) != "60000" {
			t.Fatal("Expiration")
		}
		if v, ok := x.UserID(raw); !ok || string(v) != "guest" {
			t.Fatal("UserID")
		}
		_, _ = IndexProperties(raw)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// AddHeaders gives what decoding, setting the headers and encoding again
// gives, for lists with and without headers and other properties around
// them; it declines a key already there.
func TestAddHeaders(t *testing.T) {
	ts := time.Unix(1700000000, 0).UTC()
	for i, p := range []Properties{
		{},
		{ContentType: "text/plain"},
		{ContentType: "a", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 3, MessageID: "m", Timestamp: ts},
		{Headers: Table{"own": "kept", "n": int32(5)}, ReplyTo: "r"},
		{ContentEncoding: "e", Headers: Table{}, UserID: "u", AppID: "app"},
	} {
		raw, err := p.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AddHeaders(raw, []string{"x-stream-offset", "x-stream-partition"}, []any{int64(42), int64(3)})
		if !ok {
			t.Fatalf("%d: declined", i)
		}
		d, err := DecodeProperties(got)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		want := p
		want.Headers = Table{"x-stream-offset": int64(42), "x-stream-partition": int64(3)}
		for k, v := range p.Headers {
			want.Headers[k] = v
		}
		if d.Flags&FlagHeaders == 0 {
			t.Fatalf("%d: no headers flag", i)
		}
		want.Flags = d.Flags
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("%d: got %+v, want %+v", i, d, want)
		}
		if _, err := IndexProperties(got); err != nil {
			t.Fatalf("%d: the result does not index: %v", i, err)
		}
	}
	raw, _ := (&Properties{Headers: Table{"x-stream-offset": "mine"}}).Append(nil)
	if out, ok := AddHeaders(raw, []string{"x-stream-offset"}, []any{int64(1)}); ok || !bytes.Equal(out, raw) {
		t.Fatal("a key already there was added again")
	}
}
