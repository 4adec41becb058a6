package amqp

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// Frames captured from RabbitMQ 3.10.8 (Erlang/OTP 25) with
// TestRabbitMQCapture in rabbitmq_probe_test.go. They check the codec against
// bytes another implementation produced.
const (
	rabbitConnectionStart = "010000000001f0000a000a0009000001cb0c6361706162696c697469657346000000c7127075626c69736865725f636f6e6669726d7374011a65786368616e67655f65786368616e67655f62696e64696e677374010a62617369632e6e61636b740116636f6e73756d65725f63616e63656c5f6e6f74696679740112636f6e6e656374696f6e2e626c6f636b6564740113636f6e73756d65725f7072696f72697469657374011c61757468656e7469636174696f6e5f6661696c7572655f636c6f73657401107065725f636f6e73756d65725f716f7374010f6469726563745f7265706c795f746f74010c636c75737465725f6e616d65530000000972616262697440766d09636f707972696768745300000037436f707972696768742028632920323030372d3230323220564d776172652c20496e632e206f722069747320616666696c69617465732e0b696e666f726d6174696f6e53000000394c6963656e73656420756e64657220746865204d504c20322e302e20576562736974653a2068747470733a2f2f7261626269746d712e636f6d08706c6174666f726d530000001145726c616e672f4f54502032352e322e330770726f6475637453000000085261626269744d510776657273696f6e5300000006332e31302e380000000e414d51504c41494e20504c41494e00000005656e5f5553ce"
	rabbitConnectionTune  = "0100000000000c000a001e07ff00020000003cce"
	rabbitQueueDeclareOk  = "010001000000200032000b1377617272656e2d616d71702d636170747572650000000000000000ce"
	rabbitChannelClose406 = "0100010000004300140028019638505245434f4e444954494f4e5f4641494c4544202d2066617374207265706c7920636f6e73756d657220646f6573206e6f74206578697374003c0028ce"
	rabbitBasicDeliver    = "01000100000027003c003c0463746167000000000000000100001377617272656e2d616d71702d63617074757265ce"
	rabbitContentHeader   = "020001000000cb003c00000000000000000005fffc0a746578742f706c61696e04677a69700000007b0141410000000774014900000001014242ff01444402fffffed401464600000008016e530000000176014949fffffffb015353000000036162630154540000000065a0bc00015656016262800164643ff80000000000000166663fc00000016c6cffffffffffffffff017373fffe017474000178780000000200ff020904636f7272077265706c696573053630303030026d31000000006553f1000174056775657374036170700163ce"
	rabbitContentBody     = "0300010000000568656c6c6fce"
)

func readOne(t *testing.T, hexFrame string) Frame {
	t.Helper()
	fr := NewFrameReader(bytes.NewReader(unhex(t, hexFrame)), 0)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRabbitMQConnectionStart(t *testing.T) {
	f := readOne(t, rabbitConnectionStart)
	m, err := DecodeMethod(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	s := m.(*ConnectionStart)
	if s.VersionMajor != 0 || s.VersionMinor != 9 || s.Mechanisms != "AMQPLAIN PLAIN" || s.Locales != "en_US" {
		t.Fatalf("%+v", s)
	}
	caps, _ := s.ServerProperties["capabilities"].(Table)
	if s.ServerProperties["product"] != "RabbitMQ" || s.ServerProperties["version"] != "3.10.8" ||
		caps["publisher_confirms"] != true || caps["connection.blocked"] != true || len(caps) != 9 {
		t.Fatalf("server properties %#v", s.ServerProperties)
	}
	// RabbitMQ does not sort the capabilities keys, so compare decoded values.
	again, err := AppendMethodFrame(nil, 0, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(unhex(t, rabbitConnectionStart)) {
		t.Fatalf("re-encoded length %d", len(again))
	}
	m2, err := DecodeMethod(again[FrameHeaderSize : len(again)-1])
	if err != nil || !reflect.DeepEqual(m2, m) {
		t.Fatalf("re-encode: %v\n%#v", err, m2)
	}
}

func TestRabbitMQMethodsByteExact(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want Method
	}{
		{rabbitConnectionTune, &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}},
		{rabbitQueueDeclareOk, &QueueDeclareOk{Queue: "warren-amqp-capture"}},
		{rabbitChannelClose406, &ChannelClose{ReplyCode: PreconditionFailed,
			ReplyText:    "PRECONDITION_FAILED - fast reply consumer does not exist",
			ReplyClassID: ClassBasic, ReplyMethodID: MethodBasicPublish}},
		{rabbitBasicDeliver, &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, RoutingKey: "warren-amqp-capture"}},
	} {
		f := readOne(t, tc.hex)
		m, err := DecodeMethod(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m, tc.want) {
			t.Fatalf("decode:\n got %#v\nwant %#v", m, tc.want)
		}
		b, err := AppendMethodFrame(nil, f.Channel, m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, unhex(t, tc.hex)) {
			t.Fatalf("%s re-encode:\n got %x\nwant %s", m.Name(), b, tc.hex)
		}
	}
}

func TestRabbitMQContent(t *testing.T) {
	f := readOne(t, rabbitContentHeader)
	h, err := DecodeContentHeader(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.BodySize != 5 {
		t.Fatalf("%+v", h)
	}
	p, err := DecodeProperties(h.RawProps)
	if err != nil {
		t.Fatal(err)
	}
	want := allProps()
	want.ReplyTo = "replies"
	want.Headers = Table{"A": []any{true, int32(1)}, "B": uint8(255), "D": Decimal{Scale: 2, Value: -300},
		"F": Table{"n": "v"}, "I": int32(-5), "S": "abc", "T": time.Unix(0x65a0bc00, 0).UTC(), "V": nil,
		"b": int8(-128), "d": 1.5, "f": float32(1.5), "l": int64(-1), "s": int16(-2), "t": false, "x": []byte{0, 0xff}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("properties:\n got %#v\nwant %#v", p, want)
	}
	if b := AppendHeaderFrame(nil, 1, ClassBasic, 5, h.RawProps); !bytes.Equal(b, unhex(t, rabbitContentHeader)) {
		t.Fatal("header frame re-encode differs")
	}
	body := readOne(t, rabbitContentBody)
	if string(body.Payload) != "hello" {
		t.Fatalf("body %q", body.Payload)
	}
}
