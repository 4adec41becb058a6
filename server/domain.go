package server

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/binding"
	"github.com/warrenmq/warren/exchange"
	"github.com/warrenmq/warren/persist"
	"github.com/warrenmq/warren/queue"
)

// The vhost's domain API: what declaring, deleting, binding, purging,
// publishing and getting mean, whoever asks. The AMQP method handlers
// (queue_methods.go, exchange_methods.go, ...) decode a method, call one of
// these and encode the reply; the admin API (admin_session.go) calls the
// same ones for the management API. Errors are the types of
// domain_errors.go, which replyError alone turns into reply codes and
// RabbitMQ's texts.
//
// Permission checks are part of the operations, because where they fall
// is observable: a declaration checks the alternate or dead-letter
// exchange's permissions only when it creates the object, after the
// arguments were validated, as RabbitMQ does. The Actor says whose
// permissions apply.
//
// Each method takes v.mu itself; none may be called with it held.

// Actor is who runs a domain operation.
type Actor struct {
	// User is whose permissions apply (and whose name refusals carry).
	User string
	// System is the broker itself (definitions imports): no permission
	// checks.
	System bool
	// Conn is the acting connection's id: another connection's exclusive
	// queue is locked to it (405). 0 is no connection (the management
	// API), to which every exclusive queue is locked.
	Conn uint64
}

// check refuses unless a has perm on the resource kind ("queue" or
// "exchange") called name.
func (v *vhost) check(a Actor, perm auth.Perm, kind, name string) error {
	if a.System {
		return nil
	}
	if kind == "exchange" && name == "" {
		name = defaultExchangeResource
	}
	if v.srv.auth.Check(a.User, v.name, perm, name) {
		return nil
	}
	return &AccessError{Reason: NoPermission, Kind: kind, Name: name, VHost: v.name, User: a.User}
}

// checkTopic applies topic permissions to a routing key used with a topic
// exchange: Write for publishing, Read for binding.
func (v *vhost) checkTopic(a Actor, e *exchange.Exchange, perm auth.Perm, key string) error {
	if e == nil || e.Kind != exchange.Topic || a.System {
		return nil
	}
	vars := auth.Vars{Username: a.User, VHost: v.name}
	if v.srv.auth.CheckTopic(a.User, v.name, e.Name, perm, key, vars) {
		return nil
	}
	return &AccessError{Reason: NoTopicPermission, Name: key, Exchange: e.Name, VHost: v.name, User: a.User}
}

// queueFor looks a queue up for an operation by a: NotFoundError when
// missing, LockedError when another connection holds it exclusively.
func (v *vhost) queueFor(a Actor, name string) (queue.Queue, error) {
	q := v.lookupQueue(name)
	if q == nil {
		return nil, &NotFoundError{Kind: "queue", Name: name, VHost: v.name}
	}
	if err := homeDown(q); err != nil {
		return nil, err
	}
	if d := q.Decl(); d.Exclusive && d.Owner != a.Conn {
		return nil, &LockedError{Name: name, VHost: v.name}
	}
	return q, nil
}

// target is the queue an operation that needs perm acts on: after the
// permission check, queueFor's, or with anyOwner the queue whoever owns it.
func (v *vhost) target(a Actor, perm auth.Perm, name string, anyOwner bool) (queue.Queue, error) {
	if err := v.check(a, perm, "queue", name); err != nil {
		return nil, err
	}
	if !anyOwner {
		return v.queueFor(a, name)
	}
	if q := v.lookupQueue(name); q != nil {
		return q, homeDown(q)
	}
	return nil, &NotFoundError{Kind: "queue", Name: name, VHost: v.name}
}

// QueueDeclare is a queue declaration (queue.declare).
type QueueDeclare struct {
	// Name is the queue's; "" asks for a generated amq.gen-* name (a
	// passive declaration looks up '', as RabbitMQ does).
	Name       string
	Durable    bool
	Exclusive  bool // owned by the Actor's connection
	AutoDelete bool
	// Args are the x-arguments; the queue keeps the map.
	Args map[string]any
	// Passive only looks the queue up.
	Passive bool
}

