package auth

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestThrottle(c *fakeClock) *Throttle {
	return NewThrottle(ThrottleConfig{Free: 2, Base: 100 * time.Millisecond, Max: time.Second, Forget: time.Minute, MaxPending: 2, MaxKeys: 4, Now: c.now})
}

// fail makes one failed attempt from source as user and returns its delay.
func fail(t *testing.T, th *Throttle, source, user string) time.Duration {
	t.Helper()
	a := th.Begin(source)
	defer a.End()
	if a.Refused {
		t.Fatalf("attempt from %s refused", source)
	}
	return a.Failed(user).Delay
}

func TestThrottleDelaysRepeatedFailures(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	th := newTestThrottle(c)
	var got []time.Duration
	for range 7 {
		got = append(got, fail(t, th, "10.0.0.1", "guest"))
		c.advance(time.Millisecond)
	}
	want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delays = %v, want %v", got, want)
	}
	// After a quiet minute the source and the user start afresh.
	c.advance(time.Minute + time.Second)
	if d := fail(t, th, "10.0.0.1", "guest"); d != 0 {
		t.Fatalf("after a quiet minute: delay %v", d)
	}
}

func TestThrottleCountsUsersAcrossSources(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	th := newTestThrottle(c)
	// One guess each from many sources at one user: the user's count
	// delays them.
	var last time.Duration
	for i := range 4 {
		last = fail(t, th, fmt.Sprintf("10.0.0.%d", i), "admin")
	}
	if last != 200*time.Millisecond {
		t.Fatalf("4th failure on one user from 4 sources: delay %v, want 200ms", last)
	}
	// Another user from a fresh source is not slowed.
	if d := fail(t, th, "10.0.1.1", "bob"); d != 0 {
		t.Fatalf("other user: delay %v", d)
	}
}

func TestThrottleNeverRefusesAnotherSource(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	th := newTestThrottle(c)
	for range 3 {
		fail(t, th, "10.0.0.1", "guest")
	}
	// Two attempts of the failing source are in flight (held back):
	// a third one is refused without a check.
	a1, a2 := th.Begin("10.0.0.1"), th.Begin("10.0.0.1")
	if a1.Refused || a2.Refused {
		t.Fatal("attempts within MaxPending refused")
	}
	a1.Failed("guest")
	a2.Failed("guest")
	if a3 := th.Begin("10.0.0.1"); !a3.Refused {
		t.Fatal("third concurrent attempt of a failing source admitted")
	}
	// Another source is admitted while the user is being guessed at, and
	// a correct password there is simply not recorded as a failure.
	b := th.Begin("10.0.0.2")
	if b.Refused {
		t.Fatal("another source refused")
	}
	b.End()
	a1.End()
	if a4 := th.Begin("10.0.0.1"); a4.Refused {
		t.Fatal("attempt refused after one in flight ended")
	} else {
		a4.End()
	}
	a2.End()
}

func TestThrottleBoundsItsRecords(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	th := newTestThrottle(c)
	for i := range 100 {
		fail(t, th, fmt.Sprintf("10.0.%d.1", i), fmt.Sprintf("user%d", i))
	}
	th.mu.Lock()
	ns, nu := len(th.sources), len(th.users)
	th.mu.Unlock()
	if ns > 4 || nu > 4 {
		t.Fatalf("records: %d sources, %d users, want at most 4 each", ns, nu)
	}
	// The spilled keys share a record, so a flood of new names is still
	// slowed.
	if d := fail(t, th, "10.9.9.9", "fresh"); d != time.Second {
		t.Fatalf("spilled failure delay %v, want the maximum", d)
	}
	// Once forgotten, the records make room again.
	c.advance(2 * time.Minute)
	if d := fail(t, th, "10.8.8.8", "newer"); d != 0 {
		t.Fatalf("after the old records are forgotten: delay %v", d)
	}
}

func TestThrottleLogsRefusalsOnceASecond(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	th := newTestThrottle(c)
	if ok, n := th.LogRefusal(); !ok || n != 0 {
		t.Fatalf("first refusal: log %v, %d unlogged", ok, n)
	}
	for range 5 {
		c.advance(100 * time.Millisecond)
		if ok, _ := th.LogRefusal(); ok {
			t.Fatal("refusal logged twice within a second")
		}
	}
	c.advance(600 * time.Millisecond)
	if ok, n := th.LogRefusal(); !ok || n != 5 {
		t.Fatalf("a second later: log %v, %d unlogged, want true, 5", ok, n)
	}
}

func TestSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3:5555": "10.1.2.3", "[::1]:80": "::1", "127.0.0.1": "127.0.0.1", "pipe": "", "": "",
	} {
		if got := SourceOf(in); got != want {
			t.Errorf("SourceOf(%q) = %q, want %q", in, got, want)
		}
	}
}
