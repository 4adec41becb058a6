// Package binding maps a routing key (and, for headers exchanges, a header
// table) to the set of destinations bound to one exchange.
//
// It holds the four matchers RabbitMQ's built-in exchange types need: Direct
// (exact key), Fanout (everything), Topic (a word trie with '*' and '#') and
// Headers (x-match all/any/all-with-x/any-with-x). The matchers are pure data
// structures: no goroutines, no I/O and no internal locking.
//
// # Concurrency
//
// A matcher is not synchronized. Match only reads the matcher, so any number of
// goroutines may call Match at once as long as no Add, Remove or RemoveDest runs
// concurrently; the owner (the exchange's vhost) guards a matcher with a
// sync.RWMutex, Match under the read lock and mutations under the write lock.
//
// # Header tables
//
// Tables are map[string]any holding the Go values the amqp codec produces:
// bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32,
// float64, a decimal struct, string, []byte, []any, time.Time, nested
// map[string]any (or a named map type such as amqp.Table) and nil (void).
package binding

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

// Kind says whether a destination is a queue or an exchange.
type Kind uint8

const (
	// Queue is a queue destination.
	Queue Kind = iota
	// Exchange is an exchange destination (exchange-to-exchange binding).
	Exchange
)

// String returns "queue" or "exchange", as RabbitMQ names destination kinds.
func (k Kind) String() string {
	switch k {
	case Queue:
		return "queue"
	case Exchange:
		return "exchange"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Destination is what a binding routes to: a queue or an exchange in the same
// vhost. It is comparable and cheap to copy.
type Destination struct {
	Kind Kind
	Name string
}

// Binding is one binding of an exchange (the source, implicit) to Dest.
// Two bindings are the same binding when Dest and Key are equal and Args are
// equal as tables (same keys, same value types, equal values; nil and an empty
// table are equal). Key is ignored by Fanout and Headers matching but is still
// part of a binding's identity, as in RabbitMQ.
type Binding struct {
	Dest Destination
	Key  string
	Args map[string]any
}

// Matcher is the common behaviour of Direct, Fanout, Topic and Headers.
type Matcher interface {
	// Add adds b and reports whether it was new; false means an identical
	// binding already exists. Args are copied (shallowly).
	Add(b Binding) bool
	// Remove removes b and reports whether it existed.
	Remove(b Binding) bool
	// RemoveDest removes every binding to d and returns how many there were.
	RemoveDest(d Destination) int
	// Match appends to out every destination whose binding matches key and
	// headers, each destination at most once, in no particular order. It does
	// not modify the matcher and, once out has enough capacity, does not
	// allocate.
	Match(key string, headers map[string]any, out []Destination) []Destination
	// Len returns the number of bindings.
	Len() int
	// Bindings returns a copy of all bindings, sorted by key, then
	// destination kind and name, then arguments.
	Bindings() []Binding
}

// entry is one stored binding of a destination.
type entry struct {
	key  string
	args map[string]any
}

// bindSet stores bindings grouped by destination; it is the source of truth
// for identity, Len, Bindings and RemoveDest. Each matcher keeps an index
// beside it.
//
// A destination's few bindings are a slice, scanned; past
// destKeysThreshold they are indexed by key, so that binding a million keys
// to one queue costs O(1) per binding instead of a scan of those already
// there. probes counts the entries compared, for the tests.
type bindSet struct {
	byDest map[Destination]destBindings
	n      int
	probes int
}

// destBindings is one destination's bindings: in few while byKey is nil,
// else in byKey (key -> the args of each binding with that key; usually
// one).
type destBindings struct {
	few   []entry
	byKey map[string][]map[string]any
	n     int
}

const destKeysThreshold = 16

func copyArgs(args map[string]any) map[string]any {
	if len(args) == 0 {
		return nil
	}
	c := make(map[string]any, len(args))
	for k, v := range args {
		c[k] = v
	}
	return c
}

// add records b; it returns the stored args copy and whether b was new.
func (s *bindSet) add(b Binding) (map[string]any, bool) {
	if s.byDest == nil {
		s.byDest = make(map[Destination]destBindings)
	}
	db := s.byDest[b.Dest]
	var args map[string]any
	if db.byKey != nil {
		vs := db.byKey[b.Key]
		for _, a := range vs {
			s.probes++
			if ArgsEqual(a, b.Args) {
				return nil, false
			}
		}
		args = copyArgs(b.Args)
		db.byKey[b.Key] = append(vs, args)
	} else {
		for _, e := range db.few {
			s.probes++
			if e.key == b.Key && ArgsEqual(e.args, b.Args) {
				return nil, false
			}
		}
		args = copyArgs(b.Args)
		db.few = append(db.few, entry{key: b.Key, args: args})
		if len(db.few) > destKeysThreshold {
			db.byKey = make(map[string][]map[string]any, 2*len(db.few))
			for _, e := range db.few {
				db.byKey[e.key] = append(db.byKey[e.key], e.args)
			}
			db.few = nil
		}
	}
	db.n++
	s.byDest[b.Dest] = db
	s.n++
	return args, true
}

// remove deletes b; it returns the stored args and whether b existed.
func (s *bindSet) remove(b Binding) (map[string]any, bool) {
	db, ok := s.byDest[b.Dest]
	if !ok {
		return nil, false
	}
	var args map[string]any
	found := false
	if db.byKey != nil {
		vs := db.byKey[b.Key]
		for i, a := range vs {
			s.probes++
			if ArgsEqual(a, b.Args) {
				args, found = a, true
				if len(vs) == 1 {
					delete(db.byKey, b.Key)
				} else {
					vs[i] = vs[len(vs)-1]
					vs[len(vs)-1] = nil
					db.byKey[b.Key] = vs[:len(vs)-1]
				}
				break
			}
		}
	} else {
		es := db.few
		for i, e := range es {
			s.probes++
			if e.key == b.Key && ArgsEqual(e.args, b.Args) {
				args, found = e.args, true
				es[i] = es[len(es)-1]
				es[len(es)-1] = entry{}
				db.few = es[:len(es)-1]
				break
			}
		}
	}
	if !found {
		return nil, false
	}
	s.n--
	if db.n--; db.n == 0 {
		delete(s.byDest, b.Dest)
	} else {
		s.byDest[b.Dest] = db
	}
	return args, true
}

// removeDest deletes and returns every entry for d.
func (s *bindSet) removeDest(d Destination) []entry {
	db, ok := s.byDest[d]
	if !ok {
		return nil
	}
	delete(s.byDest, d)
	s.n -= db.n
	return db.entries(nil)
}

// entries appends the destination's bindings to out.
func (db destBindings) entries(out []entry) []entry {
	if db.byKey == nil {
		return append(out, db.few...)
	}
	for k, vs := range db.byKey {
		for _, a := range vs {
			out = append(out, entry{key: k, args: a})
		}
	}
	return out
}

func (s *bindSet) list() []Binding {
	out := make([]Binding, 0, s.n)
	var es []entry
	for d, db := range s.byDest {
		es = db.entries(es[:0])
		for _, e := range es {
			out = append(out, Binding{Dest: d, Key: e.key, Args: copyArgs(e.args)})
		}
	}
	slices.SortFunc(out, compareBindings)
	return out
}

func compareBindings(a, b Binding) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Dest.Kind, b.Dest.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Dest.Name, b.Dest.Name); c != 0 {
		return c
	}
	// fmt prints maps with sorted keys, so this is deterministic.
	return strings.Compare(fmt.Sprint(a.Args), fmt.Sprint(b.Args))
}

