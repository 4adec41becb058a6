package server

import (
	"github.com/warrenmq/warren/queue"
)

// Moving consumers. A quorum queue is served on a node by one object at a
// time: its replica there, or a stand-in that forwards to a member. When
// membership changes replace that object (a replica added in place of the
// stand-in, a replica removed for one, a stand-in whose member left or
// went down for one forwarding to another member), the node's consumers
// of the queue move to the new object instead of being cancelled: as in
// RabbitMQ, where a quorum queue's consumers belong to the queue, not to
// a replica, a client sees nothing of it. What they were delivered and
// not yet settled stays settleable through the object that delivered it
// (ack.Delivery.Queue): a stand-in forwards to its member, a replica that
// left its group forwards to the group (quorum.Queue.Settle). What a
// stand-in had received and not yet delivered goes back to the queue.

// moveConsumers moves the channel consumers among refs from the queue
// object from, which name's new object replaced in v, to that object, on
// a goroutine of its own (a move attaches through the queue's log, and
// callers hold v.mu or apply metadata). A consumer that cannot attach
// there (the queue went meanwhile, an exclusive consumer took it) is
// cancelled, its client told. A ref of another kind is cancelled as
// before (a home's proxy is not among them: its own node moves it).
func (v *vhost) moveConsumers(name string, from queue.Queue, refs []queue.ConsumerRef) {
	if len(refs) == 0 {
		return
	}
	go func() {
		for _, ref := range refs {
			k, ok := ref.Consumer.(*consumer)
			if !ok {
				from.RemoveConsumer(ref.Tag, ref.Consumer)
				if v.hooks.Cancel != nil {
					v.hooks.Cancel(from, ref)
				}
				continue
			}
			v.moveConsumer(k, name, from)
		}
	}()
}

// moveConsumer moves k from the queue object from to the one v serves
// name with now. Should that one be replaced while k attaches to it (a
// second membership change, whose move did not see k there yet), k moves
// on to its successor.
func (v *vhost) moveConsumer(k *consumer, name string, from queue.Queue) {
	k.moving.Lock()
	defer k.moving.Unlock()
	if k.gone.Load() || k.queue() != from {
		return // cancelled, or moved already
	}
	from.RemoveConsumer(k.tag, k)
	for range maxMoves {
		to := v.lookupQueue(name)
		if to == nil || to == from || to.Deleted() {
			break
		}
		// Set before it attaches: a stand-in that hands it deliveries
		// checks that the consumer is its own (consumer.servedBy).
		k.setQueue(to)
		if err := to.AddConsumer(k.opts); err != nil {
			v.log.Warn().Err(err).Str("vhost", v.name).Str("queue", name).Str("consumer", k.tag).Msg("a consumer could not follow its quorum queue to another replica: cancelled")
			break
		}
		if k.gone.Load() {
			// Its channel dropped it meanwhile, from the queue it read
			// before this move set the new one.
			to.RemoveConsumer(k.tag, k)
			return
		}
		if v.lookupQueue(name) == to {
			v.log.Debug().Str("vhost", v.name).Str("queue", name).Str("consumer", k.tag).Msg("consumer moved to the quorum queue's new replica or member")
			to.Kick(nil)
			return
		}
		to.RemoveConsumer(k.tag, k)
		from = to
	}
	k.ch.cancelByBroker(k)
}

// servedBy reports whether q is the object k consumes from now: false
// once its channel dropped it, or a move took it elsewhere.
func (k *consumer) servedBy(q queue.Queue) bool { return !k.gone.Load() && k.queue() == q }

// maxMoves bounds the objects one move goes through.
const maxMoves = 5

// consumerRefs lists the stand-in's consumers.
func (q *remoteQueue) consumerRefs() []queue.ConsumerRef {
	q.mu.Lock()
	defer q.mu.Unlock()
	refs := make([]queue.ConsumerRef, 0, len(q.consumers))
	for _, rc := range q.consumers {
		refs = append(refs, queue.ConsumerRef{Tag: rc.tag, Consumer: rc.c})
	}
	return refs
}
