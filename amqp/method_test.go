package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMethodNamesAndIDs(t *testing.T) {
	want := strings.Fields(`ConnectionStart ConnectionStartOk ConnectionSecure ConnectionSecureOk
		ConnectionTune ConnectionTuneOk ConnectionOpen ConnectionOpenOk ConnectionClose ConnectionCloseOk
		ConnectionBlocked ConnectionUnblocked ConnectionUpdateSecret ConnectionUpdateSecretOk ChannelOpen ChannelOpenOk ChannelFlow ChannelFlowOk
		ChannelClose ChannelCloseOk AccessRequest AccessRequestOk ExchangeDeclare ExchangeDeclareOk ExchangeDelete ExchangeDeleteOk
		ExchangeBind ExchangeBindOk ExchangeUnbind ExchangeUnbindOk QueueDeclare QueueDeclareOk QueueBind
		QueueBindOk QueuePurge QueuePurgeOk QueueDelete QueueDeleteOk QueueUnbind QueueUnbindOk BasicQos
		BasicQosOk BasicConsume BasicConsumeOk BasicCancel BasicCancelOk BasicPublish BasicReturn
		BasicDeliver BasicGet BasicGetOk BasicGetEmpty BasicAck BasicReject BasicRecoverAsync BasicRecover
		BasicRecoverOk BasicNack ConfirmSelect ConfirmSelectOk TxSelect TxSelectOk TxCommit TxCommitOk
		TxRollback TxRollbackOk`)
	var got []string
	for _, m := range allMethods() {
		got = append(got, reflect.TypeOf(m).Elem().Name())
		if n := MethodName(m.ClassID(), m.MethodID()); n != m.Name() {
			t.Errorf("MethodName(%d,%d) = %q, want %q", m.ClassID(), m.MethodID(), n, m.Name())
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("methods:\n got %v\nwant %v", got, want)
	}
	if MethodName(60, 999) != "" {
		t.Error("MethodName of unknown ids should be empty")
	}
	for _, tc := range []struct {
		m           Method
		class, meth uint16
		name        string
		content     bool
		sync        bool
	}{
		{&BasicPublish{}, 60, 40, "basic.publish", true, false},
		{&BasicGetOk{}, 60, 71, "basic.get-ok", true, true},
		{&QueueDeclare{}, 50, 10, "queue.declare", false, true},
		{&ConnectionBlocked{}, 10, 60, "connection.blocked", false, false},
		{&ConnectionUnblocked{}, 10, 61, "connection.unblocked", false, false},
		{&ExchangeUnbindOk{}, 40, 51, "exchange.unbind-ok", false, true},
		{&ConfirmSelect{}, 85, 10, "confirm.select", false, true},
		{&BasicAck{}, 60, 80, "basic.ack", false, false},
	} {
		if tc.m.ClassID() != tc.class || tc.m.MethodID() != tc.meth || tc.m.Name() != tc.name ||
			tc.m.HasContent() != tc.content || tc.m.Synchronous() != tc.sync {
			t.Errorf("%T: got (%d,%d,%q,content=%v,sync=%v)", tc.m, tc.m.ClassID(), tc.m.MethodID(),
				tc.m.Name(), tc.m.HasContent(), tc.m.Synchronous())
		}
	}
	if !ServerReceives(ClassBasic, MethodBasicPublish) || ServerReceives(ClassBasic, MethodBasicDeliver) {
		t.Error("ServerReceives wrong for basic.publish/basic.deliver")
	}
}

// fillNonZero sets every field of the struct pointed to by m to a distinct
// non-zero value derived from seed.
func fillNonZero(m Method, seed int) {
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		n := seed*31 + i + 1
		switch f.Interface().(type) {
		case bool:
			f.SetBool(true)
		case uint8:
			f.SetUint(uint64(0x80 | n&0x7f))
		case uint16:
			f.SetUint(uint64(0x8000 | n))
		case uint32:
			f.SetUint(uint64(0x80000000 | n))
		case uint64:
			f.SetUint(1<<63 | uint64(n))
		case string:
			f.SetString(fmt.Sprintf("%s-%d-\x00\xff", v.Type().Field(i).Name, n))
		case Table:
			f.Set(reflect.ValueOf(Table{"k": int32(n), "s": "v", "nested": Table{"b": true}}))
		case time.Time:
			f.Set(reflect.ValueOf(time.Unix(int64(n), 0).UTC()))
		default:
			panic(fmt.Sprintf("unhandled field type %s", f.Type()))
		}
	}
}