// QueueDeclared is the queue a declaration found or created.
type QueueDeclared struct {
	Name      string
	Messages  int // ready
	Consumers int
}

// DeclareQueue creates the queue d names, or checks that the existing one
// is equivalent (and resets its x-expires clock). As in RabbitMQ, only a
// new queue's declaration is checked (Registry.Check); a re-declaration is
// compared with the queue, its argument values unchecked.
func (v *vhost) DeclareQueue(a Actor, d QueueDeclare) (QueueDeclared, error) {
	name := d.Name
	if d.Passive {
		q, err := v.queueFor(a, name)
		if err != nil {
			return QueueDeclared{}, err
		}
		return v.declared(name, q), nil
	}
	if name == "" {
		name = genName("amq.gen-")
	} else if strings.HasPrefix(name, "amq.") {
		return QueueDeclared{}, &AccessError{Reason: ReservedName, Kind: "queue", Name: name, VHost: v.name}
	}
	if err := v.check(a, auth.Configure, "queue", name); err != nil {
		return QueueDeclared{}, err
	}
	decl := queue.Decl{
		VHost: v.name, Name: name, Durable: d.Durable, Exclusive: d.Exclusive, AutoDelete: d.AutoDelete, Args: d.Args,
	}
	if d.Exclusive {
		decl.Owner = a.Conn
	}
	if v.srv.clustered() {
		return v.declareReplicated(a, decl)
	}
	q, err := v.openQueue(a, decl, nil)
	if err != nil {
		return QueueDeclared{}, err
	}
	v.srv.churn.queueDeclared.Add(1)
	return v.declared(name, q), nil
}

// declareReplicated is DeclareQueue in a cluster: a command of the
// metadata group (cluster_meta.go), this node the home of a new queue.
// An exclusive queue is one too, so that every node knows it (RabbitMQ
// answers 405 from all of them and routes publishes to it); its owner
// is the connection as the cluster names it (ownerKey).
func (v *vhost) declareReplicated(a Actor, decl queue.Decl) (QueueDeclared, error) {
	name := decl.Name
	if q := v.lookupQueue(name); q != nil {
		if have := q.Decl(); have.Exclusive && have.Owner != a.Conn {
			return QueueDeclared{}, &LockedError{Name: name, VHost: v.name}
		}
	}
	mq := &metaQueue{Name: name, Durable: decl.Durable, AutoDelete: decl.AutoDelete, Args: persist.EncodeArgs(decl.Args), Home: v.srv.meta.self,
		Exclusive: decl.Exclusive, Owner: v.srv.meta.ownerKey(a.Conn)}
	if isQuorumDecl(decl.Args) && v.lookupQueue(name) == nil {
		mq.Members, mq.Lead = v.srv.quorumPlacement(v.name, name, decl.Args)
	}
	_, err := v.srv.propose(&metaCmd{Op: opQueueDeclare, VHost: v.name, User: a.User, System: a.System, Queue: mq})
	if err != nil {
		return QueueDeclared{}, err
	}
	q := v.lookupQueue(name)
	if q == nil {
		return QueueDeclared{}, &NotFoundError{Kind: "queue", Name: name, VHost: v.name}
	}
	if err := homeDown(q); err != nil {
		return QueueDeclared{}, err
	}
	if err := awaitQuorum(q); err != nil {
		return QueueDeclared{}, err
	}
	v.srv.churn.queueDeclared.Add(1)
	return v.declared(name, q), nil
}

