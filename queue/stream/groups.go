// groups.go: consumer groups over a stream's partitions (issue 13, section
// 3), built from package group's parts: a Rebalancer per group assigns
// partitions to members; a Watermark per (group, partition) keeps the
// committed offset, fenced by assignment generation; the committed
// offsets are coalesced into the offsets file (offsets.go), and written
// at once at membership changes, at shutdown and for tx.commit.

package stream

import (
	"slices"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/queue/stream/group"
)

// Commit coalescing: a group's offsets are stored at most commitEvery
// after a settlement moved them, or at once after commitAfterAcks
// settlements.
const (
	defaultCommitEvery = 200 * time.Millisecond
	commitAfterAcks    = 1000
)

// cgroup is one consumer group of a stream. The stream's mu guards it.
type cgroup struct {
	q       *Queue
	name    string
	auto    bool
	reb     *group.Rebalancer
	parts   []*groupPart
	members map[group.Member]*consumer
	next    group.Member // the last member number given
	timer   *time.Timer  // the rebalance deadline, when one is set
	at      time.Time
}

// groupPart is one (group, partition).
type groupPart struct {
	g *cgroup
	n int
	// w is nil until the partition is first assigned since the stream
	// opened (or since a reset); the stored state then holds it.
	w   *group.Watermark
	cur *cursor // the owner's cursor
	// committed, hasCommit and skip are what the offsets file holds (or
	// what the last commit wrote): the committed offset and the offsets
	// above it already processed.
	committed int64
	hasCommit bool
	skip      []int64
	dirty     bool
}

type streamClock struct{ now queue.Clock }

func (c streamClock) Now() time.Time { return c.now() }

func (q *Queue) newGroup(name string, auto bool) *cgroup {
	g := &cgroup{q: q, name: name, auto: auto, members: map[group.Member]*consumer{}}
	for i := range q.parts {
		g.parts = append(g.parts, &groupPart{g: g, n: i})
	}
	g.reb = group.NewRebalancer(len(q.parts), streamClock{q.typ.cfg.Now}, func(p int) int {
		if w := g.parts[p].w; w != nil {
			return w.InFlight()
		}
		return 0
	})
	q.groups[name] = g
	return g
}

// loadGroups restores the groups' committed offsets from the file.
func (q *Queue) loadGroups(recs []offsetRec) {
	for _, r := range recs {
		g := q.groups[r.group]
		if g == nil {
			g = q.newGroup(r.group, r.auto)
		}
		if r.part < 0 || r.part >= len(g.parts) {
			continue
		}
		gp := g.parts[r.part]
		gp.committed, gp.hasCommit, gp.skip = r.committed, true, r.skip
	}
}

// deliverable says whether cursor c may be given new deliveries of its
// partition: it is the owner's, under the current generation, and the
// partition is not being revoked.
func (gp *groupPart) deliverable(c *cursor) bool {
	_, gen, ok := gp.g.reb.Owner(gp.n)
	return ok && gen == c.gen && gp.cur == c
}

// skipped says whether off is one the group processed before the stream
// reopened; the reader passes over it (Watermark.Skip).
func (gp *groupPart) skipped(off int64) bool {
	for len(gp.skip) > 0 && gp.skip[0] < off {
		gp.skip = gp.skip[1:]
	}
	if len(gp.skip) > 0 && gp.skip[0] == off {
		gp.skip = gp.skip[1:]
		gp.w.Skip(off)
		return true
	}
	return false
}

// changed marks the (group, partition)'s committed state as to be stored.
func (gp *groupPart) changed() {
	gp.dirty = true
	q := gp.g.q
	q.dirty = true
	q.armCommit()
}

// state is the committed state to store now.
func (gp *groupPart) state() (committed int64, skip []int64) {
	if gp.w == nil {
		return gp.committed, gp.skip
	}
	skip = gp.w.Processed(nil)
	for _, o := range gp.skip {
		if o >= gp.w.High() {
			skip = append(skip, o)
		}
	}
	return gp.w.Committed(), skip
}

