package mgmt

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/queue"
	"github.com/warrenmq/warren/server"
)

// message_stats: RabbitMQ's event counters and their rates. The broker
// keeps the counters (one atomic add per event: queue/stats.go,
// server/stats.go); the sampler here reads them every StatsInterval (5 s,
// RabbitMQ's default collect_statistics_interval), computes each
// counter's rate over the last interval, and carries the counts of deleted
// queues and vhosts into their vhost's and the node's totals, so that
// totals never go down.

// The counters, in one array so that sums and rates are loops.
const (
	cPublish = iota
	cConfirm
	cReturnUnroutable
	cDropUnroutable
	cDeliver
	cDeliverNoAck
	cGet
	cGetNoAck
	cGetEmpty
	cRedeliver
	cAck
	nCounters
)

// counterNames are RabbitMQ's message_stats field names.
var counterNames = [nCounters]string{
	"publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
	"get", "get_no_ack", "get_empty", "redeliver", "ack",
}

// queueCounters are the counters a queue's message_stats carries (the
// channel-level ones are the vhost's and the node's only).
var queueCounters = []int{cPublish, cDeliver, cDeliverNoAck, cGet, cGetNoAck, cGetEmpty, cRedeliver, cAck}

type counts [nCounters]uint64

func (c *counts) add(o counts) {
	for i := range c {
		c[i] += o[i]
	}
}

func (c *counts) addQueue(s queue.MessageStats) {
	c[cPublish] += s.Publish
	c[cDeliver] += s.Deliver
	c[cDeliverNoAck] += s.DeliverNoAck
	c[cGet] += s.Get
	c[cGetNoAck] += s.GetNoAck
	c[cGetEmpty] += s.GetEmpty
	c[cRedeliver] += s.Redeliver
	c[cAck] += s.Ack
}

// A vhost's publish is its channels' count, not the sum of its queues'
// (one message routed to two queues is one publish).
func vhostCounts(v server.VHostMessageStats) counts {
	var c counts
	c.addQueue(v.Queues)
	c[cPublish] = v.Publish
	c[cConfirm] = v.Confirm
	c[cReturnUnroutable] = v.ReturnUnroutable
	c[cDropUnroutable] = v.DropUnroutable
	return c
}

func queueKey(vhost, name string) string { return vhost + "\x00" + name }

// statsView is one reading: counts by queue, by vhost and for the node;
// for the history (sample), the queues' lengths too.
type statsView struct {
	queues map[string]counts
	vhosts map[string]counts
	node   counts
	lens   map[string][2]int64 // queue key -> ready, unacked; nil unless asked for
}

// sampler keeps what the counters alone cannot: the counts of queues and
// vhosts that are gone, and the previous sample for rates.
type sampler struct {
	b *server.Server

	mu        sync.Mutex
	lastQ     map[string]counts // queue counts at the last reading
	lastQV    map[string]string // queue key -> vhost
	lastV     map[string]counts // vhost totals at the last reading
	goneQ     map[string]counts // per vhost: counts of its deleted queues
	goneV     counts            // counts of deleted vhosts
	prev      *statsView        // the sample before the last
	prevAt    time.Time
	rates     statsRates
	haveRates bool
	hist      *history
	conns     map[uint64]connReading // the connections at the last sample
	connRates map[uint64][2]float64  // their bytes received and sent per second
	goneOct   map[string][2]uint64   // per vhost: bytes of the connections that closed
}

// connReading is a connection's byte counters at one sample.
type connReading struct {
	vhost      string
	recv, send uint64
}

type statsRates struct {
	queues map[string][nCounters]float64
	vhosts map[string][nCounters]float64
	node   [nCounters]float64
}

func newSampler(b *server.Server) *sampler {
	return &sampler{
		b: b, lastQ: map[string]counts{}, lastQV: map[string]string{}, lastV: map[string]counts{},
		goneQ: map[string]counts{}, hist: newHistory(), conns: map[uint64]connReading{},
		connRates: map[uint64][2]float64{}, goneOct: map[string][2]uint64{},
	}
}

// read takes a reading of every counter, folding deleted queues and vhosts
// into the totals.
func (sm *sampler) read() *statsView { return sm.readLens(false) }

