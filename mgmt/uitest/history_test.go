package uitest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// chartLine is what a chart draws of one series: its points' y
// coordinates (SVG, down is less), and where its figure's data came from.
type chartLine struct {
	Source string    `json:"source"`
	Ys     []float64 `json:"ys"`
	Legend string    `json:"legend"`
}

// chartLine reads the series drawn in color c of the n-th chart on the
// page.
func (e *env) chartLine(n int, color, series string) chartLine {
	e.t.Helper()
	js := fmt.Sprintf(`(() => {
		const fig = document.querySelectorAll('figure.chartbox')[%d];
		if (!fig) return JSON.stringify({source: '', ys: [], legend: ''});
		const path = fig.querySelector('path.s-%s');
		const d = path ? path.getAttribute('d') : '';
		const ys = [...d.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
		const lv = fig.querySelector('.lval[data-series=%s]');
		return JSON.stringify({source: fig.dataset.source, ys, legend: lv ? lv.innerText : ''});
	})()`, n, color, series)
	var l chartLine
	if err := json.Unmarshal([]byte(eval[string](e, "chart", js)), &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// TestChartsShowBrokerHistory opens the queue's page and the overview only
// after the queue's length has changed: their charts draw the broker's
// samples from before the page was open.
func TestChartsShowBrokerHistory(t *testing.T) {
	e := start(t, envOpts{statsInterval: 500 * time.Millisecond})
	conn, err := amqp091.Dial(e.amqp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("history", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		for range n {
			if err := ch.Publish("", "history", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(3)
	// The UI asks for a sample every 5 s over the chart's minute: wait for
	// steps with 3 and with 8 messages.
	samples := func() []float64 {
		var q struct {
			Details struct {
				Samples []struct{ Sample float64 } `json:"samples"`
			} `json:"messages_ready_details"`
		}
		e.getJSON("/api/queues/%2F/history?lengths_age=60&lengths_incr=5", &q)
		var out []float64
		for _, s := range q.Details.Samples {
			out = append(out, s.Sample)
		}
		return out
	}
	waitAPI(t, "a 5 s step with 3 messages", func() bool { return slices.Contains(samples(), 3) })
	publish(5)
	// Three steps or more: two rates to draw a line of.
	waitAPI(t, "a 5 s step with 8 messages", func() bool {
		s := samples()
		return len(s) >= 3 && s[0] == 8 && slices.Contains(s, 3)
	})

	e.login("guest", "guest")
	e.open("#/queues/%2F/history", "queues")
	ready := e.chartLine(0, "a", "ready")
	if ready.Source != "broker" {
		t.Errorf("the queue's chart is drawn from %q samples, want the broker's", ready.Source)
	}
	if ready.Legend != "8" {
		t.Errorf("ready legend = %q, want 8", ready.Legend)
	}
	// A page sampling by itself would have one point; the broker's
	// history has several, at two heights (3, then 8).
	if ys := slices.Compact(slices.Clone(ready.Ys)); len(ready.Ys) < 2 || len(ys) < 2 {
		t.Errorf("ready line has points at %v, want the levels of 3 and 8 messages", ready.Ys)
	}
	if pub := e.chartLine(1, "a", "publish"); pub.Source != "broker" || len(pub.Ys) < 2 || slices.Min(pub.Ys) == slices.Max(pub.Ys) {
		t.Errorf("publish rate line = %+v, want a rise at the publishes", pub)
	}
	e.open("#/", "overview")
	if total := e.chartLine(0, "f", "total"); total.Source != "broker" || len(slices.Compact(slices.Clone(total.Ys))) < 2 {
		t.Errorf("overview total line = %+v, want the broker's history", total)
	}
	if got := e.text(`label.range`); strings.Contains(got, "sampled by this page") {
		t.Errorf("range label says %q", got)
	}
}

// fmtBytes is the UI's byte format (mgmt/ui/js/dom.js).
func fmtBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f %s", b, units[i])
	case b < 10:
		return fmt.Sprintf("%.1f %s", b, units[i])
	}
	return fmt.Sprintf("%.0f %s", b, units[i])
}

// TestConnectionTraffic reads a publishing connection's byte rate in the
// connections list, and its byte counts on its page, against the API.
func TestConnectionTraffic(t *testing.T) {
	e := start(t, envOpts{statsInterval: 200 * time.Millisecond})
	conn, err := amqp091.DialConfig(e.amqp, amqp091.Config{Properties: amqp091.Table{"connection_name": "traffic"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("traffic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 8192)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ch.Publish("", "traffic", false, false, amqp091.Publishing{Body: body})
			}
		}
	}()
	type connJSON struct {
		Name           string  `json:"name"`
		RecvOct        float64 `json:"recv_oct"`
		RecvCnt        float64 `json:"recv_cnt"`
		SendOct        float64 `json:"send_oct"`
		RecvOctDetails struct {
			Rate float64 `json:"rate"`
		} `json:"recv_oct_details"`
	}
	var conns []connJSON
	waitAPI(t, "a receive rate", func() bool {
		e.getJSON("/api/connections", &conns)
		return len(conns) == 1 && conns[0].RecvOctDetails.Rate > 100_000
	})
	e.login("guest", "guest")
	e.open("#/connections", "connections")
	rate := regexp.MustCompile(`^[\d.]+ (B|KiB|MiB)/s$`)
	e.waitJS("a rate in the list", `(() => { const c = document.querySelector('td[data-col=recv_oct_rate]'); return c && /KiB\/s|MiB\/s/.test(c.innerText); })()`)
	if got := e.text(`td[data-col=send_oct_rate]`); !rate.MatchString(got) {
		t.Errorf("To client = %q", got)
	}
	close(stop)
	<-done

	// Once the traffic stops, the page's counts are the API's.
	name := conns[0].Name
	var c connJSON
	waitAPI(t, "traffic settled", func() bool {
		var a, b connJSON
		e.getJSON("/api/connections/"+url.PathEscape(name), &a)
		time.Sleep(300 * time.Millisecond)
		e.getJSON("/api/connections/"+url.PathEscape(name), &b)
		c = b
		return a.RecvOct == b.RecvOct && a.SendOct == b.SendOct
	})
	e.open("#/connections/"+url.PathEscape(name), "connections")
	if got, want := e.text(`[data-field=recv_oct]`), fmtBytes(c.RecvOct); got != want {
		t.Errorf("Received = %q, API's recv_oct %v is %q", got, c.RecvOct, want)
	}
	if got, want := e.text(`[data-field=send_oct]`), fmtBytes(c.SendOct); got != want {
		t.Errorf("Sent = %q, API's send_oct %v is %q", got, c.SendOct, want)
	}
	title := eval[string](e, "title", `document.querySelector('[data-field=recv_oct]').title`)
	if want := fmt.Sprintf("in %s reads", fmtNumber(c.RecvCnt)); !strings.Contains(title, want) {
		t.Errorf("Received's title %q lacks %q", title, want)
	}
	if got := e.text(`[data-field=recv_rate]`); !rate.MatchString(got) {
		t.Errorf("From client = %q", got)
	}
}

// fmtNumber is the UI's fmtNum for whole numbers (en-US grouping).
func fmtNumber(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
