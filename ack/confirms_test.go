package ack

import (
	"fmt"
	"strings"
	"testing"
)

func TestConfirmsInOrderWithRuns(t *testing.T) {
	var out []string
	c := NewConfirms(func(tag uint64, multiple, nack bool) {
		out = append(out, fmt.Sprintf("%v:%d:%v", map[bool]string{false: "ack", true: "nack"}[nack], tag, multiple))
	})
	for i := 0; i < 6; i++ {
		c.Next()
	}
	c.Resolve(2, true) // held behind 1
	c.Resolve(3, false)
	c.Resolve(5, true)
	if len(out) != 0 {
		t.Fatalf("emitted early: %v", out)
	}
	c.Resolve(1, true) // releases 1,2 as one multiple ack, then nack 3
	c.Resolve(4, true) // releases 4,5
	c.Resolve(6, true)
	c.Resolve(6, true) // duplicate: ignored
	got := strings.Join(out, " ")
	want := "ack:2:true nack:3:false ack:5:true ack:6:false"
	if got != want {
		t.Fatalf("confirms %q, want %q", got, want)
	}
}
