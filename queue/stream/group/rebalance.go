// rebalance.go: the rebalance state machine of one consumer group (issue
// 13, section 3, "Rebalance without duplicates when members ack
// promptly"): membership changes set each partition's target owner (by
// Assign); a partition whose owner changes is first revoked (no new
// deliveries to the old owner), then moves once the old owner's in-flight
// deliveries of it are settled, after the old owner's rebalance timeout, or
// at once if the old owner is gone. Time comes from an injected Clock.

package group

import (
	"slices"
	"time"
)

// ArgRebalanceTimeout is the consumer argument with a member's rebalance
// timeout in milliseconds; DefaultRebalanceTimeout applies without it.
const ArgRebalanceTimeout = "x-stream-rebalance-timeout"

// DefaultRebalanceTimeout is how long a revoked partition waits for its old
// owner's in-flight deliveries before it moves anyway (they are then
// redelivered to the new owner).
const DefaultRebalanceTimeout = 30 * time.Second

// Clock tells the time. The broker passes SystemClock; tests a fake one
// they advance by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// EventKind says what a partition's Event asks the broker to do.
type EventKind uint8

const (
	// Revoke: stop new deliveries of Partition to From; its in-flight ones
	// may still be settled. With x-stream-cancel-on-rebalance the broker
	// cancels From's consumer now.
	Revoke EventKind = iota + 1
	// Resume: a revocation was called off (membership changed back);
	// deliveries of Partition to From go on under the same generation.
	Resume
	// Move: Partition now belongs to To (NoMember: nobody) under
	// generation Gen. The broker calls the partition's Watermark.Handover(Gen)
	// (From's unsettled deliveries will be redelivered; its later acks
	// settle their tags but are fenced) and starts To at the redeliveries,
	// then at the watermark's High. TimedOut says From still had deliveries
	// in flight.
	Move
)

func (k EventKind) String() string {
	switch k {
	case Revoke:
		return "revoke"
	case Resume:
		return "resume"
	case Move:
		return "move"
	}
	return "unknown"
}

// Event is one partition's transition.
type Event struct {
	Kind      EventKind
	Partition int
	From, To  Member
	Gen       Generation
	TimedOut  bool
}

type partition struct {
	owner    Member
	target   Member
	gen      Generation
	revoking bool
	deadline time.Time
}

// Rebalancer is the assignment state of one consumer group over a stream's
// partitions. Each method returns the events it caused, in partition order;
// the broker applies them in that order.
//
// Not safe for concurrent use: the broker serialises a group's membership
// changes, settlements and timer ticks.
type Rebalancer struct {
	clock    Clock
	inFlight func(partition int) int
	parts    []partition
	members  map[Member]time.Duration // member -> its rebalance timeout
	// retiring are members that left by Retire and still own partitions
	// being revoked, with their rebalance timeouts.
	retiring map[Member]time.Duration
}

// NewRebalancer starts a group over n partitions, all unowned.
// inFlight(p) is the number of deliveries of partition p its current owner
// has not settled (the partition's Watermark.InFlight).
func NewRebalancer(n int, clock Clock, inFlight func(partition int) int) *Rebalancer {
	return &Rebalancer{clock: clock, inFlight: inFlight, parts: make([]partition, n), members: map[Member]time.Duration{},
		retiring: map[Member]time.Duration{}}
}

// Join adds member m with its rebalance timeout (negative: the default; 0:
// its partitions move at once when revoked) and rebalances.
func (r *Rebalancer) Join(m Member, timeout time.Duration) []Event {
	if timeout < 0 {
		timeout = DefaultRebalanceTimeout
	}
	r.members[m] = timeout
	return r.rebalance(nil)
}

// Leave removes member m (gone: its consumer cannot settle any more):
// the partitions it owned move at once, and the rest rebalance.
func (r *Rebalancer) Leave(m Member) []Event {
	if _, ok := r.members[m]; !ok {
		return nil
	}
	delete(r.members, m)
	delete(r.retiring, m)
	return r.rebalance(&m)
}

// Retire removes member m as Leave does, except that the partitions it
// owns are revoked rather than moved at once: each moves once m's
// in-flight deliveries of it are settled, or after m's rebalance timeout.
// It is a basic.cancel's leave: the member's channel can still settle
// what it was sent, and those acks count.
func (r *Rebalancer) Retire(m Member) []Event {
	t, ok := r.members[m]
	if !ok {
		return nil
	}
	delete(r.members, m)
	r.retiring[m] = t
	evs := r.rebalance(nil)
	r.forgetRetired()
	return evs
}

