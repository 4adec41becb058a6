// Command group-worker is one worker of a Warren consumer group over a
// partitioned stream, in Go with amqp091-go. Start two (or more): the
// broker splits the stream's partitions between them, and each resumes
// where the group's committed offset is after a restart.
//
//	go run ./examples/streams/group-worker -name w1
//	go run ./examples/streams/group-worker -name w2
//	go run ./examples/streams/group-worker -publish 100
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	name := flag.String("name", "worker", "consumer tag of this worker")
	publish := flag.Int("publish", 0, "publish this many keyed messages and exit")
	flag.Parse()

	conn, err := amqp.Dial(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	// A stream of 4 partitions; declaring it again with the same
	// arguments is harmless.
	if _, err := ch.QueueDeclare("orders", true, false, false, false, amqp.Table{
		"x-queue-type": "stream", "x-stream-partitions": int32(4),
	}); err != nil {
		log.Fatal(err)
	}

	if *publish > 0 {
		if err := ch.Confirm(false); err != nil {
			log.Fatal(err)
		}
		for i := range *publish {
			// Messages with one key go to one partition, in order.
			customer := fmt.Sprint("customer-", i%10)
			dc, err := ch.PublishWithDeferredConfirm("", "orders", false, false, amqp.Publishing{
				Body:    []byte(fmt.Sprintf("order %d of %s", i, customer)),
				Headers: amqp.Table{"x-stream-partition-key": customer},
			})
			if err != nil || !dc.Wait() {
				log.Fatalf("publish %d: not confirmed (%v)", i, err)
			}
		}
		log.Printf("published %d orders", *publish)
		return
	}

	// A stream needs manual acks and a prefetch per consumer.
	if err := ch.Qos(50, 0, false); err != nil {
		log.Fatal(err)
	}
	ds, err := ch.Consume("orders", *name, false, false, false, false, amqp.Table{
		"x-stream-group":  "billing", // join the group "billing"
		"x-stream-offset": "first",   // where a partition the group never committed starts
	})
	if err != nil {
		log.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	for {
		select {
		case d, ok := <-ds:
			if !ok {
				log.Print("the broker cancelled this worker")
				return
			}
			log.Printf("%s: partition %v offset %v: %s", *name, d.Headers["x-stream-partition"], d.Headers["x-stream-offset"], d.Body)
			// The ack moves the group's committed offset.
			if err := d.Ack(false); err != nil {
				log.Fatal(err)
			}
		case <-stop:
			return
		}
	}
}
