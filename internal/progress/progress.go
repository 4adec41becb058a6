// Package progress shows a long run's progress on stderr: a count that
// moves, its current rate and, when the total is known, the percentage and
// the time left.
//
// On a terminal the meter redraws one line in place five times a second;
// off a terminal (a log file, CI) it writes a plain line every Interval
// (default 10 s) so that logs stay readable; Mode "off" writes nothing.
// Done ends the line with the totals and the average rate.
package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Modes a tool's --progress flag takes.
const (
	Auto  = "auto"  // live on a terminal, plain lines otherwise
	Plain = "plain" // plain lines, whatever the output
	Off   = "off"   // nothing
)

// Options configure a Meter.
type Options struct {
	// Mode is Auto (default), Plain or Off.
	Mode string
	// Interval is how often a plain line is written (default 10 s).
	Interval time.Duration
	// Unit names what is counted ("msg", "conn"; default "").
	Unit string
	// Poll, when set, is read for the count at each redraw (a count kept
	// elsewhere), instead of Add and Set.
	Poll func() int64
	// Extra, when set, adds fields at the end of each line (the broker's
	// RSS, say). It is called from the meter's goroutine.
	Extra func() string
}

// Meter counts toward a total (0: unknown) and shows it; Add and Set may
// be called from any goroutine.
type Meter struct {
	w     io.Writer
	label string
	total int64
	opts  Options
	live  bool // redraw in place (a terminal)

	n     atomic.Int64
	start time.Time

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once

	// The rate is over the last few seconds: samples is a ring of
	// (time, count) taken at each redraw.
	samples []sample
}

type sample struct {
	at time.Time
	n  int64
}

// rateWindow is how far back the current rate looks.
const rateWindow = 3 * time.Second

// Start begins a meter on w labelled label ("fill", "drain") and starts
// its goroutine; Done stops it.
func Start(w io.Writer, label string, total int64, opts Options) *Meter {
	return start(w, label, total, opts, IsTerminal(w))
}

// start is Start with the terminal question answered (tests).
func start(w io.Writer, label string, total int64, opts Options, terminal bool) *Meter {
	if opts.Mode == "" {
		opts.Mode = Auto
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	m := &Meter{w: w, label: label, total: total, opts: opts, start: time.Now(), stop: make(chan struct{})}
	if opts.Mode == Off {
		return m
	}
	m.live = opts.Mode == Auto && terminal
	every := opts.Interval
	if m.live {
		every = 200 * time.Millisecond
	}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case now := <-t.C:
				m.show(now)
			}
		}
	}()
	return m
}

// Add counts n more.
func (m *Meter) Add(n int64) { m.n.Add(n) }

// Set sets the count (for a count kept elsewhere).
func (m *Meter) Set(n int64) { m.n.Store(n) }

// Done stops the meter and writes its last line: the count, the time it
// took and the average rate. It is safe to call more than once.
func (m *Meter) Done() {
	m.once.Do(func() {
		close(m.stop)
		m.done.Wait()
		if m.opts.Mode == Off {
			return
		}
		el := time.Since(m.start)
		n := m.load()
		line := fmt.Sprintf("%s %s in %s (%s avg)", m.label, m.count(n), roundDur(el), m.rate(float64(n)/el.Seconds()))
		if m.opts.Extra != nil {
			if x := m.opts.Extra(); x != "" {
				line += "  " + x
			}
		}
		m.write(line, true)
	})
}

// load is the count now.
func (m *Meter) load() int64 {
	if m.opts.Poll != nil {
		m.n.Store(m.opts.Poll())
	}
	return m.n.Load()
}

// show writes the current line.
func (m *Meter) show(now time.Time) {
	n := m.load()
	m.samples = append(m.samples, sample{now, n})
	for len(m.samples) > 2 && now.Sub(m.samples[1].at) >= rateWindow {
		m.samples = m.samples[1:]
	}
	first := sample{m.start, 0}
	if len(m.samples) > 1 {
		first = m.samples[0]
	}
	var rate float64
	if dt := now.Sub(first.at).Seconds(); dt > 0 {
		rate = float64(n-first.n) / dt
	}
	fields := []string{m.label, m.count(n)}
	if m.total > 0 {
		fields = append(fields, fmt.Sprintf("%5.1f%%", 100*float64(n)/float64(m.total)))
	}
	fields = append(fields, m.rate(rate))
	if m.total > 0 {
		eta := "ETA -"
		if left := m.total - n; left <= 0 {
			eta = "ETA 0s"
		} else if rate > 0 {
			eta = "ETA " + roundDur(time.Duration(float64(left)/rate*float64(time.Second)))
		}
		fields = append(fields, eta)
	}
	fields = append(fields, "elapsed "+roundDur(now.Sub(m.start)))
	if m.opts.Extra != nil {
		if x := m.opts.Extra(); x != "" {
			fields = append(fields, x)
		}
	}
	m.write(strings.Join(fields, "  "), false)
}

// write puts a line out: on a terminal over the previous one (ended with
// a newline only when final), otherwise as a line of its own.
func (m *Meter) write(line string, final bool) {
	switch {
	case !m.live:
		fmt.Fprintln(m.w, line)
	case final:
		fmt.Fprint(m.w, "\r"+line+"\x1b[K\n")
	default:
		fmt.Fprint(m.w, "\r"+line+"\x1b[K")
	}
}

func (m *Meter) count(n int64) string {
	s := Count(n)
	if m.total > 0 {
		s += " / " + Count(m.total)
	}
	if m.opts.Unit != "" {
		s += " " + m.opts.Unit
	}
	return s
}

func (m *Meter) rate(r float64) string {
	u := m.opts.Unit
	if u == "" {
		u = "/s"
	} else {
		u += "/s"
	}
	return Rate(r) + " " + u
}

// Count writes n with thousands separators: 1,234,567.
func Count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Rate writes a rate short: 950, 27.6k, 1.2M.
func Rate(r float64) string {
	switch a := math.Abs(r); {
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", r/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", r/1e3)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

// roundDur rounds a duration for people: 2h3m, 5m18s, 12s, 0.4s.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// CheckMode checks a --progress value.
func CheckMode(mode string) error {
	switch mode {
	case Auto, Plain, Off:
		return nil
	}
	return fmt.Errorf("--progress %q: want auto, plain or off", mode)
}