// start is where a partition assigned for the first time since the
// stream opened starts: the committed offset (the first retained one if
// retention dropped it), or, for a partition the group never committed,
// where the new owner's x-stream-offset points.
func (q *Queue) start(gp *groupPart, spec group.OffsetSpec) int64 {
	p := q.parts[gp.n]
	first, end, last := p.log.Bounds()
	if gp.hasCommit {
		return max(gp.committed, int64(first))
	}
	switch spec.Kind {
	case group.OffsetFirst:
		return int64(first)
	case group.OffsetLast:
		return int64(last)
	case group.OffsetAbsolute:
		return min(max(spec.Offset, int64(first)), int64(end))
	case group.OffsetTimestamp:
		r, err := p.log.ReaderAtTime(spec.Time.UnixMilli())
		if err != nil {
			q.typ.logErr(err, "stream read failed; a group starts at the end")
			return int64(end)
		}
		defer r.Close()
		return int64(r.Offset())
	}
	return int64(end)
}

// join adds k to its group (creating the group on first use) and applies
// the rebalance. q.mu is held. It reports whether partitions moved (their
// offsets are committed at once).
func (q *Queue) join(k *consumer) bool {
	if q.reattach(k) {
		return false
	}
	g := q.groups[k.args.Group]
	if g == nil {
		g = q.newGroup(k.args.Group, k.args.AutoTracking)
	}
	g.next++
	k.grp, k.member = g, g.next
	g.members[k.member] = k
	return q.apply(g, g.reb.Join(k.member, k.args.RebalanceTimeout))
}

// leave removes k from its group: the partitions it owned move at once.
// q.mu is held.
func (q *Queue) leave(k *consumer) bool {
	g := k.grp
	evs := g.reb.Leave(k.member)
	delete(g.members, k.member)
	q.apply(g, evs)
	k.grp = nil
	return true
}

// retire removes k from its group as a basic.cancel does
// (group.Rebalancer.Retire). q.mu is held.
func (q *Queue) retire(k *consumer) bool {
	g := k.grp
	evs := g.reb.Retire(k.member)
	delete(g.members, k.member)
	k.grp = nil
	q.apply(g, evs)
	return true
}

// apply carries out a group's rebalance events and re-arms its deadline
// timer. It reports whether a partition moved or was revoked.
func (q *Queue) apply(g *cgroup, evs []group.Event) bool {
	moved := false
	var lost []*consumer
	for _, ev := range evs {
		gp := g.parts[ev.Partition]
		switch ev.Kind {
		case group.Revoke:
			moved = true
			lost = append(lost, g.members[ev.From])
		case group.Move:
			moved = true
			lost = append(lost, g.members[ev.From])
			q.move(g, gp, ev)
		}
	}
	for _, k := range lost {
		if k != nil && k.args.CancelOnRebalance && !k.detached && g.members[k.member] == k {
			q.detach(k)
		}
	}
	q.armGroup(g)
	return moved
}

// move hands a partition to its new owner (or to nobody): the old owner's
// cursor goes, its in-flight deliveries wait for the new owner
// (Watermark.Handover), and the new owner reads from where the group is.
func (q *Queue) move(g *cgroup, gp *groupPart, ev group.Event) {
	if c := gp.cur; c != nil {
		if k := g.members[ev.From]; k != nil {
			k.curs = slices.DeleteFunc(k.curs, func(x *cursor) bool { return x == c })
		}
		c.close()
		delete(q.cursors, c.id)
		gp.cur = nil
	}
	to := g.members[ev.To]
	if gp.w == nil {
		if to == nil {
			return
		}
		gp.w = group.NewWatermark(q.start(gp, to.args.Offset), ev.Gen)
	} else if err := gp.w.Handover(ev.Gen); err != nil {
		q.typ.logErr(err, "consumer group handover out of order")
	}
	gp.changed()
	if to == nil {
		return
	}
	q.nextCursor++
	c := newCursor(q.parts[gp.n], uint64(max(gp.w.High(), 0)), nil)
	c.id, c.gp, c.gen = q.nextCursor, gp, ev.Gen
	q.cursors[c.id] = c
	gp.cur = c
	to.curs = append(to.curs, c)
}

