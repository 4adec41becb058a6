package queue

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Registry holds the queue types a broker runs, keyed by x-queue-type. It
// is filled at start-up and only read afterwards.
type Registry struct {
	types map[string]Type
	// known are the x-queue-type values RabbitMQ has, by their module
	// names: a declaration naming one of them is checked as RabbitMQ
	// checks it even when the broker runs no such type.
	known map[string]string
}

// NewRegistry returns a registry with no types.
func NewRegistry() *Registry {
	return &Registry{types: map[string]Type{}, known: map[string]string{
		"classic": "rabbit_classic_queue",
		"quorum":  "rabbit_quorum_queue",
		"stream":  "rabbit_stream_queue",
	}}
}

// Register adds t under its name, replacing a type of that name.
func (r *Registry) Register(t Type) {
	i := t.Info()
	r.types[i.Name] = t
	r.known[i.Name] = i.Module
}

// Lookup returns the type registered as name.
func (r *Registry) Lookup(name string) (Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered types, sorted.
func (r *Registry) Names() []string { return slices.Sorted(maps.Keys(r.types)) }

// TypeName returns the queue type args name ("classic" without one), or an
// *ArgError for a value that is not a known type.
func (r *Registry) TypeName(args map[string]any) (string, error) {
	v, ok := args["x-queue-type"]
	if !ok {
		return "classic", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &ArgError{"x-queue-type", fmt.Sprintf("{unacceptable_type,%s}", typeName(v))}
	}
	if _, known := r.known[s]; !known {
		return "", &ArgError{"x-queue-type", fmt.Sprintf("\"unsupported queue type '%s'\"", s)}
	}
	return s, nil
}

// Check validates a new queue's declaration in RabbitMQ 3.10.8's order,
// so that of several faults the one RabbitMQ names is reported: the type
// of x-dead-letter-exchange (rabbit_channel checks it first, whatever the
// queue type), x-queue-type, the values of the arguments the type takes
// (ParseArgs, in its order, then the type's CheckArgs), the arguments the
// type refuses (RabbitMQ names the first in the client's table order,
// which a decoded table does not keep: here the first in TypeInfo.Refused),
// then the flags (replicated types are durable, not exclusive, not
// auto-delete), then a *RefusedError of CheckArgs. It returns the type and
// the limits the arguments set.
func (r *Registry) Check(d *Decl) (Type, Limits, error) {
	if v, ok := d.Args["x-dead-letter-exchange"]; ok {
		if _, isStr := v.(string); !isStr {
			return nil, Limits{}, &ArgTypeError{"x-dead-letter-exchange", typeName(v)}
		}
	}
	name, err := r.TypeName(d.Args)
	if err != nil {
		return nil, Limits{}, err
	}
	t, ok := r.types[name]
	if !ok {
		return nil, Limits{}, &ArgError{"x-queue-type", fmt.Sprintf("\"unsupported queue type '%s'\"", name)}
	}
	info := t.Info()
	valid := maps.Clone(d.Args)
	for _, a := range info.Refused {
		delete(valid, a)
	}
	l, err := ParseArgs(valid)
	if err != nil {
		return t, l, err
	}
	var own *RefusedError // the type's declare check, reported after the flags
	if info.CheckArgs != nil {
		if err := info.CheckArgs(valid); err != nil && !errors.As(err, &own) {
			return t, l, err
		}
	}
	for _, a := range info.Refused {
		if _, ok := d.Args[a]; ok {
			return t, l, &TypeArgError{Arg: a, Module: info.Module}
		}
	}
	if info.Replicated {
		switch {
		case !d.Durable:
			return t, l, &PropertyError{"non-durable"}
		case d.Exclusive:
			return t, l, &PropertyError{"exclusive-owner"}
		case d.AutoDelete:
			return t, l, &PropertyError{"auto-delete"}
		}
	}
	if own != nil {
		return t, l, own
	}
	return t, l, nil
}

// Compared returns the arguments a re-declaration of a queue declared
// with args must repeat (TypeInfo.Compared), nil for a type the registry
// does not run.
func (r *Registry) Compared(args map[string]any) []string {
	name, err := r.TypeName(args)
	if err != nil {
		return nil
	}
	if t, ok := r.types[name]; ok {
		return t.Info().Compared
	}
	return nil
}

// Compared lists the arguments each of RabbitMQ 3.10's queue types
// compares on re-declaration, in its order (RabbitMQ 3.10.8, probed).
var (
	ClassicCompared = []string{"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
		"x-single-active-consumer", "x-queue-type", "x-queue-master-locator"}
	QuorumCompared = []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
		"x-overflow", "x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size", "x-delivery-limit",
		"x-message-ttl", "x-queue-leader-locator"}
	// Warren's x-stream-partitions and x-stream-partition-by come last:
	// they are immutable too.
	StreamCompared = []string{"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
		"x-initial-cluster-size", "x-queue-leader-locator", "x-stream-partitions", "x-stream-partition-by"}
)

// Refused lists the arguments each of RabbitMQ 3.10's queue types refuses,
// for types that take its declarations.
var (
	ClassicRefused = []string{"x-dead-letter-strategy", "x-delivery-limit", "x-initial-cluster-size", "x-max-age",
		"x-max-in-memory-bytes", "x-max-in-memory-length", "x-queue-leader-locator",
		"x-quorum-initial-group-size", "x-stream-max-segment-size-bytes"}
	QuorumRefused = []string{"x-initial-cluster-size", "x-max-age", "x-max-priority", "x-queue-master-locator",
		"x-queue-mode", "x-queue-version", "x-stream-max-segment-size-bytes"}
	StreamRefused = []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-delivery-limit", "x-expires", "x-max-in-memory-bytes", "x-max-in-memory-length",
		"x-max-length", "x-max-priority", "x-message-ttl", "x-overflow", "x-queue-master-locator",
		"x-queue-mode", "x-queue-version", "x-quorum-initial-group-size", "x-single-active-consumer"}
)

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