func TestMethodRoundTripAll(t *testing.T) {
	for i, m := range allMethods() {
		t.Run(m.Name(), func(t *testing.T) {
			fillNonZero(m, i)
			frame, err := AppendMethodFrame([]byte("prefix"), 7, m)
			if err != nil {
				t.Fatal(err)
			}
			if string(frame[:6]) != "prefix" {
				t.Fatal("prefix clobbered")
			}
			fr := NewFrameReader(bytes.NewReader(frame[6:]), 0)
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != FrameMethod || f.Channel != 7 {
				t.Fatalf("frame %v", f)
			}
			got, err := DecodeMethod(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, m)
			}
			// The zero value round-trips too (empty tables decode as nil).
			zero := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Method)
			args, err := zero.AppendArgs(nil)
			if err != nil {
				t.Fatal(err)
			}
			payload := append([]byte{byte(m.ClassID() >> 8), byte(m.ClassID()), byte(m.MethodID() >> 8), byte(m.MethodID())}, args...)
			got, err = DecodeMethod(payload)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, zero) {
				t.Fatalf("zero round trip:\n got %#v\nwant %#v", got, zero)
			}
			// Every strict prefix of the arguments is a 501 with the ids.
			full := f.Payload
			for n := 4; n < len(full); n++ {
				_, err := DecodeMethod(full[:n])
				e := wantCode(t, err, FrameError)
				if e.ClassID != m.ClassID() || e.MethodID != m.MethodID() {
					t.Fatalf("prefix %d: ids (%d,%d)", n, e.ClassID, e.MethodID)
				}
			}
			// Trailing bytes are a 501 too, as in RabbitMQ.
			_, err = DecodeMethod(append(append([]byte{}, full...), 0))
			wantCode(t, err, FrameError)
		})
	}
}

func TestDecodedStringsDoNotAlias(t *testing.T) {
	m := &BasicPublish{Exchange: "exchange", RoutingKey: "key"}
	frame, _ := AppendMethodFrame(nil, 1, m)
	payload := frame[FrameHeaderSize : len(frame)-1]
	got, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'X'
	}
	if p := got.(*BasicPublish); p.Exchange != "exchange" || p.RoutingKey != "key" {
		t.Fatalf("decoded strings alias the input: %+v", p)
	}
}

const goldenConnectionStart = `
01 0000 0000002f                 // method frame, channel 0, size 47
000a 000a                        // connection.start
00 09                            // version 0-9
00000013                         // server-properties, 19 bytes
  07 70726f64756374 53 00000006 57617272656e // "product" S "Warren"
00000005 504c41494e              // mechanisms "PLAIN"
00000005 656e5f5553              // locales "en_US"
ce`

const goldenBasicPublish = `
01 0001 0000000d                 // method frame, channel 1, size 13
003c 0028                        // basic.publish
0000                             // reserved-1
02 6578                          // exchange "ex"
02 726b                          // routing-key "rk"
01                               // mandatory=1 immediate=0
ce`

const goldenBasicDeliver = `
01 0001 00000015                 // method frame, channel 1, size 21
003c 003c                        // basic.deliver
04 63746167                      // consumer-tag "ctag"
0000000000000001                 // delivery-tag 1
01                               // redelivered
00                               // exchange ""
01 71                            // routing-key "q"
ce`

const goldenQueueDeclare = `
01 0002 00000014                 // method frame, channel 2, size 20
0032 000a                        // queue.declare
0000                             // reserved-1
01 71                            // queue "q"
1d                               // passive, exclusive, auto-delete, no-wait (bits 0,2,3,4)
00000007 01 78 49 00000005       // arguments {"x": I 5}
ce`

const goldenConnectionClose = `
01 0000 0000001b                 // method frame, channel 0, size 27
000a 0032                        // connection.close
0194                             // 404
10 4e4f545f464f554e44202d206e6f2071 // "NOT_FOUND - no q"
0032 000a                        // failing method queue.declare
ce`