// detach cancels group member k, with x-stream-cancel-on-rebalance, when
// a partition is taken from it: the broker tells its client with
// basic.cancel, and k gets no more deliveries but stays a member, so its
// in-flight deliveries can still be acked (a revoked partition moves once
// they are) and its other partitions stay its own. The client consumes
// again with the same group and consumer tag to take its place back (no
// rebalance); if it does not within its rebalance timeout it leaves the
// group. q.mu is held.
func (q *Queue) detach(k *consumer) {
	i := slices.Index(q.consumers, k)
	if i < 0 {
		return
	}
	q.consumers = slices.Delete(q.consumers, i, i+1)
	q.cancels = append(q.cancels, queue.ConsumerRef{Tag: k.tag, Consumer: k.c})
	k.detached = true
	k.expiry = time.AfterFunc(max(k.args.RebalanceTimeout, 0), func() {
		q.mu.Lock()
		var sync bool
		if k.detached && k.grp != nil && !q.deleted && !q.stopped {
			sync = q.leave(k)
			closeCursors(k.curs)
			k.curs = nil
			q.dispatch(nil)
		}
		cancels := q.takeCancels()
		q.mu.Unlock()
		q.afterChange(sync, cancels)
	})
}

// reattach gives a new consumer the place of the detached member of its
// group with its consumer tag, when there is one. q.mu is held.
func (q *Queue) reattach(k *consumer) bool {
	g := q.groups[k.args.Group]
	if g == nil {
		return false
	}
	for m, old := range g.members {
		if !old.detached || old.tag != k.tag {
			continue
		}
		old.expiry.Stop()
		old.detached, old.grp = false, nil
		k.grp, k.member, k.curs = g, m, old.curs
		old.curs = nil
		g.members[m] = k
		return true
	}
	return false
}

// armGroup sets g's timer to its next rebalance deadline.
func (q *Queue) armGroup(g *cgroup) {
	at, ok := g.reb.NextDeadline()
	if !ok {
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		return
	}
	if g.timer != nil && g.at.Equal(at) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.at = at
	g.timer = time.AfterFunc(max(at.Sub(q.typ.cfg.Now()), 0), func() { q.tick(g) })
}

// tick moves the partitions of g whose rebalance deadline passed.
func (q *Queue) tick(g *cgroup) {
	q.mu.Lock()
	if q.deleted || q.stopped || q.groups[g.name] != g {
		q.mu.Unlock()
		return
	}
	g.timer = nil
	moved := q.apply(g, g.reb.Tick())
	q.dispatch(nil)
	cancels := q.takeCancels()
	q.mu.Unlock()
	q.afterChange(moved, cancels)
}

// settleGroup applies group members' settlements to their watermarks. It
// reports whether a partition moved (a revoked one whose old owner has
// settled). q.mu is held.
func (q *Queue) settleGroup(entries []queue.Entry, op queue.SettleOp) (moved bool) {
	for i := range entries {
		e := &entries[i]
		c := q.cursors[refCursor(e.Ref)]
		if c == nil {
			continue // a former owner's: fenced
		}
		gp := c.gp
		off := int64(e.Seq)
		var changed bool
		switch op {
		case queue.Ack:
			changed = gp.w.Ack(c.gen, off)
		case queue.Reject:
			changed = gp.w.Nack(c.gen, off, false)
		case queue.Requeue:
			changed = gp.w.Nack(c.gen, off, true)
		}
		if changed {
			q.acks++
			gp.changed()
		}
		if q.apply(gp.g, gp.g.reb.Settled(gp.n)) {
			moved = true
		}
	}
	return moved
}

// armCommit schedules a commit of the groups' offsets. q.mu is held.
func (q *Queue) armCommit() {
	if q.armed || q.deleted || q.stopped {
		return
	}
	q.armed = true
	every := q.typ.cfg.CommitEvery
	if every <= 0 {
		every = defaultCommitEvery
	}
	q.flushTimer = time.AfterFunc(every, func() {
		q.mu.Lock()
		q.armed = false
		done := q.deleted || q.stopped
		q.mu.Unlock()
		if !done {
			q.typ.logErr(q.commitOffsets(), "cannot store a consumer group's offsets")
		}
	})
}

// commitOffsets stores the committed state of every (group, partition)
// that changed since the last commit, synced, and the deletions of
// groups.
func (q *Queue) commitOffsets() error {
	s := q.offsets
	s.mu.Lock()
	defer s.mu.Unlock()
	q.mu.Lock()
	recs := q.dirtyRecs()
	q.mu.Unlock()
	return s.write(recs, func() []offsetRec {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.allRecs()
	})
}

