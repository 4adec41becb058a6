// Command firstmsg waits for the first message of a queue (basic.get,
// retried until the broker answers) and exits; scripts/recovery-bench.sh
// times it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	queue := flag.String("queue", "", "queue to read")
	flag.Parse()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		conn, err := amqp.Dial(*url)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ch, err := conn.Channel()
		if err == nil {
			if _, ok, err := ch.Get(*queue, false); err == nil && ok {
				conn.Close()
				return
			}
		}
		conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "firstmsg: no message within 5 minutes")
	os.Exit(1)
}
