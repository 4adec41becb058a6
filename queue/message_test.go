package queue

import (
	"testing"

	"github.com/warrenmq/warren/amqp"
)

func BenchmarkWithHeader(b *testing.B) {
	p := amqp.Properties{ContentType: "application/json", DeliveryMode: 2, Headers: amqp.Table{"trace": "abc", "n": int32(1)}}
	raw, _ := p.Append(nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		WithHeader(raw, "x-stream-offset", int64(i))
	}
}
