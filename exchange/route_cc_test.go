package exchange

import (
	"slices"
	"testing"
)

// TestRouteAllCC: a message with CC keys, as RabbitMQ 3.10.8 routes it
// (conformance case basic/publish-cc-alternate-exchange): each exchange
// routes all the keys together, its AE only when none matches, and every
// queue is named once.
func TestRouteAllCC(t *testing.T) {
	var s Scratch
	v := vhost{}
	x, ae, y := v.decl("x", Direct, "ae"), v.decl("ae", Fanout, "-"), v.decl("y", Direct, "-")
	bindQ(t, ae, "qa", "")
	bindQ(t, x, "q2", "two")
	bindQ(t, x, "q2", "three")
	bindX(t, x, "y", "four")
	bindQ(t, y, "q2", "four")
	bindQ(t, y, "q5", "five")
	for _, tc := range []struct {
		key  string
		cc   []string
		want []string
	}{
		{"one", nil, []string{"qa"}},
		{"one", []string{"two"}, []string{"q2"}},
		{"one", []string{"six"}, []string{"qa"}},
		{"two", []string{"three", "two"}, []string{"q2"}},
		// y routes every key too: four to y, then four and five there.
		{"four", []string{"five", "two"}, []string{"q2", "q5"}},
	} {
		got := RouteAllCC(v.lookup, x, tc.key, tc.cc, nil, &s, nil)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("key %q cc %q: %q, want %q", tc.key, tc.cc, got, tc.want)
		}
	}
}