// openQueue is DeclareQueue's part under v.mu: compare with the existing
// queue, or check, admit and create a new one. r is the record of a
// replicated queue (the metadata group's Apply), nil for a node's own.
func (v *vhost) openQueue(a Actor, decl queue.Decl, r *replica) (queue.Queue, error) {
	name := decl.Name
	v.mu.Lock()
	defer v.mu.Unlock()
	if q := v.queues[name]; q != nil {
		have := q.Decl()
		locked := have.Exclusive && have.Owner != a.Conn
		if r != nil {
			// The metadata group's Apply: the owners as the cluster
			// names them, so every node reaches the same verdict.
			rec := v.replicas[name]
			locked = have.Exclusive && (rec == nil || rec.owner != r.owner)
		}
		if locked || have.Exclusive != decl.Exclusive {
			return nil, &LockedError{Name: name, VHost: v.name}
		}
		if arg, got, had := queueDifference(*have, decl, v.srv.types.Compared(have.Args)); arg != "" {
			return nil, &PreconditionError{Reason: Inequivalent, Kind: "queue", Name: name, VHost: v.name, Arg: arg, Got: got, Have: had}
		}
		q.Touch()
		return q, nil
	}
	typ, _, err := v.srv.types.Check(&decl)
	if err != nil {
		return nil, declareError(err, name, v.name)
	}
	if err := v.checkNewQueue(a, name, decl.Args); err != nil {
		return nil, err
	}
	limits, err := v.effectiveLimits(name, decl.Args)
	if err != nil {
		return nil, err
	}
	var q queue.Queue
	if r != nil {
		if t := typ.Info().Name; t != "classic" && t != "stream" && (t != "quorum" || len(r.members) == 0) {
			return nil, amqp.Errorf(amqp.NotImplemented, 0, 0, "%s queues are not supported in a Warren cluster yet: queue '%s' in vhost '%s'", t, name, v.name)
		}
		q, err = v.srv.meta.newReplica(v, typ, decl, limits, r)
	} else {
		q, err = typ.New(decl, limits, v.hooks)
	}
	if err != nil {
		return nil, declareError(err, name, v.name)
	}
	v.queues[name] = q
	if r != nil {
		v.replicas[name] = r
	}
	v.srv.churn.queueCreated.Add(1)
	return q, nil
}

// declared is declare-ok's answer for q: a replicated quorum queue's
// counts are its leader's (replicatedCounts).
func (v *vhost) declared(name string, q queue.Queue) QueueDeclared {
	if m, c, ok := v.srv.replicatedCounts(q); ok {
		return QueueDeclared{Name: name, Messages: m, Consumers: c}
	}
	if dc, ok := q.(queue.DeclareCounter); ok {
		m, c := dc.DeclareCounts()
		return QueueDeclared{Name: name, Messages: m, Consumers: c}
	}
	st := q.Stats()
	return QueueDeclared{Name: name, Messages: st.Ready, Consumers: st.Consumers}
}

// checkNewQueue runs the checks a queue passes only when it is created:
// naming a dead-letter exchange needs read on the queue and write on that
// exchange, and the vhost's max-queues limit. v.mu is held.
func (v *vhost) checkNewQueue(a Actor, name string, args map[string]any) error {
	if dlx, ok := args["x-dead-letter-exchange"].(string); ok {
		if err := v.check(a, auth.Read, "queue", name); err != nil {
			return err
		}
		if err := v.check(a, auth.Write, "exchange", dlx); err != nil {
			return err
		}
	}
	return v.admitQueue(name)
}

// queueDifference returns the first difference between the queue's
// declaration (have) and a re-declaration (got), in RabbitMQ's order: the
// durable and auto-delete flags, then the arguments the queue's type
// compares (compared), each either side's value or nil where it lacks the
// argument. arg is "" when they are equivalent.
func queueDifference(have, got queue.Decl, compared []string) (arg string, g, h any) {
	switch {
	case have.Durable != got.Durable:
		return "durable", got.Durable, have.Durable
	case have.AutoDelete != got.AutoDelete:
		return "auto_delete", got.AutoDelete, have.AutoDelete
	}
	for _, k := range compared {
		hv, gv := have.Args[k], got.Args[k]
		if !sameArg(hv, gv) && !(k == "x-queue-type" && isClassic(hv) && isClassic(gv)) {
			return k, gv, hv
		}
	}
	return "", nil, nil
}

