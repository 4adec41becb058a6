package group

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func counts(n int, members []Member, a []Member) map[Member]int {
	c := map[Member]int{}
	for _, m := range members {
		if m != NoMember {
			c[m] = 0
		}
	}
	for p := 0; p < n; p++ {
		c[a[p]]++
	}
	return c
}

// balanced: every partition owned by a member (when there is one), and
// members' counts within one of each other.
func balanced(n int, members []Member, a []Member) bool {
	c := counts(n, members, a)
	if !slices.ContainsFunc(members, func(m Member) bool { return m != NoMember }) {
		for _, m := range a {
			if m != NoMember {
				return false
			}
		}
		return true
	}
	lo, hi := n, 0
	for m, k := range c {
		if m == NoMember {
			return k == 0 || n == 0
		}
		lo, hi = min(lo, k), max(hi, k)
	}
	if _, unowned := c[NoMember]; unowned {
		return false
	}
	return hi-lo <= 1
}

func TestAssignTable(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		members []Member
		current []Member
		want    []Member
	}{
		{"first member takes all", 3, []Member{1}, nil, []Member{1, 1, 1}},
		{"second member takes the top share", 4, []Member{1, 2}, []Member{1, 1, 1, 1}, []Member{1, 1, 2, 2}},
		{"third member", 6, []Member{1, 2, 3}, []Member{1, 1, 1, 2, 2, 2}, []Member{1, 1, 3, 2, 2, 3}},
		{"member leaves: its partitions spread", 6, []Member{1, 3}, []Member{1, 1, 3, 2, 2, 3}, []Member{1, 1, 3, 1, 3, 3}},
		{"standby idles", 2, []Member{1, 2, 3}, []Member{1, 2}, []Member{1, 2}},
		{"oldest standby takes a freed partition", 2, []Member{2, 3, 4}, []Member{1, 2}, []Member{3, 2}},
		{"one partition: single active consumer", 1, []Member{5, 7}, []Member{7}, []Member{7}},
		{"no members", 3, nil, []Member{1, 2, 3}, []Member{0, 0, 0}},
		{"order of members does not matter", 3, []Member{9, 4, 4, 0}, nil, []Member{4, 4, 9}},
		{"unbalanced current is fixed with fewest moves", 4, []Member{1, 2}, []Member{1, 1, 1, 2}, []Member{1, 1, 2, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Assign(c.n, c.members, c.current)
			if !slices.Equal(got, c.want) {
				t.Fatalf("Assign(%d, %v, %v) = %v, want %v", c.n, c.members, c.current, got, c.want)
			}
		})
	}
}

// minMoves is the reference: the fewest moves of any balanced assignment,
// by enumerating all of them.
func minMoves(n int, members []Member, current []Member) int {
	ms := slices.Clone(members)
	a := make([]Member, n)
	best := n + 1
	var rec func(p int)
	rec = func(p int) {
		if p == n {
			if balanced(n, ms, a) {
				best = min(best, Moves(ms, current, a))
			}
			return
		}
		for _, m := range ms {
			a[p] = m
			rec(p + 1)
		}
	}
	rec(0)
	return best
}

func randomCase(r *rand.Rand) (int, []Member, []Member) {
	n := r.IntN(7)
	var members []Member
	for m := Member(1); m <= 5; m++ {
		if r.IntN(2) == 0 {
			members = append(members, m)
		}
	}
	current := make([]Member, n)
	for p := range current {
		current[p] = Member(r.IntN(7)) // 0 (none), members, and departed ones
	}
	return n, members, current
}

func TestAssignProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 3000; i++ {
		n, members, current := randomCase(r)
		got := Assign(n, members, current)
		if len(members) > 0 && !balanced(n, members, got) {
			t.Fatalf("Assign(%d, %v, %v) = %v: unbalanced", n, members, current, got)
		}
		for _, m := range got {
			if len(members) == 0 && m != NoMember || len(members) > 0 && !slices.Contains(members, m) {
				t.Fatalf("Assign(%d, %v, %v) = %v: owner %d not a member", n, members, current, got, m)
			}
		}
		if len(members) > 0 {
			if moves, best := Moves(members, current, got), minMoves(n, members, current); moves != best {
				t.Fatalf("Assign(%d, %v, %v) = %v: %d moves, the fewest is %d", n, members, current, got, moves, best)
			}
		}
		// Determinism: shuffled and repeated members give the same answer.
		sh := slices.Clone(members)
		r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		sh = append(sh, sh...)
		if again := Assign(n, sh, current); !slices.Equal(again, got) {
			t.Fatalf("Assign with members %v = %v, with %v = %v", members, got, sh, again)
		}
		// Stable: nothing changes, nothing moves.
		if again := Assign(n, members, got); !slices.Equal(again, got) {
			t.Fatalf("Assign not stable: %v then %v", got, again)
		}
	}
}

// Stickiness over a long random membership history with more partitions:
// every step moves no more than the lower bound (the partitions a balanced
// assignment cannot leave in place, computed from counts alone).
func TestAssignStickyHistory(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 12
	cur := make([]Member, n)
	var members []Member
	next := Member(1)
	for step := 0; step < 2000; step++ {
		if len(members) == 0 || r.IntN(2) == 0 && len(members) < 20 {
			members = append(members, next)
			next++
		} else {
			i := r.IntN(len(members))
			members = append(members[:i], members[i+1:]...)
		}
		got := Assign(n, members, cur)
		if !balanced(n, members, got) {
			t.Fatalf("step %d: unbalanced %v", step, got)
		}
		if moves, bound := Moves(members, cur, got), movesBound(n, members, cur); moves != bound {
			t.Fatalf("step %d: %d moves, bound %d (%v -> %v)", step, moves, bound, cur, got)
		}
		cur = got
	}
}

// movesBound is the fewest moves by counting: each member keeps at most
// its quota of what it has; quotas of ceil(n/m) go to those holding most.
func movesBound(n int, members []Member, current []Member) int {
	if len(members) == 0 {
		return 0
	}
	have := counts(n, members, current)
	var hs []int
	stay := 0
	for _, m := range members {
		hs = append(hs, have[m])
		stay += have[m]
	}
	slices.Sort(hs)
	slices.Reverse(hs)
	base, extra := n/len(members), n%len(members)
	kept := 0
	for i, h := range hs {
		q := base
		if i < extra {
			q++
		}
		kept += min(h, q)
	}
	return stay - kept
}
