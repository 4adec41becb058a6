package server

import (
	"testing"
	"time"
)

func TestParseExpiration(t *testing.T) {
	for _, c := range []struct {
		exp    string
		ttl    time.Duration
		ok     bool
		reason string
	}{
		{"0", 0, true, ""},
		{"60000", time.Minute, true, ""},
		{"+5", 5 * time.Millisecond, true, ""},
		{"99999999999", 99999999999 * time.Millisecond, true, ""},
		{"999999999999999999999999", maxExpiration, true, ""},
		{"-1", 0, false, "{value_negative,-1}"},
		{"1.5", 0, false, `{leftover_string,".5"}`},
		{"12abc", 0, false, `{leftover_string,"abc"}`},
		{"abc", 0, false, "no_integer"},
		{"", 0, false, "no_integer"},
		{"-", 0, false, "no_integer"},
		{" 5", 0, false, "no_integer"},
	} {
		ttl, ok := parseExpiration(c.exp)
		if ok != c.ok || (ok && ttl != c.ttl) {
			t.Errorf("parseExpiration(%q) = %v, %v; want %v, %v", c.exp, ttl, ok, c.ttl, c.ok)
		}
		if !ok {
			if r := expirationError(c.exp); r != c.reason {
				t.Errorf("expirationError(%q) = %s, want %s", c.exp, r, c.reason)
			}
		}
	}
}
