package binding

import "strings"

// Topic matches routing keys against topic binding keys, as RabbitMQ's topic
// exchange does.
//
// Keys are split into words on '.'. Every word counts, including empty ones:
// "a..b" has three words, "." two empty words, "a." the words "a" and "".
// The empty key "" has zero words (RabbitMQ splits it to []), so it is matched
// only by binding keys of zero words (""), or made only of '#' words ("#",
// "#.#"). In a binding key, a word that is exactly "*" matches exactly one
// word and a word that is exactly "#" matches zero or more words: "a.#"
// matches "a", "#.a" matches "a", "a.#.b" matches "a.b". Any other word
// ("a*", "##") is literal.
//
// The bindings form a word trie. Match runs it as an NFA, keeping the set of
// live trie nodes word by word, so its cost is bounded by
// words × live nodes even for adversarial patterns such as "#.a.#.a.#.a"
// (RabbitMQ backtracks there). The zero value is ready to use.
type Topic struct {
	set  bindSet
	root *topicNode
}

var _ Matcher = (*Topic)(nil)

type topicNode struct {
	words map[string]*topicNode // literal children
	star  *topicNode            // child through a "*" word
	hash  *topicNode            // child through a "#" word
	loop  bool                  // reached through "#": stays live on any word
	dests destCounts            // destinations of binding keys ending here
}

func (n *topicNode) isEmpty() bool {
	return n.dests.empty() && len(n.words) == 0 && n.star == nil && n.hash == nil
}

// NewTopic returns an empty Topic matcher.
func NewTopic() *Topic { return &Topic{} }

// splitWords splits a key into words the way RabbitMQ does ("" has none).
func splitWords(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ".")
}

// Add implements Matcher.
func (m *Topic) Add(b Binding) bool {
	if _, ok := m.set.add(b); !ok {
		return false
	}
	if m.root == nil {
		m.root = &topicNode{}
	}
	n := m.root
	for _, w := range splitWords(b.Key) {
		switch w {
		case "*":
			if n.star == nil {
				n.star = &topicNode{}
			}
			n = n.star
		case "#":
			if n.hash == nil {
				n.hash = &topicNode{loop: true}
			}
			n = n.hash
		default:
			c := n.words[w]
			if c == nil {
				if n.words == nil {
					n.words = make(map[string]*topicNode)
				}
				c = &topicNode{}
				n.words[w] = c
			}
			n = c
		}
	}
	n.dests.inc(b.Dest)
	return true
}

// Remove implements Matcher.
func (m *Topic) Remove(b Binding) bool {
	if _, ok := m.set.remove(b); !ok {
		return false
	}
	m.drop(b.Key, b.Dest)
	return true
}

// drop removes one reference to d at the node for key and prunes nodes left
// empty.
func (m *Topic) drop(key string, d Destination) {
	if m.root == nil {
		return
	}
	m.root.remove(splitWords(key), d)
	if m.root.isEmpty() {
		m.root = nil
	}
}

func (n *topicNode) remove(words []string, d Destination) {
	if len(words) == 0 {
		n.dests.dec(d, 1)
		return
	}
	w := words[0]
	var c *topicNode
	switch w {
	case "*":
		c = n.star
	case "#":
		c = n.hash
	default:
		c = n.words[w]
	}
	if c == nil {
		return
	}
	c.remove(words[1:], d)
	if !c.isEmpty() {
		return
	}
	switch w {
	case "*":
		n.star = nil
	case "#":
		n.hash = nil
	default:
		delete(n.words, w)
	}
}

// RemoveDest implements Matcher.
func (m *Topic) RemoveDest(d Destination) int {
	es := m.set.removeDest(d)
	for _, e := range es {
		m.drop(e.key, d)
	}
	return len(es)
}

// addState adds n and the nodes reachable from it through "#" edges (a "#"
// may match zero words) to the live set s, skipping those already present.
func addState(s []*topicNode, n *topicNode) []*topicNode {
	for n != nil {
		for _, x := range s {
			if x == n {
				return s
			}
		}
		s = append(s, n)
		n = n.hash
	}
	return s
}

// Match implements Matcher. headers is ignored.
func (m *Topic) Match(key string, _ map[string]any, out []Destination) []Destination {
	if m.root == nil {
		return out
	}
	var bufA, bufB [64]*topicNode
	cur := addState(bufA[:0], m.root)
	next := bufB[:0]
	if key != "" {
		for i := 0; ; {
			j := strings.IndexByte(key[i:], '.')
			w := key[i:]
			if j >= 0 {
				w = key[i : i+j]
			}
			next = next[:0]
			for _, n := range cur {
				if n.words != nil {
					if c := n.words[w]; c != nil {
						next = addState(next, c)
					}
				}
				if n.star != nil {
					next = addState(next, n.star)
				}
				if n.loop {
					next = addState(next, n)
				}
			}
			cur, next = next, cur
			if len(cur) == 0 {
				return out
			}
			if j < 0 {
				break
			}
			i += j + 1
		}
	}
	start, nodes := len(out), 0
	for _, n := range cur {
		if len(n.dests.list) > 0 {
			out = append(out, n.dests.list...)
			nodes++
		}
	}
	if nodes > 1 {
		out = dedup(out, start)
	}
	return out
}

// Len implements Matcher.
func (m *Topic) Len() int { return m.set.n }

// Bindings implements Matcher.
func (m *Topic) Bindings() []Binding { return m.set.list() }
