package queue

import (
	"fmt"
	"maps"
)

// Queue types as x-queue-type names them. Warren runs every type as a
// classic queue, but checks declarations as RabbitMQ does, so a client
// gets the same answers.
var typeModules = map[string]string{
	"classic": "rabbit_classic_queue",
	"quorum":  "rabbit_quorum_queue",
	"stream":  "rabbit_stream_queue",
}

// typeInvalidArgs are the arguments each type refuses (RabbitMQ 3.10).
var typeInvalidArgs = map[string][]string{
	"classic": {"x-dead-letter-strategy", "x-delivery-limit", "x-initial-cluster-size", "x-max-age",
		"x-max-in-memory-bytes", "x-max-in-memory-length", "x-queue-leader-locator",
		"x-quorum-initial-group-size", "x-stream-max-segment-size-bytes"},
	"quorum": {"x-initial-cluster-size", "x-max-age", "x-max-priority", "x-queue-master-locator",
		"x-queue-mode", "x-queue-version", "x-stream-max-segment-size-bytes"},
	"stream": {"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-delivery-limit", "x-expires", "x-max-in-memory-bytes", "x-max-in-memory-length",
		"x-max-length", "x-max-priority", "x-message-ttl", "x-overflow", "x-queue-master-locator",
		"x-queue-mode", "x-queue-version", "x-quorum-initial-group-size", "x-single-active-consumer"},
}

// TypeArgError is an argument the queue's type does not take.
type TypeArgError struct {
	Arg    string
	Module string // RabbitMQ's module name of the type
}

func (e *TypeArgError) Error() string {
	return fmt.Sprintf("invalid arg '%s' of queue type %s", e.Arg, e.Module)
}

// PropertyError is a declare flag the queue's type does not allow:
// "non-durable", "exclusive-owner" or "auto-delete".
type PropertyError struct{ Property string }

func (e *PropertyError) Error() string { return fmt.Sprintf("invalid property '%s'", e.Property) }

// Type returns the queue type named by args ("classic" without one), or an
// *ArgError for a value that is not a known type.
func Type(args map[string]any) (string, error) {
	v, ok := args["x-queue-type"]
	if !ok {
		return "classic", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &ArgError{"x-queue-type", fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
	}
	if _, known := typeModules[s]; !known {
		return "", &ArgError{"x-queue-type", fmt.Sprintf("\"unsupported queue type '%s'\"", s)}
	}
	return s, nil
}

// CheckDeclare validates a declaration in RabbitMQ's order: the type, the
// values of the arguments the type takes, the arguments it refuses, then
// the flags (quorum and stream queues are durable, not exclusive, not
// auto-delete). It returns the limits the arguments set.
func CheckDeclare(args map[string]any, durable, exclusive, autoDelete bool) (Limits, error) {
	typ, err := Type(args)
	if err != nil {
		return Limits{}, err
	}
	invalid := typeInvalidArgs[typ]
	valid := maps.Clone(args)
	for _, a := range invalid {
		delete(valid, a)
	}
	l, err := ParseArgs(valid)
	if err != nil {
		return l, err
	}
	for _, a := range invalid {
		if _, ok := args[a]; ok {
			return l, &TypeArgError{Arg: a, Module: typeModules[typ]}
		}
	}
	if typ == "classic" {
		return l, nil
	}
	switch {
	case !durable:
		return l, &PropertyError{"non-durable"}
	case exclusive:
		return l, &PropertyError{"exclusive-owner"}
	case autoDelete:
		return l, &PropertyError{"auto-delete"}
	}
	return l, nil
}
