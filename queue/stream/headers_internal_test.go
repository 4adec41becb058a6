package stream

import (
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
)

func BenchmarkReadHeaders(b *testing.B) {
	p := amqp.Properties{ContentType: "application/json", DeliveryMode: 2, Headers: amqp.Table{
		"trace-id": "4bf92f3577b34da6a3ce929d0e0e4736", "tenant": "acme", "attempt": int32(1),
		"x-stream-partition-key": "order-17",
	}}
	props, _ := p.Append(nil)
	idx, _ := amqp.IndexProperties(props)
	raw := idx.HeadersRaw(props)
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			amqp.IndexProperties(props)
		}
	})
	b.Run("lookup", func(b *testing.B) {
		b.ReportAllocs()
		var vals [3]any
		for range b.N {
			amqp.TableLookup(raw, streamHeaders, vals[:])
		}
	})
	b.Run("readHeaders", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var h publishHeaders
			readHeaders(raw, &h)
		}
	})
}

// BenchmarkCheckAndRoute is the header work of a keyed publish to a
// partitioned stream: CheckPublish, then the routing Publish does.
func BenchmarkCheckAndRoute(b *testing.B) {
	typ := NewType(Config{Dir: b.TempDir()})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1, Args: map[string]any{"x-stream-partitions": int64(6)}}
	l, _ := queue.ParseArgs(nil)
	qq, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		b.Fatal(err)
	}
	q := qq.(*Queue)
	defer q.Stop()
	p := amqp.Properties{ContentType: "application/json", DeliveryMode: 2, Headers: amqp.Table{
		"trace-id": "4bf92f3577b34da6a3ce929d0e0e4736", "tenant": "acme", "attempt": int32(1),
		"x-stream-partition-key": "order-17",
	}}
	props, _ := p.Append(nil)
	b.ReportAllocs()
	for range b.N {
		idx, _ := amqp.IndexProperties(props) // the broker's, once per publish
		m := &queue.Message{Props: props, Headers: idx.HeadersRaw(props), HeadersIndexed: true}
		if err := q.CheckPublish(m); err != nil {
			b.Fatal(err)
		}
		var local publishHeaders
		if _, err := q.route(m, headersOf(m, false, &local)); err != nil {
			b.Fatal(err)
		}
	}
}