// destCounts is a set of destinations with a reference count each (several
// bindings, differing only in args, may lead to the same destination through
// the same index slot). list holds each destination once, so Match can append
// it without deduplicating.
type destCounts struct {
	list   []Destination
	counts []int32
	idx    map[Destination]int32 // built once list is long
}

const destIndexThreshold = 16

func (dc *destCounts) find(d Destination) int {
	if dc.idx != nil {
		if i, ok := dc.idx[d]; ok {
			return int(i)
		}
		return -1
	}
	for i, x := range dc.list {
		if x == d {
			return i
		}
	}
	return -1
}

func (dc *destCounts) inc(d Destination) {
	if i := dc.find(d); i >= 0 {
		dc.counts[i]++
		return
	}
	dc.list = append(dc.list, d)
	dc.counts = append(dc.counts, 1)
	if dc.idx != nil {
		dc.idx[d] = int32(len(dc.list) - 1)
	} else if len(dc.list) > destIndexThreshold {
		dc.idx = make(map[Destination]int32, len(dc.list)*2)
		for i, x := range dc.list {
			dc.idx[x] = int32(i)
		}
	}
}

// dec drops n references to d (all of them if n < 0) and returns how many
// references remain.
func (dc *destCounts) dec(d Destination, n int32) int32 {
	i := dc.find(d)
	if i < 0 {
		return 0
	}
	if n >= 0 && dc.counts[i] > n {
		dc.counts[i] -= n
		return dc.counts[i]
	}
	last := len(dc.list) - 1
	if i != last {
		dc.list[i] = dc.list[last]
		dc.counts[i] = dc.counts[last]
		if dc.idx != nil {
			dc.idx[dc.list[i]] = int32(i)
		}
	}
	dc.list[last] = Destination{}
	dc.list = dc.list[:last]
	dc.counts = dc.counts[:last]
	if dc.idx != nil {
		delete(dc.idx, d)
	}
	return 0
}

func (dc *destCounts) empty() bool { return len(dc.list) == 0 }

// dedupSeed seeds the hash dedup uses; it is set once at start-up and only
// read afterwards.
var dedupSeed = maphash.MakeSeed()

// dedup removes duplicate destinations from out[start:] in place, keeping
// out[:start] untouched and the first occurrence of each destination, without
// allocating: a quadratic scan for short tails, an open-addressing hash table
// on the stack up to 512 entries, and sort+compact beyond that.
func dedup(out []Destination, start int) []Destination {
	tail := out[start:]
	if len(tail) < 2 {
		return out
	}
	n := 0
	switch {
	case len(tail) <= 16:
	outer:
		for _, d := range tail {
			for _, x := range tail[:n] {
				if x == d {
					continue outer
				}
			}
			tail[n] = d
			n++
		}
	case len(tail) <= 512:
		var slots [1024]int32 // index+1 into tail of a kept destination; 0 is empty
		size := 64
		for size < 2*len(tail) {
			size *= 2
		}
		mask := uint64(size - 1)
		for _, d := range tail {
			h := maphash.String(dedupSeed, d.Name) + uint64(d.Kind)
			for i := h & mask; ; i = (i + 1) & mask {
				s := slots[i]
				if s == 0 {
					slots[i] = int32(n + 1)
					tail[n] = d
					n++
					break
				}
				if tail[s-1] == d {
					break
				}
			}
		}
	default:
		slices.SortFunc(tail, func(a, b Destination) int {
			if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		n = len(slices.Compact(tail))
	}
	clear(tail[n:])
	return out[:start+n]
}