// readLens is read, with the queues' lengths when lens is set.
func (sm *sampler) readLens(lens bool) *statsView {
	// The broker is read under sm.mu: a reading taken before another
	// one that folded a deleted queue into the totals, and folded after
	// it, would bring that queue back and count it twice.
	sm.mu.Lock()
	defer sm.mu.Unlock()
	vs, qs := sm.b.MessageStats()
	view := &statsView{queues: make(map[string]counts, len(qs)), vhosts: make(map[string]counts, len(vs))}
	if lens {
		view.lens = make(map[string][2]int64, len(qs))
	}
	for _, q := range qs {
		var c counts
		c.addQueue(q.Stats)
		k := queueKey(q.VHost, q.Name)
		view.queues[k] = c
		if lens {
			view.lens[k] = [2]int64{int64(q.Ready), int64(q.Unacked)}
		}
	}
	for k, c := range sm.lastQ {
		if _, live := view.queues[k]; !live {
			g := sm.goneQ[sm.lastQV[k]]
			g.add(queueOnly(c))
			sm.goneQ[sm.lastQV[k]] = g
			delete(sm.lastQ, k)
			delete(sm.lastQV, k)
		}
	}
	for _, q := range qs {
		k := queueKey(q.VHost, q.Name)
		c := view.queues[k]
		if last, ok := sm.lastQ[k]; ok && decreased(c, last) {
			// Deleted and declared again since the last reading.
			g := sm.goneQ[q.VHost]
			g.add(queueOnly(last))
			sm.goneQ[q.VHost] = g
		}
		sm.lastQ[k], sm.lastQV[k] = c, q.VHost
	}
	for _, v := range vs {
		c := vhostCounts(v)
		gone := sm.goneQ[v.VHost]
		gone[cPublish] = 0 // a vhost's publish count is its channels'
		c.add(gone)
		view.vhosts[v.VHost] = c
	}
	for name, c := range sm.lastV {
		if _, live := view.vhosts[name]; !live {
			sm.goneV.add(c)
			delete(sm.lastV, name)
			delete(sm.goneQ, name)
			delete(sm.goneOct, name)
		}
	}
	view.node = sm.goneV
	for name, c := range view.vhosts {
		sm.lastV[name] = c
		view.node.add(c)
	}
	return view
}

func decreased(c, last counts) bool {
	for i := range c {
		if c[i] < last[i] {
			return true
		}
	}
	return false
}

// queueOnly keeps the queue-level counters of c.
func queueOnly(c counts) counts {
	var out counts
	for _, i := range queueCounters {
		out[i] = c[i]
	}
	return out
}

// sample takes a reading, computes the rates since the previous one and
// adds it to the history.
func (sm *sampler) sample(now time.Time) {
	view := sm.readLens(true)
	conns := sm.b.Connections()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.addHistory(now, view)
	sm.sampleConns(now, conns)
	if sm.prev != nil {
		dt := now.Sub(sm.prevAt).Seconds()
		if dt > 0 {
			r := statsRates{queues: map[string][nCounters]float64{}, vhosts: map[string][nCounters]float64{}}
			for k, c := range view.queues {
				if p, ok := sm.prev.queues[k]; ok {
					r.queues[k] = rate(c, p, dt)
				}
			}
			for k, c := range view.vhosts {
				if p, ok := sm.prev.vhosts[k]; ok {
					r.vhosts[k] = rate(c, p, dt)
				}
			}
			r.node = rate(view.node, sm.prev.node, dt)
			sm.rates, sm.haveRates = r, true
		}
	}
	sm.prev, sm.prevAt = view, now
}

// addHistory adds the reading to the history.
func (sm *sampler) addHistory(now time.Time, view *statsView) {
	qs := make(map[string]sampleVals, len(view.queues))
	var node sampleVals
	for i, c := range view.node {
		node[i] = int64(c)
	}
	for k, c := range view.queues {
		var v sampleVals
		for _, i := range queueCounters {
			v[i] = int64(c[i])
		}
		l := view.lens[k]
		v[fReady], v[fUnacked] = l[0], l[1]
		node[fReady] += l[0]
		node[fUnacked] += l[1]
		qs[k] = v
	}
	sm.hist.add(now, node, qs)
}

