// assign.go: the assignor, which partitions each member of a consumer group
// should own (issue 13, section 3): at most one owner per partition, owners'
// counts within one of each other, as few moves as a membership change
// allows, idle standbys beyond the partition count, and the same answer for
// the same inputs.

package group

import (
	"slices"
	"sort"
)

// Member identifies a member (one consumer) of a group. The broker numbers
// a group's members from 1 in the order they join; where the assignor must
// choose between equals it prefers the lower number, so the standby that
// waited longest takes over a freed partition. NoMember is none.
type Member uint64

// NoMember is the owner of an unowned partition.
const NoMember Member = 0

// Assign is the target owner of each of n partitions given the group's
// members and each partition's current owner (current[p]; NoMember, or a
// member no longer in members, for none). The result:
//   - gives every partition an owner when there is a member;
//   - gives each member floor(n/m) or ceil(n/m) partitions (m members); with
//     m > n, n members own one each and the rest are standbys with none;
//   - keeps as many partitions with their current owner as any balanced
//     assignment can (a member keeps its lowest-numbered ones);
//   - depends only on the set of members and current, not on the order of
//     members.
//
// current may be shorter than n (missing entries are unowned); members may
// repeat and may contain NoMember (ignored).
func Assign(n int, members []Member, current []Member) []Member {
	out := make([]Member, n)
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) > 0 && ms[0] == NoMember {
		ms = ms[1:]
	}
	if len(ms) == 0 || n == 0 {
		return out
	}
	idx := make(map[Member]int, len(ms))
	for i, m := range ms {
		idx[m] = i
	}
	owner := func(p int) int { // index in ms of p's current owner, or -1
		if p >= len(current) {
			return -1
		}
		if i, ok := idx[current[p]]; ok {
			return i
		}
		return -1
	}
	have := make([]int, len(ms))
	for p := 0; p < n; p++ {
		if i := owner(p); i >= 0 {
			have[i]++
		}
	}
	// Quotas: base for everyone, one more for `extra` members, chosen among
	// those that own the most now (ties: lower member first). That choice
	// maximises the partitions kept: sum of min(have, quota).
	base, extra := n/len(ms), n%len(ms)
	quota := make([]int, len(ms))
	for i := range quota {
		quota[i] = base
	}
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return have[order[a]] > have[order[b]] })
	for _, i := range order[:extra] {
		quota[i]++
	}
	// Keep what fits the quota, lowest partitions first.
	kept := make([]int, len(ms))
	var free []int
	for p := 0; p < n; p++ {
		if i := owner(p); i >= 0 && kept[i] < quota[i] {
			kept[i]++
			out[p] = ms[i]
			continue
		}
		free = append(free, p)
	}
	// Fill each member's remaining quota from the freed partitions, in
	// member order.
	for i, m := range ms {
		for ; kept[i] < quota[i]; kept[i]++ {
			out[free[0]] = m
			free = free[1:]
		}
	}
	return out
}

// Moves counts the partitions that change from an owner still among
// members to another: the reassignments a membership change costs beyond
// those of departed members.
func Moves(members []Member, current, next []Member) int {
	in := make(map[Member]bool, len(members))
	for _, m := range members {
		if m != NoMember {
			in[m] = true
		}
	}
	n := 0
	for p, m := range next {
		if p < len(current) && in[current[p]] && current[p] != m {
			n++
		}
	}
	return n
}
