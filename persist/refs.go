package persist

import "sort"

// refTable is the committer's reference counts: how many queue entries
// point at each live message body. Almost every message has one entry and
// message ids are handed out in increasing order, so the live ids are kept
// as sorted runs [lo, hi] (a backlog of ten million messages is one run)
// and only counts above one go in a map. Memory then follows the number of
// gaps (messages settled out of order) and of multi-queue messages, not the
// backlog's length. Not safe for concurrent use: the committer owns it.
type refTable struct {
	runs  []idRun          // disjoint, ascending
	multi map[uint64]int64 // counts above one
}

type idRun struct{ lo, hi uint64 }

func newRefTable() *refTable { return &refTable{multi: map[uint64]int64{}} }

// get returns id's count, 0 for no live body.
func (t *refTable) get(id uint64) int64 {
	if n, ok := t.multi[id]; ok {
		return n
	}
	if t.contains(id) {
		return 1
	}
	return 0
}

// set makes id's count n (0 removes it).
func (t *refTable) set(id uint64, n int64) {
	if n > 1 {
		t.multi[id] = n
	} else {
		delete(t.multi, id)
	}
	if n > 0 {
		t.add(id)
	} else {
		t.remove(id)
	}
}

// search returns the index of the first run with hi >= id.
func (t *refTable) search(id uint64) int {
	// The common cases, appending and settling from the front, avoid the
	// binary search.
	if n := len(t.runs); n == 0 || t.runs[n-1].hi < id {
		return n
	}
	if t.runs[0].hi >= id {
		return 0
	}
	return sort.Search(len(t.runs), func(i int) bool { return t.runs[i].hi >= id })
}

func (t *refTable) contains(id uint64) bool {
	i := t.search(id)
	return i < len(t.runs) && t.runs[i].lo <= id
}

func (t *refTable) add(id uint64) {
	i := t.search(id)
	if i < len(t.runs) && t.runs[i].lo <= id {
		return // present
	}
	joinPrev := i > 0 && t.runs[i-1].hi+1 == id
	joinNext := i < len(t.runs) && t.runs[i].lo == id+1
	switch {
	case joinPrev && joinNext:
		t.runs[i-1].hi = t.runs[i].hi
		t.runs = append(t.runs[:i], t.runs[i+1:]...)
	case joinPrev:
		t.runs[i-1].hi = id
	case joinNext:
		t.runs[i].lo = id
	default:
		t.runs = append(t.runs, idRun{})
		copy(t.runs[i+1:], t.runs[i:])
		t.runs[i] = idRun{id, id}
	}
}

func (t *refTable) remove(id uint64) {
	i := t.search(id)
	if i == len(t.runs) || t.runs[i].lo > id {
		return // absent
	}
	r := t.runs[i]
	switch {
	case r.lo == r.hi:
		t.runs = append(t.runs[:i], t.runs[i+1:]...)
		if len(t.runs) == 0 {
			t.runs = nil // let a drained table shrink
		}
	case id == r.lo:
		t.runs[i].lo++
	case id == r.hi:
		t.runs[i].hi--
	default:
		t.runs = append(t.runs, idRun{})
		copy(t.runs[i+2:], t.runs[i+1:])
		t.runs[i] = idRun{r.lo, id - 1}
		t.runs[i+1] = idRun{id + 1, r.hi}
	}
}

// each calls fn for every live id with its count.
func (t *refTable) each(fn func(id uint64, n int64)) {
	for _, r := range t.runs {
		for id := r.lo; ; id++ {
			fn(id, t.get(id))
			if id == r.hi {
				break
			}
		}
	}
}

// rebuild replaces the table with the counts of ids, one element per
// entry (sorted in place).
func (t *refTable) rebuild(ids []uint64) {
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	*t = refTable{multi: map[uint64]int64{}}
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		t.set(ids[i], int64(j-i))
		i = j
	}
}
