// Package amqpopen opens a channel on a new AMQP 0-9-1 connection, the
// first step the tools' short-lived clients share (internal/jepsen's
// workers, bench/failover, cmd/warren-perf's declares).
package amqpopen

import amqp091 "github.com/rabbitmq/amqp091-go"

// Channel dials with dial and opens a channel on the connection. On an
// error nothing stays open; else closing the connection closes the
// channel too.
func Channel(dial func() (*amqp091.Connection, error)) (*amqp091.Connection, *amqp091.Channel, error) {
	conn, err := dial()
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}
