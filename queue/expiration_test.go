package queue

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
		{"999999999999999999999999", MaxExpiration, true, ""},
		{"-1", 0, false, "{value_negative,-1}"},
		{"1.5", 0, false, `{leftover_string,".5"}`},
		{"12abc", 0, false, `{leftover_string,"abc"}`},
		{"abc", 0, false, "no_integer"},
		{"", 0, false, "no_integer"},
		{"-", 0, false, "no_integer"},
		{" 5", 0, false, "no_integer"},
	} {
		ttl, ok := ParseExpiration(c.exp)
		if ok != c.ok || (ok && ttl != c.ttl) {
			t.Errorf("ParseExpiration(%q) = %v, %v; want %v, %v", c.exp, ttl, ok, c.ttl, c.ok)
		}
		if !ok {
			if r := ExpirationError(c.exp); r != c.reason {
				t.Errorf("ExpirationError(%q) = %s, want %s", c.exp, r, c.reason)
			}
		}
	}
}