// timeout is owner m's rebalance timeout, a member's or a retiring one's.
func (r *Rebalancer) timeout(m Member) time.Duration {
	if t, ok := r.members[m]; ok {
		return t
	}
	return r.retiring[m]
}

// forgetRetired drops the retiring members that own nothing any more.
func (r *Rebalancer) forgetRetired() {
	for m := range r.retiring {
		if !slices.ContainsFunc(r.parts, func(pt partition) bool { return pt.owner == m }) {
			delete(r.retiring, m)
		}
	}
}

// Settled is called when the owner of partition p settled a delivery: a
// revoked partition whose old owner has nothing left in flight moves.
func (r *Rebalancer) Settled(p int) []Event {
	if p < 0 || p >= len(r.parts) {
		return nil
	}
	pt := &r.parts[p]
	if pt.revoking && r.inFlight(p) == 0 {
		ev := r.move(p, false)
		r.forgetRetired()
		return []Event{ev}
	}
	return nil
}

// Tick moves the revoked partitions whose deadline has passed. The broker
// calls it when NextDeadline is reached.
func (r *Rebalancer) Tick() []Event {
	now := r.clock.Now()
	var evs []Event
	for p := range r.parts {
		pt := &r.parts[p]
		if pt.revoking && !now.Before(pt.deadline) {
			evs = append(evs, r.move(p, r.inFlight(p) > 0))
		}
	}
	r.forgetRetired()
	return evs
}

// NextDeadline is the earliest deadline of a revoked partition; ok is false
// when none is revoked.
func (r *Rebalancer) NextDeadline() (t time.Time, ok bool) {
	for _, pt := range r.parts {
		if pt.revoking && (!ok || pt.deadline.Before(t)) {
			t, ok = pt.deadline, true
		}
	}
	return t, ok
}

// Owner is partition p's owner and generation, and whether the owner may be
// given new deliveries of it (false while it is revoked, and for an
// unowned partition).
func (r *Rebalancer) Owner(p int) (m Member, gen Generation, deliver bool) {
	pt := r.parts[p]
	return pt.owner, pt.gen, pt.owner != NoMember && !pt.revoking
}

// Target is the owner partition p is heading for (its owner when no move
// is under way).
func (r *Rebalancer) Target(p int) Member { return r.parts[p].target }

// Owners is the owner of every partition.
func (r *Rebalancer) Owners() []Member {
	out := make([]Member, len(r.parts))
	for p, pt := range r.parts {
		out[p] = pt.owner
	}
	return out
}

// Members is the group's members, in join (number) order.
func (r *Rebalancer) Members() []Member {
	out := make([]Member, 0, len(r.members))
	for m := range r.members {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// rebalance recomputes every partition's target from the current owners
// and starts, updates or calls off the moves. gone, when set, is a member
// that just left: its partitions move at once.
func (r *Rebalancer) rebalance(gone *Member) []Event {
	members := r.Members()
	current := make([]Member, len(r.parts))
	for p, pt := range r.parts {
		if gone == nil || pt.owner != *gone {
			current[p] = pt.owner
		}
	}
	targets := Assign(len(r.parts), members, current)
	now := r.clock.Now()
	var evs []Event
	for p := range r.parts {
		pt := &r.parts[p]
		pt.target = targets[p]
		switch {
		case pt.target == pt.owner:
			if pt.revoking {
				pt.revoking = false
				evs = append(evs, Event{Kind: Resume, Partition: p, From: pt.owner, To: pt.owner, Gen: pt.gen})
			}
		case pt.owner == NoMember || (gone != nil && pt.owner == *gone):
			evs = append(evs, r.move(p, false))
		case pt.revoking:
			// Already waiting for the old owner; the deadline stands.
		case r.inFlight(p) == 0:
			evs = append(evs, r.move(p, false))
		case r.timeout(pt.owner) == 0:
			evs = append(evs, r.move(p, true))
		default:
			pt.revoking = true
			pt.deadline = now.Add(r.timeout(pt.owner))
			evs = append(evs, Event{Kind: Revoke, Partition: p, From: pt.owner, To: pt.target, Gen: pt.gen})
		}
	}
	return evs
}

// move hands partition p to its target under the next generation.
func (r *Rebalancer) move(p int, timedOut bool) Event {
	pt := &r.parts[p]
	from := pt.owner
	pt.gen++
	pt.owner = pt.target
	pt.revoking = false
	pt.deadline = time.Time{}
	return Event{Kind: Move, Partition: p, From: from, To: pt.owner, Gen: pt.gen, TimedOut: timedOut}
}