// sameArg is RabbitMQ's equivalence of two argument values: both absent,
// or of one type class (integers of any width, or floats of any width, or
// one type) and equal.
func sameArg(a, b any) bool {
	if an, ok := queue.IntValue(a); ok {
		bn, ok := queue.IntValue(b)
		return ok && an == bn
	}
	if af, ok := floatValue(a); ok {
		bf, ok := floatValue(b)
		return ok && af == bf
	}
	return reflect.DeepEqual(a, b)
}

func floatValue(v any) (float64, bool) {
	switch f := v.(type) {
	case float32:
		return float64(f), true
	case float64:
		return f, true
	}
	return 0, false
}

// isClassic: a classic queue may be declared without x-queue-type or with
// "classic", and RabbitMQ takes either for the other.
func isClassic(v any) bool { return v == nil || v == "classic" }

// declareError wraps a refused declaration argument of queue name.
func declareError(err error, name, vhost string) error {
	var (
		ae  *queue.ArgError
		te  *queue.TypeArgError
		pe  *queue.PropertyError
		ate *queue.ArgTypeError
		re  *queue.RefusedError
	)
	if errors.As(err, &ate) || errors.As(err, &ae) || errors.As(err, &te) || errors.As(err, &pe) || errors.As(err, &re) {
		return &PreconditionError{Reason: InvalidArg, Kind: "queue", Name: name, VHost: vhost, Err: err}
	}
	return err
}

// QueueDelete is a queue deletion (queue.delete).
type QueueDelete struct {
	Name     string
	IfUnused bool // refuse while consumers are attached
	IfEmpty  bool // refuse while messages are ready
	// AnyOwner deletes another connection's exclusive queue too, as
	// RabbitMQ's management API may.
	AnyOwner bool
}

// DeleteQueue deletes a queue with its bindings and store record, and
// cancels its consumers. It returns how many messages were ready.
func (v *vhost) DeleteQueue(a Actor, d QueueDelete) (int, error) {
	q, err := v.target(a, auth.Configure, d.Name, d.AnyOwner)
	if err != nil {
		return 0, err
	}
	if (d.IfUnused || d.IfEmpty) && q.Type().Info().Name == "quorum" {
		// RabbitMQ 3.10's quorum queues refuse both conditions.
		flag := "if-unused"
		if !d.IfUnused {
			flag = "if-empty"
		}
		return 0, amqp.Errorf(amqp.NotImplemented, 0, 0, "cannot delete queue '%s' in vhost '%s'. queue.delete operations with %s flag set are not supported by quorum queues", d.Name, v.name, flag)
	}
	if r := v.replicaOf(q); r != nil {
		return v.deleteReplicated(q, r, d.IfUnused, d.IfEmpty)
	}
	n, err := v.deleteQueue(q, d.IfUnused, d.IfEmpty)
	switch {
	case errors.Is(err, queue.ErrInUse):
		return 0, &PreconditionError{Reason: InUse, Kind: "queue", Name: d.Name, VHost: v.name}
	case errors.Is(err, queue.ErrNotEmpty):
		return 0, &PreconditionError{Reason: NotEmpty, Kind: "queue", Name: d.Name, VHost: v.name}
	case err != nil:
		return 0, fmt.Errorf("delete queue: %w", err)
	}
	return n, nil
}

// QueuePurge is a queue.purge.
type QueuePurge struct {
	Name string
	// AnyOwner purges another connection's exclusive queue too, as
	// RabbitMQ's management API may.
	AnyOwner bool
}

// PurgeQueue drops a queue's ready messages and returns how many there
// were.
func (v *vhost) PurgeQueue(a Actor, d QueuePurge) (int, error) {
	q, err := v.target(a, auth.Read, d.Name, d.AnyOwner)
	if err != nil {
		return 0, err
	}
	p, ok := q.(queue.Purger)
	if !ok {
		return 0, &NotImplementedError{Op: "queue.purge", Type: q.Type().Info().Name, Queue: d.Name, VHost: v.name}
	}
	return p.Purge(), nil
}