// groupNames is the names of the groups, sorted. q.mu is held.
func (q *Queue) groupNames() []string {
	names := make([]string, 0, len(q.groups))
	for n := range q.groups {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// dirtyRecs takes what changed since the last commit. q.mu is held.
func (q *Queue) dirtyRecs() []offsetRec {
	recs := q.deletedRecs
	q.deletedRecs = nil
	if !q.dirty {
		return recs
	}
	q.dirty, q.acks = false, 0
	for _, name := range q.groupNames() {
		g := q.groups[name]
		for _, gp := range g.parts {
			if !gp.dirty {
				continue
			}
			gp.dirty = false
			c, skip := gp.state()
			gp.committed, gp.hasCommit = c, true
			recs = append(recs, offsetRec{group: g.name, auto: g.auto, part: gp.n, committed: c, skip: skip})
		}
	}
	return recs
}

// allRecs is every (group, partition) with a committed state. q.mu is
// held.
func (q *Queue) allRecs() []offsetRec {
	var recs []offsetRec
	for _, name := range q.groupNames() {
		g := q.groups[name]
		for _, gp := range g.parts {
			if !gp.hasCommit && gp.w == nil {
				continue
			}
			c, skip := gp.state()
			recs = append(recs, offsetRec{group: g.name, auto: g.auto, part: gp.n, committed: c, skip: skip})
		}
	}
	return recs
}

// stopGroupsLocked stops the groups' timers. q.mu is held.
func (q *Queue) stopGroupsLocked() {
	for _, g := range q.groups {
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		for _, k := range g.members {
			if k.detached {
				k.expiry.Stop()
			}
		}
	}
	if q.flushTimer != nil {
		q.flushTimer.Stop()
	}
}

// idleGroup locks q.mu and returns group name if it has no members; on
// an error q.mu is released.
func (q *Queue) idleGroup(name string) (*cgroup, error) {
	q.mu.Lock()
	g := q.groups[name]
	switch {
	case g == nil:
		q.mu.Unlock()
		return nil, ErrNoGroup
	case len(g.members) > 0:
		q.mu.Unlock()
		return nil, ErrGroupActive
	}
	return g, nil
}

func (q *Queue) resetGroup(name string, to group.OffsetSpec) error {
	g, err := q.idleGroup(name)
	if err != nil {
		return err
	}
	for _, gp := range g.parts {
		gp.w, gp.hasCommit, gp.skip = nil, false, nil // q.start resolves to, not a commit
		gp.committed, gp.hasCommit = q.start(gp, to), true
		gp.dirty = true
	}
	q.dirty = true
	q.mu.Unlock()
	return q.commitOffsets()
}

func (q *Queue) deleteGroup(name string) error {
	g, err := q.idleGroup(name)
	if err != nil {
		return err
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	delete(q.groups, name)
	q.deletedRecs = append(q.deletedRecs, offsetRec{group: name, deleted: true})
	q.mu.Unlock()
	return q.commitOffsets()
}

// Info returns the stream's partitions and groups.
func (q *Queue) Info() Info {
	var in Info
	nexts := make([]uint64, len(q.parts))
	firsts := make([]uint64, len(q.parts))
	for i, p := range q.parts {
		first, end, _ := p.log.Bounds()
		firsts[i], nexts[i] = first, end
		in.Partitions = append(in.Partitions, PartitionInfo{Partition: i, First: first, Next: end, Segments: p.log.Segments(), Bytes: p.log.Bytes()})
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, name := range q.groupNames() {
		g := q.groups[name]
		gi := GroupInfo{Name: name, AutoTracking: g.auto}
		owners := g.reb.Owners()
		for _, m := range g.reb.Members() {
			k := g.members[m]
			if k == nil {
				continue
			}
			mi := MemberInfo{Tag: k.tag, Consumer: k.c}
			for p, o := range owners {
				if o == m {
					mi.Partitions = append(mi.Partitions, p)
				}
			}
			gi.Members = append(gi.Members, mi)
		}
		for _, gp := range g.parts {
			pi := GroupPartitionInfo{Partition: gp.n, HasCommit: gp.hasCommit || gp.w != nil}
			if k := g.members[owners[gp.n]]; k != nil {
				pi.Owner = k.tag
			}
			c, _ := gp.state()
			if !pi.HasCommit {
				c = int64(firsts[gp.n])
			}
			pi.Committed = uint64(max(c, 0))
			from := max(pi.Committed, firsts[gp.n])
			if nexts[gp.n] > from {
				pi.Lag = nexts[gp.n] - from
			}
			gi.Partitions = append(gi.Partitions, pi)
		}
		in.Groups = append(in.Groups, gi)
	}
	return in
}