// sampleConns computes each connection's byte rates since the last
// sample, and carries the bytes of closed connections into their vhost's
// totals.
func (sm *sampler) sampleConns(now time.Time, conns []server.ConnectionInfo) {
	dt := now.Sub(sm.prevAt).Seconds()
	if sm.prevAt.IsZero() {
		dt = 0
	}
	live := make(map[uint64]connReading, len(conns))
	rates := make(map[uint64][2]float64, len(conns))
	for _, c := range conns {
		cur := connReading{vhost: c.VHost, recv: c.RecvOct, send: c.SendOct}
		live[c.ID] = cur
		if p, ok := sm.conns[c.ID]; ok && dt > 0 {
			rates[c.ID] = [2]float64{float64(cur.recv-p.recv) / dt, float64(cur.send-p.send) / dt}
		}
	}
	for id, p := range sm.conns {
		if _, ok := live[id]; !ok {
			g := sm.goneOct[p.vhost]
			sm.goneOct[p.vhost] = [2]uint64{g[0] + p.recv, g[1] + p.send}
		}
	}
	sm.conns, sm.connRates = live, rates
}

// connRate is a connection's bytes received and sent per second over the
// last interval.
func (sm *sampler) connRate(id uint64) [2]float64 {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.connRates[id]
}

// vhostTraffic is a vhost's connection bytes and byte rates.
type vhostTraffic struct {
	recv, send         uint64
	recvRate, sendRate float64
}

// setOct gives j the traffic of its vhost in m, if it has had any.
func setOct(j *vhostJSON, m map[string]vhostTraffic) {
	t, ok := m[j.Name]
	if !ok {
		return
	}
	j.vhostOctJSON = &vhostOctJSON{RecvOct: t.recv, SendOct: t.send}
	j.RecvOctDetails.Rate, j.SendOctDetails.Rate = round1(t.recvRate), round1(t.sendRate)
}

// vhostOct sums the bytes of the connections of each vhost, live ones
// (conns, read now) and closed ones (up to the last sample before they
// closed), and their rates.
func (sm *sampler) vhostOct(conns []server.ConnectionInfo) map[string]vhostTraffic {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := map[string]vhostTraffic{}
	for v, g := range sm.goneOct {
		out[v] = vhostTraffic{recv: g[0], send: g[1]}
	}
	for _, c := range conns {
		t := out[c.VHost]
		r := sm.connRates[c.ID]
		t.recv += c.RecvOct
		t.send += c.SendOct
		t.recvRate += r[0]
		t.sendRate += r[1]
		out[c.VHost] = t
	}
	return out
}

func rate(cur, prev counts, dt float64) [nCounters]float64 {
	var r [nCounters]float64
	for i := range cur {
		if cur[i] >= prev[i] {
			r[i] = float64(cur[i]-prev[i]) / dt
		}
	}
	return r
}

// run samples every interval until ctx is done.
func (sm *sampler) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	sm.sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sm.sample(now)
		}
	}
}

// currentRates returns the rates of the last interval.
func (sm *sampler) currentRates() statsRates {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.rates
}

// messageStats renders counters and rates as RabbitMQ's message_stats
// object: each counter, its "_details": {"rate": r}, and deliver_get
// (deliver + deliver_no_ack + get + get_no_ack).
func messageStats(c counts, r [nCounters]float64, which []int) *messageStatsJSON {
	m := &messageStatsJSON{order: allOrder}
	if len(which) == len(queueCounters) {
		m.order = queueOrder
	}
	for _, i := range which {
		m.c[i], m.r[i] = c[i], round1(r[i])
	}
	m.c[cDeliverGet] = c[cDeliver] + c[cDeliverNoAck] + c[cGet] + c[cGetNoAck]
	m.r[cDeliverGet] = round1(r[cDeliver] + r[cDeliverNoAck] + r[cGet] + r[cGetNoAck])
	return m
}

// cDeliverGet is deliver_get's slot in a messageStatsJSON: the sum of the
// deliver and get counters.
const cDeliverGet = nCounters

// messageStatsJSON is a message_stats object: for each counter its count
// and {name}_details: {"rate": r}, keys in alphabetical order (as a map
// of them would be written). It is written without building maps: a list
// of 100,000 queues makes one per queue.
type messageStatsJSON struct {
	c     [nCounters + 1]uint64
	r     [nCounters + 1]float64
	order []int    // counter slots, by name
	src   *histSrc // with a msg_rates range: where the samples come from
}

// queueOrder and allOrder are queueCounters and allCounters with
// deliver_get, sorted by name.
var queueOrder, allOrder = statsOrder(queueCounters), statsOrder(allCounters)

func statsOrder(which []int) []int {
	out := append(slices.Clone(which), cDeliverGet)
	slices.SortFunc(out, func(a, b int) int { return cmp.Compare(statName(a), statName(b)) })
	return out
}

