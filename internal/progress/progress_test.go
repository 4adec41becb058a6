package progress

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the meter's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output matches re.
func waitFor(t *testing.T, w *syncBuffer, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for !r.MatchString(w.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("output never matched %s:\n%q", re, w.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPlainLines: off a terminal, a line of its own every interval, with
// the count that moves, the percentage, a rate and an ETA; Done adds the
// total and the average.
func TestPlainLines(t *testing.T) {
	var w syncBuffer
	m := start(&w, "fill", 1000, Options{Interval: 20 * time.Millisecond, Unit: "msg", Extra: func() string { return "rss 12 MB" }}, false)
	m.Add(250)
	waitFor(t, &w, `(?m)^fill  250 / 1,000 msg   25\.0%  [0-9.kM]+ msg/s  ETA [^ ]+  elapsed [^ ]+  rss 12 MB\n`)
	m.Set(600)
	waitFor(t, &w, `(?m)^fill  600 / 1,000 msg   60\.0%`)
	m.Set(1000)
	m.Done()
	m.Done() // idempotent
	out := w.String()
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b") {
		t.Errorf("plain output has terminal controls: %q", out)
	}
	if !regexp.MustCompile(`(?m)^fill 1,000 / 1,000 msg in [^ ]+ \([0-9.kM]+ msg/s avg\)  rss 12 MB\n\z`).MatchString(out) {
		t.Errorf("last line: %q", out)
	}
	if n := strings.Count(out, "fill 1,000 / 1,000 msg in"); n != 1 {
		t.Errorf("final line written %d times", n)
	}
}

// TestLive: on a terminal the line is redrawn in place (carriage return,
// erase to the end) and only the final one ends with a newline.
func TestLive(t *testing.T) {
	var w syncBuffer
	m := start(&w, "drain", 0, Options{}, true)
	m.Add(5)
	waitFor(t, &w, `\rdrain  5  [0-9.kM]+ /s  elapsed [^ ]+\x1b\[K`)
	if strings.Contains(w.String(), "\n") {
		t.Errorf("a live line ended with a newline before Done: %q", w.String())
	}
	m.Done()
	if out := w.String(); !strings.HasSuffix(out, "\x1b[K\n") || !strings.Contains(out, "\rdrain 5 in ") {
		t.Errorf("final live line: %q", out)
	}
}

func TestOff(t *testing.T) {
	var w syncBuffer
	m := start(&w, "x", 10, Options{Mode: Off, Interval: time.Millisecond}, true)
	m.Add(10)
	m.Done()
	if w.String() != "" {
		t.Errorf("--progress off wrote %q", w.String())
	}
}

func TestRateAndETA(t *testing.T) {
	m := &Meter{label: "f", total: 100, start: time.Now().Add(-10 * time.Second), opts: Options{Mode: Plain}}
	var w syncBuffer
	m.w = &w
	m.n.Store(50)
	m.show(time.Now())
	// 50 in 10 s: 5/s, 50 left: 10 s.
	if out := w.String(); !strings.Contains(out, " 5 /s  ETA 10s  elapsed 10s") {
		t.Errorf("line %q", out)
	}
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(in); got != want {
			t.Errorf("Count(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{950: "950", 27600: "27.6k", 1.25e6: "1.2M"} {
		if got := Rate(in); got != want {
			t.Errorf("Rate(%v) = %q, want %q", in, got, want)
		}
	}
}