// Getter returns the queue called name for basic.get, after the read
// check; the caller takes messages with the Getter and settles them with
// the queue.
func (v *vhost) Getter(a Actor, name string) (queue.Queue, queue.Getter, error) {
	q, err := v.target(a, auth.Read, name, false)
	if err != nil {
		return nil, nil, err
	}
	g, ok := q.(queue.Getter)
	// A stream of another node is a remoteQueue, a Getter of every type:
	// refused as the stream itself refuses.
	if !ok || q.Type().Info().Name == "stream" {
		return nil, nil, &NotImplementedError{Op: "basic.get", Type: q.Type().Info().Name, Queue: name, VHost: v.name}
	}
	if q.Type().Info().Name == "quorum" && q.Decl().Args["x-single-active-consumer"] == true {
		return nil, nil, &SingleActiveGetError{Name: name, VHost: v.name}
	}
	return q, g, nil
}

// ExchangeDeclare is an exchange declaration (exchange.declare).
type ExchangeDeclare struct {
	Name       string
	Type       string // "direct", "fanout", "topic", "headers", "x-..."
	Durable    bool
	AutoDelete bool
	Internal   bool
	// Args are the arguments (alternate-exchange); the exchange keeps the
	// map.
	Args map[string]any
	// Passive only looks the exchange up.
	Passive bool
}

// DeclareExchange creates the exchange d names, or checks that the
// existing one is equivalent.
func (v *vhost) DeclareExchange(a Actor, d ExchangeDeclare) error {
	if d.Name == "" {
		return &AccessError{Reason: DefaultExchange}
	}
	if d.Passive {
		if v.lookupExchange(d.Name) == nil {
			return &NotFoundError{Kind: "exchange", Name: d.Name, VHost: v.name}
		}
		return nil
	}
	kind, ok := exchange.ParseKind(d.Type)
	if !ok {
		return &UnknownTypeError{Type: d.Type}
	}
	if err := v.check(a, auth.Configure, "exchange", d.Name); err != nil {
		return err
	}
	decl := exchange.Decl{
		Name: d.Name, Kind: kind, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: d.Args,
	}
	if v.srv.clustered() {
		_, err := v.srv.propose(&metaCmd{Op: opExchangeDeclare, VHost: v.name, User: a.User, System: a.System, Exchange: &metaExchange{
			Name: d.Name, Kind: d.Type, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: persist.EncodeArgs(d.Args),
		}})
		return err
	}
	return v.declareExchange(a, decl)
}

// declareExchange is DeclareExchange's part under v.mu.
func (v *vhost) declareExchange(a Actor, decl exchange.Decl) error {
	d := decl
	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.exchanges[d.Name]; e != nil {
		var ie *exchange.InequivalentError
		if err := e.CheckEquivalent(decl); errors.As(err, &ie) {
			return &PreconditionError{Reason: Inequivalent, Kind: "exchange", Name: d.Name, VHost: v.name, Err: ie}
		}
		return nil
	}
	// Only new exchanges are refused the reserved prefix: an equivalent
	// re-declaration of amq.direct succeeds, as in RabbitMQ.
	if strings.HasPrefix(d.Name, "amq.") {
		return &AccessError{Reason: ReservedName, Kind: "exchange", Name: d.Name, VHost: v.name}
	}
	var ate *exchange.ArgTypeError
	if err := exchange.ValidateArgs(decl.Args); errors.As(err, &ate) {
		return &PreconditionError{Reason: InvalidArg, Kind: "exchange", Name: d.Name, VHost: v.name, Err: ate}
	}
	if ae, ok := decl.Args["alternate-exchange"].(string); ok {
		// Naming an alternate exchange: read on this one, write on it.
		if err := v.check(a, auth.Read, "exchange", d.Name); err != nil {
			return err
		}
		if err := v.check(a, auth.Write, "exchange", ae); err != nil {
			return err
		}
	}
	e := v.addExchange(decl)
	if err := v.storeExchange(e); err != nil {
		delete(v.exchanges, e.Name)
		return &StoreError{What: "exchange", Err: err}
	}
	return nil
}

