package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/queue"
)

// This file is the publish pipeline after routing: a message's queues are
// handed to their types (queue.Type.Publish), all of one type's at once,
// and the publisher's confirm waits for every type's completion.

// deliver hands msg to queues. done runs once every queue type lets the
// confirm go (at once when none stores anything), with the first error.
// It reports whether any queue took the message and whether one refused
// it for its length limit.
//
// ctx is passed to the queues: a *flushSet lets consumers leave their
// connection's write to the caller's flushSet.
func (v *vhost) deliver(msg *queue.Message, queues []queue.Queue, done func(error), ctx any) (routed, dropped bool) {
	if len(queues) == 0 {
		if done != nil {
			done(nil)
		}
		return false, false
	}
	// Nearly always every queue is of one type: no grouping, no counter.
	t := queues[0].Type()
	same := true
	for _, q := range queues[1:] {
		if q.Type() != t {
			same = false
			break
		}
	}
	if same {
		return t.Publish(msg, queues, ctx, done)
	}
	groups := groupByType(queues)
	var j *joinDone
	if done != nil {
		j = &joinDone{done: done}
		j.n.Store(int32(len(groups)))
	}
	for _, g := range groups {
		var d func(error)
		if j != nil {
			d = j.one
		}
		r, dr := g.typ.Publish(msg, g.queues, ctx, d)
		routed, dropped = routed || r, dropped || dr
	}
	return routed, dropped
}

// typeGroup is the queues of one type a message goes to.
type typeGroup struct {
	typ    queue.Type
	queues []queue.Queue
}

// groupByType splits queues by type, keeping each type's queues in order.
func groupByType(queues []queue.Queue) []typeGroup {
	var groups []typeGroup
next:
	for _, q := range queues {
		t := q.Type()
		for i := range groups {
			if groups[i].typ == t {
				groups[i].queues = append(groups[i].queues, q)
				continue next
			}
		}
		groups = append(groups, typeGroup{typ: t, queues: []queue.Queue{q}})
	}
	return groups
}

// joinDone calls done once n completions arrived, with the first error.
type joinDone struct {
	done func(error)
	n    atomic.Int32
	err  atomic.Pointer[error]
}

func (j *joinDone) one(err error) {
	if err != nil {
		j.err.CompareAndSwap(nil, &err)
	}
	if j.n.Add(-1) == 0 {
		var e error
		if p := j.err.Load(); p != nil {
			e = *p
		}
		j.done(e)
	}
}
