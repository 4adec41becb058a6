package ack

import "testing"

func TestCredit(t *testing.T) {
	var c Credit
	c.Qos(2, false)
	a, b := c.NewConsumer(), c.NewConsumer()
	c.Take(&a)
	c.Take(&a)
	if c.Room(&a) {
		t.Fatal("a consumer at its prefetch of 2 has room")
	}
	if !c.Room(&b) {
		t.Fatal("a per-consumer limit held another consumer back")
	}
	if limited := c.Release([]Delivery{{Tag: 1, Credit: &a}, {Tag: 2}}); !limited {
		t.Fatal("releasing a limited consumer's delivery did not report the limit")
	}
	if !c.Room(&a) {
		t.Fatal("no room after an ack")
	}

	// A shared limit counts every consumer's deliveries; a per-consumer
	// qos lifts it, as in RabbitMQ.
	var g Credit
	g.Qos(3, true)
	x, y := g.NewConsumer(), g.NewConsumer()
	g.Take(&x)
	g.Take(&x)
	g.Take(&y)
	if g.Room(&x) || g.Room(&y) {
		t.Fatal("room past the channel's shared prefetch of 3")
	}
	g.Qos(0, false)
	if !g.Room(&x) {
		t.Fatal("basic.qos per consumer did not lift the shared limit")
	}
	if pre, global := g.Prefetch(); pre != 0 || global != 0 {
		t.Fatalf("Prefetch = %d %d, want 0 0", pre, global)
	}
	g.Reset()
	g.Qos(1, true)
	if !g.Room(&x) {
		t.Fatal("no room after Reset")
	}
}
