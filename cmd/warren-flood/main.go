// Command warren-flood checks that a broker survives a connection flood:
// it runs a steady publisher and consumer, measures them, then opens many
// connections at once (holding those that get in) while measuring again,
// and reports how many connections were accepted and refused, how fast a
// refusal came, and the steady clients' rate and latency in both phases.
//
//	warren-flood --url amqp://guest:guest@127.0.0.1:5672/ --conns 10000 --rate 5000
//
// It works against any AMQP 0-9-1 broker. Each phase shows its progress on
// stderr (internal/progress): the steady consumer's messages and rate in the
// measured phases; in the flood, the attempts out of --conns, their rate,
// the time left and how many got in; live on a terminal, a plain line every
// 5 s elsewhere, nothing with --progress off. Raise the open-file limit first
// (ulimit -n 65536): every flood connection is a socket on both sides.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/progress"
)

type phase struct {
	Name     string  `json:"name"`
	Seconds  float64 `json:"seconds"`
	Sent     int64   `json:"sent"`
	Received int64   `json:"received"`
	RecvRate float64 `json:"recv_per_s"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
}

type result struct {
	Phases        []phase `json:"phases"`
	Attempts      int64   `json:"flood_attempts"`
	Accepted      int64   `json:"flood_accepted"`
	Refused       int64   `json:"flood_refused"`
	RefusalP99ms  float64 `json:"refusal_p99_ms"`
	FloodSeconds  float64 `json:"flood_seconds"`
	BrokerPeakRSS int64   `json:"broker_peak_rss_bytes,omitempty"`
	Lost          int64   `json:"lost"`
}

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	conns := flag.Int("conns", 10000, "flood connection attempts")
	parallel := flag.Int("parallel", 200, "flood dialers at once")
	rate := flag.Int("rate", 5000, "steady messages per second")
	size := flag.Int("size", 1024, "message size in bytes")
	phaseDur := flag.Duration("phase", 5*time.Second, "length of the baseline phase (the flood phase lasts as long as the flood, at least this)")
	pid := flag.Int("broker-pid", 0, "broker pid, to sample its RSS")
	jsonOut := flag.String("json", "", "write the result here as JSON")
	progressMode := flag.String("progress", progress.Auto, "progress on stderr: auto (live on a terminal, a line every 5 s otherwise), plain or off")
	flag.Parse()
	if err := progress.CheckMode(*progressMode); err != nil {
		fmt.Fprintln(os.Stderr, "warren-flood:", err)
		os.Exit(2)
	}
	res, err := run(*url, *conns, *parallel, *rate, *size, *phaseDur, *pid, *progressMode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren-flood:", err)
		os.Exit(1)
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(js))
	if *jsonOut != "" {
		os.WriteFile(*jsonOut, js, 0o644)
	}
	if res.Lost > 0 {
		os.Exit(1)
	}
}

// steady is the publisher/consumer pair whose service the flood must not
// take away.
type steady struct {
	sent, received atomic.Int64
	mu             sync.Mutex
	lat            []time.Duration
}

func (s *steady) take() (int64, int64, []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lat
	s.lat = nil
	return s.sent.Load(), s.received.Load(), l
}

func run(url string, conns, parallel, rate, size int, phaseDur time.Duration, pid int, progressMode string) (*result, error) {
	pc, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	cc, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	pch, _ := pc.Channel()
	cch, _ := cc.Channel()
	q, err := cch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return nil, err
	}
	ds, err := cch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	st := &steady{}
	go func() {
		for d := range ds {
			if len(d.Body) >= 8 {
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(d.Body)))
				st.mu.Lock()
				st.lat = append(st.lat, time.Since(sent))
				st.mu.Unlock()
			}
			st.received.Add(1)
		}
	}()
	stop := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		body := make([]byte, max(size, 8))
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		var n int64
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			due := int64(time.Since(start).Seconds() * float64(rate))
			for ; n < due; n++ {
				binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
				if err := pch.Publish("", q.Name, false, false, amqp.Publishing{Body: body}); err != nil {
					return
				}
				st.sent.Add(1)
			}
		}
	}()
	var peak atomic.Int64
	rssDone := make(chan struct{})
	if pid > 0 {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				if r := rss(pid); r > peak.Load() {
					peak.Store(r)
				}
				select {
				case <-rssDone:
					return
				case <-t.C:
				}
			}
		}()
	}
	res := &result{}
	rssField := func() string {
		if pid <= 0 {
			return ""
		}
		return fmt.Sprintf("broker rss %.0f MB", float64(peak.Load())/(1<<20))
	}
	var heldMu sync.Mutex
	measure := func(name string, f func()) {
		s0, r0, _ := st.take()
		t0 := time.Now()
		var m *progress.Meter
		if name != "flood" { // the flood has its own meter
			m = progress.Start(os.Stderr, name, 0, progress.Options{Mode: progressMode, Interval: 5 * time.Second, Unit: "msg",
				Poll: func() int64 { return st.received.Load() - r0 }, Extra: rssField})
		}
		f()
		if m != nil {
			m.Done()
		}
		s1, r1, lat := st.take()
		secs := time.Since(t0).Seconds()
		res.Phases = append(res.Phases, phase{
			Name: name, Seconds: secs, Sent: s1 - s0, Received: r1 - r0,
			RecvRate: float64(r1-r0) / secs, P50ms: pct(lat, 0.50), P99ms: pct(lat, 0.99),
		})
	}
	time.Sleep(time.Second) // warm up
	measure("baseline", func() { time.Sleep(phaseDur) })
	var held []*amqp.Connection
	var refusals []time.Duration
	measure("flood", func() {
		t0 := time.Now()
		m := progress.Start(os.Stderr, "flood", int64(conns), progress.Options{Mode: progressMode, Interval: 5 * time.Second, Unit: "conn",
			Extra: func() string {
				heldMu.Lock()
				a, r := res.Accepted, res.Refused
				heldMu.Unlock()
				x := fmt.Sprintf("accepted %s  refused %s", progress.Count(a), progress.Count(r))
				if f := rssField(); f != "" {
					x += "  " + f
				}
				return x
			}})
		var next atomic.Int64
		var wg sync.WaitGroup
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(conns) {
					start := time.Now()
					c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
					m.Add(1)
					heldMu.Lock()
					res.Attempts++
					if err == nil {
						res.Accepted++
						held = append(held, c)
					} else {
						res.Refused++
						refusals = append(refusals, time.Since(start))
					}
					heldMu.Unlock()
				}
			}()
		}
		wg.Wait()
		m.Done()
		res.FloodSeconds = time.Since(t0).Seconds()
		if rest := phaseDur - time.Since(t0); rest > 0 {
			time.Sleep(rest)
		}
	})
	measure("flood-held", func() { time.Sleep(phaseDur) })
	for _, c := range held {
		c.Close()
	}
	close(stop)
	<-pubDone
	// Everything published must arrive.
	deadline := time.Now().Add(10 * time.Second)
	for st.received.Load() < st.sent.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	res.Lost = st.sent.Load() - st.received.Load()
	res.RefusalP99ms = pct(refusals, 0.99)
	close(rssDone)
	res.BrokerPeakRSS = peak.Load()
	if res.Accepted+res.Refused != int64(conns) {
		return res, errors.New("flood accounting is off")
	}
	return res, nil
}

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
}

// rss reads a process's resident set size from /proc.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}
