package auth

import (
	"net"
	"sync"
	"time"
)

// Throttle slows down password guessing. Every failed login is counted
// against its source address and against the user name it tried; past a
// few free failures, the refusal of each further one is held back for a
// delay that doubles with each failure, up to a bound (RabbitMQ holds a
// refused connection for three seconds). A source whose failures are being
// held back may have only a few attempts in flight at once; more are
// refused without checking their password, so one address cannot guess in
// parallel either.
//
// A correct password is never delayed: the delay is spent only once the
// password was found wrong, and only the failing source can be refused
// early. Failures are forgotten after a quiet spell, and the records kept
// are bounded in number (past the bound, new keys share one record).
//
// A Throttle is safe for concurrent use; one serves every listener (AMQP
// and HTTP), so guesses through either count together.
type Throttle struct {
	cfg ThrottleConfig

	mu                     sync.Mutex
	sources, users         map[string]*failures
	sourceSpill, userSpill failures  // shared by keys past MaxKeys
	refusedLogged          time.Time // when a refusal unchecked was last logged
	refusedQuiet           int       // refusals unchecked not logged since
}

// ThrottleConfig tunes a Throttle; a zero field means its default.
type ThrottleConfig struct {
	// Free is how many failures a key may have before refusals are
	// delayed (default 3: a couple of typos cost nothing).
	Free int
	// Base is the delay of the first failure past Free (default 100 ms);
	// each further failure doubles it.
	Base time.Duration
	// Max bounds the delay (default 3 s, RabbitMQ's delay before it closes
	// a refused connection).
	Max time.Duration
	// Forget is how long a key's failures are remembered after its last
	// one (default 1 min).
	Forget time.Duration
	// MaxPending is how many attempts a source past Free may have in
	// flight at once; more are refused without checking (default 4).
	MaxPending int
	// MaxKeys bounds the sources and the users remembered (default 10000
	// each).
	MaxKeys int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Sleep waits d or until cancel is closed, and reports whether it
	// waited all of d (default: a timer); tests inject one that records
	// the delays.
	Sleep func(d time.Duration, cancel <-chan struct{}) bool
}

// failures is one key's record.
type failures struct {
	n       int       // failures since the record was last forgotten
	last    time.Time // the latest failure
	pending int       // attempts in flight (sources only)
}

// NewThrottle returns a Throttle with cfg's settings.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	if cfg.Free <= 0 {
		cfg.Free = 3
	}
	if cfg.Base <= 0 {
		cfg.Base = 100 * time.Millisecond
	}
	if cfg.Max <= 0 {
		cfg.Max = 3 * time.Second
	}
	if cfg.Forget <= 0 {
		cfg.Forget = time.Minute
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 4
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	return &Throttle{cfg: cfg, sources: map[string]*failures{}, users: map[string]*failures{}}
}

func sleep(d time.Duration, cancel <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-cancel:
		return false
	}
}

// SourceOf is the source key of a remote address: its IP without the port
// ("" when addr is not an IP address, e.g. an in-memory pipe).
func SourceOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return ""
}

// Attempt is one login attempt, from Begin to End.
type Attempt struct {
	t       *Throttle
	source  string
	rec     *failures // counted in its pending, or nil
	Refused bool      // too many attempts in flight from this failing source: refuse without checking
}

// LogRefusal reports whether a refusal unchecked (Attempt.Refused) should
// be logged: once a second at most, so that a flood of them does not flood
// the log, with how many were not logged since the last one.
func (t *Throttle) LogRefusal() (ok bool, unlogged int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	if now.Sub(t.refusedLogged) < time.Second {
		t.refusedQuiet++
		return false, 0
	}
	t.refusedLogged = now
	unlogged, t.refusedQuiet = t.refusedQuiet, 0
	return true, unlogged
}

// Failure is what Failed recorded.
type Failure struct {
	Delay          time.Duration // how long to hold the refusal back
	SourceFailures int           // the source's failures, this one included
	UserFailures   int           // the user name's failures, this one included
}

// Begin starts a login attempt from source (see SourceOf). When the
// attempt is Refused, the caller refuses it without checking the password.
// End must be called when the attempt is answered.
func (t *Throttle) Begin(source string) *Attempt {
	a := &Attempt{t: t, source: source}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.sources[source]
	if r == nil {
		return a
	}
	t.forget(r)
	if r.n > t.cfg.Free && r.pending >= t.cfg.MaxPending {
		a.Refused = true
		return a
	}
	r.pending++
	a.rec = r
	return a
}

// Failed records that the attempt's password (for user) was wrong, and
// returns how long to hold the refusal back.
func (a *Attempt) Failed(user string) Failure {
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	src := a.rec
	if src == nil {
		src = t.record(t.sources, &t.sourceSpill, a.source)
		if src != &t.sourceSpill {
			// Count this attempt as in flight from now on.
			src.pending++
			a.rec = src
		}
	}
	usr := t.record(t.users, &t.userSpill, user)
	for _, r := range []*failures{src, usr} {
		t.forget(r)
		r.n++
		r.last = now
	}
	return Failure{Delay: max(t.delay(src.n), t.delay(usr.n)), SourceFailures: src.n, UserFailures: usr.n}
}

// End ends the attempt.
func (a *Attempt) End() {
	if a.rec == nil {
		return
	}
	a.t.mu.Lock()
	a.rec.pending--
	a.rec = nil
	a.t.mu.Unlock()
}

// Sleep waits d (a Failure's Delay) or until cancel is closed (the
// connection or request is gone), and reports whether it waited all of d.
func (t *Throttle) Sleep(d time.Duration, cancel <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	return t.cfg.Sleep(d, cancel)
}

// delay is the delay of a key's n-th failure.
func (t *Throttle) delay(n int) time.Duration {
	past := n - t.cfg.Free
	if past <= 0 {
		return 0
	}
	d := t.cfg.Base
	for i := 1; i < past && d < t.cfg.Max; i++ {
		d *= 2
	}
	return min(d, t.cfg.Max)
}

// forget clears r's failures once it has been quiet for Forget. t.mu is
// held.
func (t *Throttle) forget(r *failures) {
	if r.n > 0 && t.cfg.Now().Sub(r.last) > t.cfg.Forget {
		r.n = 0
	}
}

// record returns key's record in m, creating it; past MaxKeys, after
// dropping the forgotten ones, new keys share spill. t.mu is held.
func (t *Throttle) record(m map[string]*failures, spill *failures, key string) *failures {
	if r := m[key]; r != nil {
		return r
	}
	if len(m) >= t.cfg.MaxKeys {
		for k, r := range m {
			if t.forget(r); r.n == 0 && r.pending == 0 {
				delete(m, k)
			}
		}
		if len(m) >= t.cfg.MaxKeys {
			return spill
		}
	}
	r := &failures{}
	m[key] = r
	return r
}