func statName(i int) string {
	if i == cDeliverGet {
		return "deliver_get"
	}
	return counterNames[i]
}

// jsonField gives a field of the object by its JSON name: a count, or
// {name}_details as an object {"rate": r} (paging sorts by them).
func (m messageStatsJSON) jsonField(name string) reflect.Value {
	base, details := strings.CutSuffix(name, "_details")
	for _, i := range m.order {
		if statName(i) != base {
			continue
		}
		if details {
			return reflect.ValueOf(map[string]float64{"rate": m.r[i]})
		}
		return reflect.ValueOf(m.c[i])
	}
	return reflect.Value{}
}

// MarshalJSON implements json.Marshaler.
func (m *messageStatsJSON) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 48*len(m.order))
	var pts [][]point
	if m.src != nil {
		fields := make([]int, len(m.order))
		for n, i := range m.order {
			fields[n] = i
			if i == cDeliverGet { // a message_stats slot, not fReady
				fields[n] = fDeliverGet
			}
		}
		pts = m.src.points(fields)
		b = slices.Grow(b, 40*len(m.order)*histLen)
	}
	b = append(b, '{')
	for n, i := range m.order {
		if n > 0 {
			b = append(b, ',')
		}
		name := statName(i)
		// "x" sorts before "x_details", which sorts before any "x_..."
		// longer name in these sets.
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, m.c[i], 10)
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `_details":`...)
		var p []point
		if pts != nil {
			p = pts[n]
		}
		b = appendDetails(b, m.r[i], p, m.src != nil)
	}
	return append(b, '}'), nil
}

// histSrc is where a ranged answer's samples come from: the node's series
// (key "") or a queue's, over r. They are read when the object is
// encoded, so that a page of a long list reads only its own.
type histSrc struct {
	sm  *sampler
	key string
	r   sampleRange
}

// points reads the samples of fields (history fields: fReady, fDeliverGet
// ...).
func (h *histSrc) points(fields []int) [][]point {
	h.sm.mu.Lock()
	defer h.sm.mu.Unlock()
	s := h.sm.hist.node
	if h.key != "" {
		s = h.sm.hist.queues[h.key]
	}
	out := make([][]point, len(fields))
	for n, f := range fields {
		out[n] = h.sm.hist.points(s, f, h.r)
	}
	return out
}

// withSamples makes m carry the samples of src, when there is one.
func (m *messageStatsJSON) withSamples(src *histSrc) *messageStatsJSON {
	m.src = src
	return m
}

// detailsJSON is a length's {name}_details: its rate of change over the
// last interval and, with a lengths range, its samples.
type detailsJSON struct {
	Rate  float64 `json:"rate"`
	src   *histSrc
	field int
}

// MarshalJSON implements json.Marshaler.
func (d detailsJSON) MarshalJSON() ([]byte, error) {
	var pts []point
	if d.src != nil {
		pts = d.src.points([]int{d.field})[0]
	}
	return appendDetails(nil, d.Rate, pts, d.src != nil), nil
}

// lengthDetails are messages_details, messages_ready_details and
// messages_unacknowledged_details of the node (key "") or a queue, with
// samples from lengths (nil: none).
func (sm *sampler) lengthDetails(key string, lengths *sampleRange) (total, ready, unacked detailsJSON) {
	var src *histSrc
	if lengths != nil {
		src = &histSrc{sm: sm, key: key, r: *lengths}
	}
	sm.mu.Lock()
	s := sm.hist.node
	if key != "" {
		s = sm.hist.queues[key]
	}
	r, u := round1(sm.hist.rate(s, fReady)), round1(sm.hist.rate(s, fUnacked))
	sm.mu.Unlock()
	return detailsJSON{Rate: round1(r + u), src: src, field: fTotal},
		detailsJSON{Rate: r, src: src, field: fReady}, detailsJSON{Rate: u, src: src, field: fUnacked}
}

// round1 rounds a rate to one decimal, as RabbitMQ shows them.
func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// allCounters are the counters a vhost's and the node's message_stats carry.
var allCounters = []int{cPublish, cConfirm, cReturnUnroutable, cDropUnroutable, cDeliver, cDeliverNoAck, cGet, cGetNoAck, cGetEmpty, cRedeliver, cAck}

// stats reads the counters now, with the last interval's rates.
func (s *Server) stats() (*statsView, statsRates) {
	return s.sampler.read(), s.sampler.currentRates()
}
