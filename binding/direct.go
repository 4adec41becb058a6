package binding

// Direct matches a routing key exactly against binding keys, as a direct
// exchange does. Every destination bound with the key matches (not just the
// first). The zero value is ready to use.
type Direct struct {
	set   bindSet
	index map[string]*destCounts
}

var _ Matcher = (*Direct)(nil)

// NewDirect returns an empty Direct matcher.
func NewDirect() *Direct { return &Direct{} }

// Add implements Matcher.
func (m *Direct) Add(b Binding) bool {
	if _, ok := m.set.add(b); !ok {
		return false
	}
	if m.index == nil {
		m.index = make(map[string]*destCounts)
	}
	dc := m.index[b.Key]
	if dc == nil {
		dc = &destCounts{}
		m.index[b.Key] = dc
	}
	dc.inc(b.Dest)
	return true
}

// Remove implements Matcher.
func (m *Direct) Remove(b Binding) bool {
	if _, ok := m.set.remove(b); !ok {
		return false
	}
	m.drop(b.Key, b.Dest)
	return true
}

func (m *Direct) drop(key string, d Destination) {
	dc := m.index[key]
	if dc == nil {
		return
	}
	dc.dec(d, 1)
	if dc.empty() {
		delete(m.index, key)
	}
}

// RemoveDest implements Matcher.
func (m *Direct) RemoveDest(d Destination) int {
	es := m.set.removeDest(d)
	for _, e := range es {
		m.drop(e.key, d)
	}
	return len(es)
}

// Match implements Matcher. headers is ignored.
func (m *Direct) Match(key string, _ map[string]any, out []Destination) []Destination {
	if dc := m.index[key]; dc != nil {
		out = append(out, dc.list...)
	}
	return out
}

// Len implements Matcher.
func (m *Direct) Len() int { return m.set.n }

// Bindings implements Matcher.
func (m *Direct) Bindings() []Binding { return m.set.list() }
