package binding

// Fanout matches every bound destination whatever the key and headers, as a
// fanout exchange does. The zero value is ready to use.
type Fanout struct {
	set   bindSet
	dests destCounts
}

var _ Matcher = (*Fanout)(nil)

// NewFanout returns an empty Fanout matcher.
func NewFanout() *Fanout { return &Fanout{} }

// Add implements Matcher.
func (m *Fanout) Add(b Binding) bool {
	if _, ok := m.set.add(b); !ok {
		return false
	}
	m.dests.inc(b.Dest)
	return true
}

// Remove implements Matcher.
func (m *Fanout) Remove(b Binding) bool {
	if _, ok := m.set.remove(b); !ok {
		return false
	}
	m.dests.dec(b.Dest, 1)
	return true
}

// RemoveDest implements Matcher.
func (m *Fanout) RemoveDest(d Destination) int {
	n := len(m.set.removeDest(d))
	if n > 0 {
		m.dests.dec(d, -1)
	}
	return n
}

// Match implements Matcher. key and headers are ignored.
func (m *Fanout) Match(_ string, _ map[string]any, out []Destination) []Destination {
	return append(out, m.dests.list...)
}

// Len implements Matcher.
func (m *Fanout) Len() int { return m.set.n }

// Bindings implements Matcher.
func (m *Fanout) Bindings() []Binding { return m.set.list() }