// ExchangeDelete is an exchange deletion (exchange.delete).
type ExchangeDelete struct {
	Name     string
	IfUnused bool // refuse while it is the source of bindings
}

// DeleteExchange deletes an exchange and every binding to or from it. A
// missing exchange is a NotFoundError, which AMQP answers with delete-ok.
func (v *vhost) DeleteExchange(a Actor, d ExchangeDelete) error {
	if d.Name == "" {
		return &AccessError{Reason: DefaultExchange}
	}
	if strings.HasPrefix(d.Name, "amq.") {
		return &AccessError{Reason: SystemExchange, Kind: "exchange", Name: d.Name, VHost: v.name}
	}
	if err := v.check(a, auth.Configure, "exchange", d.Name); err != nil {
		return err
	}
	if v.srv.clustered() {
		_, err := v.srv.propose(&metaCmd{Op: opExchangeDelete, VHost: v.name, User: a.User, System: a.System, Name: d.Name, IfUnused: d.IfUnused})
		return err
	}
	return v.deleteExchange(d.Name, d.IfUnused)
}

// deleteExchange is DeleteExchange's part under v.mu.
func (v *vhost) deleteExchange(name string, ifUnused bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[name]
	if e == nil {
		return &NotFoundError{Kind: "exchange", Name: name, VHost: v.name}
	}
	if ifUnused && e.HasBindings() {
		return &PreconditionError{Reason: InUse, Kind: "exchange", Name: name, VHost: v.name}
	}
	v.removeExchange(e)
	return nil
}

func (v *vhost) lookupExchange(name string) *exchange.Exchange {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.exchanges[name]
}

// Binding is a binding to add or remove: from exchange Source to a queue
// or an exchange.
type Binding struct {
	Source string
	Dest   binding.Destination
	Key    string
	Args   map[string]any // kept by the exchange
}

// checkBinding is a binding's permission checks, in RabbitMQ's order:
// write on the destination, then (the default exchange refused) read on
// the source and the topic permission for the key.
func (v *vhost) checkBinding(a Actor, b Binding) error {
	kind := "queue"
	if b.Dest.Kind == binding.Exchange {
		kind = "exchange"
	}
	if err := v.check(a, auth.Write, kind, b.Dest.Name); err != nil {
		return err
	}
	if b.Source == "" || (b.Dest.Kind == binding.Exchange && b.Dest.Name == "") {
		return &AccessError{Reason: DefaultExchange}
	}
	if err := v.check(a, auth.Read, "exchange", b.Source); err != nil {
		return err
	}
	return v.checkTopic(a, v.lookupExchange(b.Source), auth.Read, b.Key)
}

// Bind adds a binding; one that exists already is left as it is.
func (v *vhost) Bind(a Actor, b Binding) error {
	if err := v.checkBinding(a, b); err != nil {
		return err
	}
	if b.Dest.Kind == binding.Queue {
		if _, err := v.queueFor(a, b.Dest.Name); err != nil {
			return err
		}
	}
	bb := binding.Binding{Dest: b.Dest, Key: b.Key, Args: b.Args}
	if v.replicatedBinding(b.Dest) {
		_, err := v.srv.propose(&metaCmd{Op: opBind, VHost: v.name, User: a.User, System: a.System, Binding: newMetaBinding(b.Source, bb)})
		return err
	}
	return v.changeBinding(b.Source, bb, true)
}

// Unbind removes a binding. As in RabbitMQ it is idempotent: a binding
// that does not exist, or whose source or destination does not, is
// already removed. Only removing an existing binding of another
// connection's exclusive queue is refused.
func (v *vhost) Unbind(a Actor, b Binding) error {
	if err := v.checkBinding(a, b); err != nil {
		return err
	}
	bb := binding.Binding{Dest: b.Dest, Key: b.Key, Args: b.Args}
	if v.replicatedBinding(b.Dest) {
		v.mu.RLock()
		err := v.lockedBinding(b.Source, bb, a.Conn)
		v.mu.RUnlock()
		if err != nil {
			return err
		}
		_, err = v.srv.propose(&metaCmd{Op: opUnbind, VHost: v.name, User: a.User, System: a.System, Binding: newMetaBinding(b.Source, bb)})
		return err
	}
	return v.unbind(b.Source, bb, a.Conn, true)
}