func TestGoldenMethods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		channel uint16
		m       Method
		hex     string
	}{
		{"connection.start", 0, &ConnectionStart{VersionMajor: 0, VersionMinor: 9,
			ServerProperties: Table{"product": "Warren"}, Mechanisms: "PLAIN", Locales: "en_US"}, goldenConnectionStart},
		{"basic.publish", 1, &BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true}, goldenBasicPublish},
		{"basic.deliver", 1, &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Redelivered: true, RoutingKey: "q"}, goldenBasicDeliver},
		{"queue.declare", 2, &QueueDeclare{Queue: "q", Passive: true, Exclusive: true, AutoDelete: true, NoWait: true,
			Arguments: Table{"x": int32(5)}}, goldenQueueDeclare},
		{"connection.close", 0, &ConnectionClose{ReplyCode: NotFound, ReplyText: "NOT_FOUND - no q",
			ReplyClassID: ClassQueue, ReplyMethodID: MethodQueueDeclare}, goldenConnectionClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.hex)
			got, err := AppendMethodFrame(nil, tc.channel, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encode:\n got %x\nwant %x", got, want)
			}
			f, err := NewFrameReader(bytes.NewReader(want), 0).ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeMethod(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, tc.m) {
				t.Fatalf("decode:\n got %#v\nwant %#v", m, tc.m)
			}
		})
	}
}

func TestDecodeMethodErrors(t *testing.T) {
	_, err := DecodeMethod([]byte{0, 60})
	wantCode(t, err, FrameError)
	_, err = DecodeMethod([]byte{0, 60, 3, 0xe7})
	e := wantCode(t, err, CommandInvalid)
	if e.ClassID != 60 || e.MethodID != 999 || !e.Hard() {
		t.Fatalf("unknown method error %+v", e)
	}
	_, err = DecodeMethod([]byte{3, 0xe7, 0, 10})
	wantCode(t, err, CommandInvalid)
	// Bad field-table tag inside queue.declare arguments.
	_, err = DecodeMethod([]byte{0, 50, 0, 10, 0, 0, 1, 'q', 0, 0, 0, 0, 4, 1, 'k', 'Z', 0})
	e = wantCode(t, err, FrameError)
	if e.ClassID != 50 || e.MethodID != 10 {
		t.Fatalf("ids %+v", e)
	}
}

func TestAppendErrors(t *testing.T) {
	long := strings.Repeat("x", 256)
	dst := []byte("keep")
	out, err := AppendMethodFrame(dst, 1, &BasicPublish{RoutingKey: long})
	if !errors.Is(err, ErrStringTooLong) {
		t.Fatalf("err = %v", err)
	}
	if string(out) != "keep" {
		t.Fatalf("dst not restored: %q", out)
	}
	if _, err := AppendMethodFrame(nil, 1, &BasicPublish{RoutingKey: long[:255]}); err != nil {
		t.Fatalf("255-byte shortstr: %v", err)
	}
	_, err = AppendMethodFrame(nil, 1, &QueueDeclare{Arguments: Table{"bad": struct{}{}}})
	if !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("err = %v", err)
	}
}

func TestErrorType(t *testing.T) {
	e := Errorf(NotFound, ClassQueue, MethodQueueDeclare, "no queue '%s' in vhost '/'", "q")
	if e.Error() != "NOT_FOUND - no queue 'q' in vhost '/'" {
		t.Errorf("Error() = %q", e.Error())
	}
	if e.Hard() {
		t.Error("404 is soft")
	}
	hard := []uint16{320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541}
	soft := []uint16{200, 311, 312, 313, 403, 404, 405, 406}
	for _, c := range hard {
		if !(&Error{Code: c}).Hard() {
			t.Errorf("%d should be hard", c)
		}
	}
	for _, c := range soft {
		if (&Error{Code: c}).Hard() {
			t.Errorf("%d should be soft", c)
		}
	}
	for code, want := range map[uint16]string{200: "REPLY_SUCCESS", 311: "CONTENT_TOO_LARGE", 312: "NO_ROUTE",
		320: "CONNECTION_FORCED", 403: "ACCESS_REFUSED", 404: "NOT_FOUND", 406: "PRECONDITION_FAILED",
		501: "FRAME_ERROR", 503: "COMMAND_INVALID", 530: "NOT_ALLOWED", 541: "INTERNAL_ERROR", 999: "UNKNOWN_REPLY_CODE"} {
		if got := ReplyText(code); got != want {
			t.Errorf("ReplyText(%d) = %q, want %q", code, got, want)
		}
	}
	long := &Error{Code: 406, Text: strings.Repeat("y", 300)}
	if len(long.ReplyString()) != 255 {
		t.Error("ReplyString not truncated to 255")
	}
}
