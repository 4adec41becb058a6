package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// argList is a repeatable "k=v" flag (--queue-arg, --consume-arg) whose
// values are typed by typedValue. Later keys replace earlier ones.
type argList struct {
	keys []string
	vals map[string]any
}

func (a *argList) String() string {
	if a == nil {
		return ""
	}
	var parts []string
	for _, k := range a.keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, a.vals[k]))
	}
	return strings.Join(parts, ",")
}

func (a *argList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	a.put(k, typedValue(v))
	return nil
}

func (a *argList) put(k string, v any) {
	if a.vals == nil {
		a.vals = map[string]any{}
	}
	if _, seen := a.vals[k]; !seen {
		a.keys = append(a.keys, k)
	}
	a.vals[k] = v
}

// table is the arguments as an AMQP field table (nil when empty).
func (a *argList) table() amqp.Table {
	if a == nil || len(a.vals) == 0 {
		return nil
	}
	t := amqp.Table{}
	for k, v := range a.vals {
		t[k] = v
	}
	return t
}

// typedValue types a flag value for a field table: a decimal integer is a
// long (int64), true and false are booleans, anything else is a string.
// A value in double quotes is the string between them ("\"10\"" is the
// string 10).
func typedValue(v string) any {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	return v
}

// intervalRE is an x-stream-offset interval as RabbitMQ reads it: a
// number and one of the units Y M D h m s.
var intervalRE = regexp.MustCompile(`^[0-9]+[YMDhms]$`)

// streamOffset is the x-stream-offset value of a --stream-offset flag:
// first, last and next as strings, a number as a long, an interval such as
// 10m as a string.
func streamOffset(s string) (any, error) {
	switch s {
	case "first", "last", "next":
		return s, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return nil, fmt.Errorf("--stream-offset %d: offsets are not negative", n)
		}
		return n, nil
	}
	if intervalRE.MatchString(s) {
		return s, nil
	}
	return nil, fmt.Errorf("--stream-offset %q: want first, last, next, an offset or an interval such as 10m (units Y M D h m s)", s)
}

// validateQueueType checks the queue type and consumer flags against each
// other and fills in what the type implies (durable quorum queues and
// streams, x-queue-type, x-stream-offset).
func (c *Config) validateQueueType() error {
	if t, ok := c.QueueArgs.vals["x-queue-type"].(string); ok && c.QueueType == "" {
		c.QueueType = t
	}
	switch c.QueueType {
	case "", "classic":
	case "quorum", "stream":
		c.DurableQueues = true
	default:
		return fmt.Errorf("--queue-type %q: want classic, quorum or stream", c.QueueType)
	}
	if t, ok := c.QueueArgs.vals["x-queue-type"]; ok && t != c.QueueType {
		return fmt.Errorf("--queue-arg x-queue-type=%v contradicts --queue-type %s", t, c.QueueType)
	}
	if c.StreamOffset != "" {
		if c.QueueType != "stream" {
			return errors.New("--stream-offset needs --queue-type stream")
		}
		v, err := streamOffset(c.StreamOffset)
		if err != nil {
			return err
		}
		if o, ok := c.ConsumeArgs.vals["x-stream-offset"]; ok && o != v {
			return fmt.Errorf("--consume-arg x-stream-offset=%v contradicts --stream-offset %s", o, c.StreamOffset)
		}
		c.ConsumeArgs.put("x-stream-offset", v)
	}
	if err := c.validateGroups(); err != nil {
		return err
	}
	if c.QueueType == "stream" && c.Consumers > 0 && c.ConnectionsOnly == 0 {
		if c.AutoAck {
			return errors.New("--queue-type stream: stream consumers need manual acks, drop --auto-ack")
		}
		if c.Prefetch <= 0 {
			return errors.New("--queue-type stream: stream consumers need a prefetch, set --prefetch N")
		}
	}
	if c.ConsumersAfterPublish && c.ConsumerDelay > 0 {
		return errors.New("--consumers-after-publish and --consumer-delay: choose one")
	}
	c.QueueArgsJSON = c.QueueArgs.table()
	c.ConsumeArgsJSON = c.ConsumeArgs.table()
	return nil
}

// queueArgs is the queue.declare arguments: --queue-arg plus x-queue-type.
func (c *Config) queueArgs() amqp.Table {
	t := c.QueueArgs.table()
	if c.QueueType != "" {
		if t == nil {
			t = amqp.Table{}
		}
		t["x-queue-type"] = c.QueueType
	}
	if c.Partitions > 0 {
		t["x-stream-partitions"] = int64(c.Partitions)
	}
	return t
}
