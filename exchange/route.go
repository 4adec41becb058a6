package exchange

import "github.com/warrenmq/warren/binding"

// Lookup finds an exchange of the same vhost by name, or returns nil. It is
// called with the vhost's read lock held and must not take it again.
type Lookup func(name string) *Exchange

// Scratch is per-goroutine working memory for RouteAll, so that routing does
// not allocate in steady state. The zero value is ready to use; it must not be
// shared by concurrent RouteAll calls.
type Scratch struct {
	dests  []binding.Destination
	work   []*Exchange
	seen   nameSet // exchanges visited
	queues nameSet // queue names already in out
}

// nameSet is a set of names that scans a slice while small and switches to
// a map beyond smallSet names; reset keeps the memory.
type nameSet struct {
	list  []string
	m     map[string]struct{}
	inMap bool
}

const smallSet = 16

func (s *nameSet) reset() {
	clear(s.list)
	s.list = s.list[:0]
	if s.inMap {
		clear(s.m)
		s.inMap = false
	}
}

// add adds name and reports whether it was absent.
func (s *nameSet) add(name string) bool {
	if s.inMap {
		if _, ok := s.m[name]; ok {
			return false
		}
		s.m[name] = struct{}{}
		return true
	}
	for _, x := range s.list {
		if x == name {
			return false
		}
	}
	s.list = append(s.list, name)
	if len(s.list) > smallSet {
		if s.m == nil {
			s.m = make(map[string]struct{}, 4*smallSet)
		}
		for _, x := range s.list {
			s.m[x] = struct{}{}
		}
		s.inMap = true
	}
	return true
}

// RouteAll appends to out the names of the queues a message published to
// start with key and headers reaches, each name once. start itself must be a
// real exchange (the caller handles the default exchange "").
//
// It follows RabbitMQ's rabbit_exchange:route (verified against 3.10.8):
//
//   - Each exchange reached, start included, is routed once: exchange
//     destinations are followed recursively and a cycle (including binding an
//     exchange to itself) stops at an exchange already visited.
//   - An exchange's alternate exchange is followed when that exchange's own
//     bindings match nothing. A binding to another exchange counts as a match
//     even if that exchange then routes nowhere, so the first exchange's AE is
//     then not used; the second exchange's own AE is. Every exchange reached
//     (through a binding or as an AE) applies its own AE, so AEs chain, and
//     AE cycles stop at visited exchanges.
//   - Exchanges lookup cannot find are skipped, as is the default exchange ""
//     (RabbitMQ refuses bindings to it, and as an AE it routes nothing since
//     its implicit bindings are not stored).
//
// The order of the names appended is unspecified.
func RouteAll(lookup Lookup, start *Exchange, key string, headers map[string]any, scratch *Scratch, out []string) []string {
	return routeKeys(lookup, start, key, nil, headers, scratch, out)
}

// RouteAllCC is RouteAll for a message with more routing keys than key (a
// publish's CC and BCC headers): every exchange reached routes all the keys
// at once, so its alternate exchange is used only when none of them matches,
// as in RabbitMQ, whose deliveries carry the list of routing keys.
func RouteAllCC(lookup Lookup, start *Exchange, key string, cc []string, headers map[string]any, scratch *Scratch, out []string) []string {
	return routeKeys(lookup, start, key, cc, headers, scratch, out)
}

func routeKeys(lookup Lookup, start *Exchange, key string, cc []string, headers map[string]any, scratch *Scratch, out []string) []string {
	if start == nil {
		return out
	}
	s := scratch
	if s == nil {
		s = &Scratch{}
	}
	base := len(out)
	work := append(s.work[:0], start)
	visited := 0        // exchanges routed so far
	seenInit := false   // s.seen holds this call's visited exchanges
	queuesInit := false // s.queues holds out[base:]
	if len(cc) > 0 {
		// Several keys may match the same queue even in start.
		queuesInit = true
		s.queues.reset()
	}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		visited++
		dests := x.Route(key, headers, s.dests[:0])
		for _, k := range cc {
			dests = x.Route(k, headers, dests)
		}
		if len(dests) == 0 && x.ae != "" {
			dests = append(dests, binding.Destination{Kind: binding.Exchange, Name: x.ae})
		}
		if visited == 2 && !queuesInit {
			// From the second exchange on, queue names may repeat.
			queuesInit = true
			s.queues.reset()
			for _, q := range out[base:] {
				s.queues.add(q)
			}
		}
		for _, d := range dests {
			if d.Kind == binding.Queue {
				if !queuesInit || s.queues.add(d.Name) {
					out = append(out, d.Name)
				}
				continue
			}
			if d.Name == "" {
				continue // the default exchange: see the package doc
			}
			if !seenInit {
				seenInit = true
				s.seen.reset()
				s.seen.add(start.Name)
			}
			if !s.seen.add(d.Name) {
				continue
			}
			if next := lookup(d.Name); next != nil {
				work = append(work, next)
			}
		}
		s.dests = dests[:0]
	}
	clear(work[:cap(work)])
	s.work = work[:0]
	return out
}