// changeBinding adds or removes b on exchange src after checking that both
// ends exist.
func (v *vhost) changeBinding(src string, b binding.Binding, bind bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[src]
	if e == nil {
		return &NotFoundError{Kind: "exchange", Name: src, VHost: v.name}
	}
	switch b.Dest.Kind {
	case binding.Exchange:
		if v.exchanges[b.Dest.Name] == nil {
			return &NotFoundError{Kind: "exchange", Name: b.Dest.Name, VHost: v.name}
		}
	case binding.Queue:
		if v.queues[b.Dest.Name] == nil {
			return &NotFoundError{Kind: "queue", Name: b.Dest.Name, VHost: v.name}
		}
	}
	durable := v.bindingDurable(src, b.Dest)
	if bind {
		added, err := e.Bind(b)
		if err != nil {
			return &PreconditionError{Reason: BindingRefused, Kind: "exchange", Name: src, VHost: v.name, Err: err}
		}
		if added && durable {
			if err := v.store.SaveBinding(bindingRecord(v.name, src, b)); err != nil {
				e.Unbind(b)
				return &StoreError{What: "binding", Err: err}
			}
		}
		return nil
	}
	if e.Unbind(b) {
		if durable {
			v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, src, b)))
		}
		v.maybeAutoDeleteExchange(e)
	}
	return nil
}

// lockedBinding is the LockedError of connection owner removing the
// existing binding b of exchange src to another connection's exclusive
// queue. v.mu is held.
func (v *vhost) lockedBinding(src string, b binding.Binding, owner uint64) error {
	e := v.exchanges[src]
	if e == nil || b.Dest.Kind != binding.Queue {
		return nil
	}
	q := v.queues[b.Dest.Name]
	if q == nil {
		return nil
	}
	if d := q.Decl(); d.Exclusive && d.Owner != owner {
		for _, have := range e.Bindings() {
			if have.Dest == b.Dest && have.Key == b.Key && binding.ArgsEqual(have.Args, b.Args) {
				return &LockedError{Name: b.Dest.Name, VHost: v.name}
			}
		}
	}
	return nil
}

// unbind removes b from exchange src for connection owner (Unbind); with
// checkOwner, another connection's exclusive queue keeps its binding
// (lockedBinding). The metadata group's Apply checks no owner: the
// proposing node did.
func (v *vhost) unbind(src string, b binding.Binding, owner uint64, checkOwner bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.exchanges[src]
	if e == nil {
		return nil
	}
	if b.Dest.Kind == binding.Queue {
		q := v.queues[b.Dest.Name]
		if q == nil {
			return nil
		}
		if checkOwner {
			if err := v.lockedBinding(src, b, owner); err != nil {
				return err
			}
			if d := q.Decl(); d.Exclusive && d.Owner != owner {
				return nil
			}
		}
	} else if v.exchanges[b.Dest.Name] == nil {
		return nil
	}
	if e.Unbind(b) {
		if v.bindingDurable(src, b.Dest) {
			v.logStoreErr(v.store.DeleteBinding(bindingRecord(v.name, src, b)))
		}
		v.maybeAutoDeleteExchange(e)
	}
	return nil
}

// admitQueue refuses a new queue when the vhost's max-queues limit is
// reached. v.mu must be held.
func (v *vhost) admitQueue(name string) error {
	rec, _ := v.srv.auth.VHost(v.name)
	if limit, ok := rec.Limits["max-queues"]; ok && int64(len(v.queues)) >= limit {
		return &PreconditionError{Reason: QueueLimit, Kind: "queue", Name: name, VHost: v.name, Limit: limit}
	}
	return nil
}
