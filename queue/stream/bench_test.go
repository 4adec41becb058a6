package stream_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream"
)

// BenchmarkKeyedPublish is the broker's path of a keyed publish to a
// partitioned stream: CheckPublish (the channel's check before routing)
// then Type.Publish, with the message's properties as the broker built
// them (a few application headers beside the partition key). The writers
// sync in the background; the benchmark waits for the last confirm.
func BenchmarkKeyedPublish(b *testing.B) {
	typ := stream.NewType(stream.Config{Dir: b.TempDir()})
	d := queue.Decl{VHost: "/", Name: "s", Durable: true, ID: 1, Args: map[string]any{"x-stream-partitions": int64(6)}}
	l, _ := queue.ParseArgs(nil)
	q, err := typ.New(d, l, queue.Hooks{})
	if err != nil {
		b.Fatal(err)
	}
	defer q.(queue.Stopper).Stop()
	const keys = 1024
	props := make([][]byte, keys)
	for i := range props {
		p := amqp.Properties{ContentType: "application/json", DeliveryMode: 2, Headers: amqp.Table{
			"trace-id": "4bf92f3577b34da6a3ce929d0e0e4736", "tenant": "acme", "attempt": int32(1),
			"x-stream-partition-key": "order-" + strconv.Itoa(i),
		}}
		if props[i], err = p.Append(nil); err != nil {
			b.Fatal(err)
		}
	}
	body := make([]byte, 1024)
	qs := []queue.Queue{q}
	pc := q.(queue.PublishChecker)
	var wg sync.WaitGroup
	done := func(err error) {
		if err != nil {
			b.Error(err)
		}
		wg.Done()
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := range b.N {
		m := newPublished(props[i%keys], body)
		if err := pc.CheckPublish(m); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		typ.Publish(m, qs, nil, done)
	}
	wg.Wait()
}

// newPublished builds a message as the broker does for a publish
// (server's newMessage): its properties are indexed once.
func newPublished(props, body []byte) *queue.Message {
	idx, _ := amqp.IndexProperties(props)
	return &queue.Message{Props: props, Body: body, Persistent: idx.DeliveryMode == 2, Priority: idx.Priority,
		Headers: idx.HeadersRaw(props), HeadersIndexed: true}
}
