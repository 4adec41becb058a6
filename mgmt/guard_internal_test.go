package mgmt

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/auth"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// countingWriter is a ResponseWriter that counts the bytes it was given.
type countingWriter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.ResponseRecorder.Write(b)
}

type item struct {
	Name  string `json:"name"`
	VHost string `json:"vhost"`
	Pad   string `json:"pad"`
}

func (i item) itemName() string { return i.Name }

// listRequest is an administrator's request for path, answered into w.
func listRequest(path string, w http.ResponseWriter) *request {
	nop := zerolog.Nop()
	return &request{
		s: &Server{log: nop}, r: httptest.NewRequest("GET", path, nil), w: w,
		u: auth.User{Name: "admin", Tags: []string{"administrator"}},
	}
}

// TestListsStream checks that a list is written item by item while it is
// being made, each item made once, not built whole and then encoded.
func TestListsStream(t *testing.T) {
	const n = 20000
	w := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
	made, sentBeforeLast := 0, 0
	l := list{n: n, at: func(i int) any {
		made++
		if i == n-1 {
			sentBeforeLast = w.Body.Len()
		}
		return item{Name: fmt.Sprintf("q%05d", i), VHost: "/", Pad: strings.Repeat("x", 64)}
	}}
	if err := listRequest("/api/queues", w).replyList(l); err != nil {
		t.Fatal(err)
	}
	var got []item
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != n || got[n-1].Name != "q19999" {
		t.Fatalf("decoded %d items (%v)", len(got), err)
	}
	if made != n {
		t.Fatalf("items made %d times for %d items", made, n)
	}
	// About 1.9 MB in all: most of it must have gone out before the last
	// item was made, in many writes.
	if sentBeforeLast < w.Body.Len()*9/10 || w.writes < 20 {
		t.Fatalf("%d of %d bytes sent before the last item was made, in %d writes", sentBeforeLast, w.Body.Len(), w.writes)
	}
}

// TestListPagesKeepOnlyKeys checks paging over a lazily made list: the
// page is right, and only its items are made a second time.
func TestListPagesKeepOnlyKeys(t *testing.T) {
	const n = 1000
	made := 0
	l := list{n: n, at: func(i int) any {
		made++
		return item{Name: fmt.Sprintf("q%04d", i), VHost: "/"}
	}}
	w := httptest.NewRecorder()
	if err := listRequest("/api/queues?page=2&page_size=10&name=q0&sort=name&sort_reverse=true", w).replyList(l); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Items         []item `json:"items"`
		FilteredCount int    `json:"filtered_count"`
		TotalCount    int    `json:"total_count"`
		PageCount     int    `json:"page_count"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.TotalCount != n || p.FilteredCount != 1000 || p.PageCount != 100 || len(p.Items) != 10 || p.Items[0].Name != "q0989" {
		t.Fatalf("page = %+v", p)
	}
	if made != n+10 {
		t.Fatalf("items made %d times, want %d", made, n+10)
	}
}

// TestHeavyRequestsTakeTurns checks that requests walking every object
// wait for a turn, and get 503 when none comes in time, while light ones
// are served.
func TestHeavyRequestsTakeTurns(t *testing.T) {
	b := servertest.StartBroker(t, server.Config{}).Server()
	s := New(b, Options{MaxHeavyRequests: 1, HeavyWait: time.Millisecond})
	get := func(path string) int {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:15672"
		req.SetBasicAuth("guest", "guest")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	s.heavy <- struct{}{} // a heavy request in progress
	for _, p := range []string{"/api/queues", "/api/overview", "/api/definitions", "/metrics/per-object"} {
		if code := get(p); code != 503 {
			t.Errorf("%s with no turn free: %d, want 503", p, code)
		}
	}
	for _, p := range []string{"/api/whoami", "/metrics"} {
		if code := get(p); code != 200 {
			t.Errorf("%s with no heavy turn free: %d", p, code)
		}
	}
	<-s.heavy
	// Unauthenticated scrapes have turns of their own: using them all up
	// leaves the API's.
	for range cap(s.scrapes) {
		s.scrapes <- struct{}{}
	}
	if code := get("/metrics"); code != 503 {
		t.Errorf("/metrics with no scrape turn free: %d, want 503", code)
	}
	for _, p := range []string{"/api/queues", "/metrics/per-object"} {
		if code := get(p); code != 200 {
			t.Errorf("%s with a heavy turn free: %d", p, code)
		}
	}
	for range cap(s.scrapes) {
		<-s.scrapes
	}
	if code := get("/metrics"); code != 200 {
		t.Errorf("/metrics with a turn free: %d", code)
	}
	if len(s.heavy) != 0 || len(s.scrapes) != 0 {
		t.Fatalf("%d heavy and %d scrape turns not given back", len(s.heavy), len(s.scrapes))
	}
}

// TestMessageStatsJSON checks that message_stats, written without maps,
// is byte for byte what encoding/json writes for the map it replaces.
func TestMessageStatsJSON(t *testing.T) {
	var c counts
	var r [nCounters]float64
	for i := range c {
		c[i] = uint64(i*i*1000 + 7)
		r[i] = []float64{0, 0.1, 2.5, 1234.5, 3e21, 1e-7}[i%6]
	}
	for _, which := range [][]int{queueCounters, allCounters} {
		want := map[string]any{}
		for _, i := range which {
			want[counterNames[i]] = c[i]
			want[counterNames[i]+"_details"] = map[string]float64{"rate": round1(r[i])}
		}
		want["deliver_get"] = c[cDeliver] + c[cDeliverNoAck] + c[cGet] + c[cGetNoAck]
		want["deliver_get_details"] = map[string]float64{"rate": round1(r[cDeliver] + r[cDeliverNoAck] + r[cGet] + r[cGetNoAck])}
		wb, _ := json.Marshal(want)
		gb, err := json.Marshal(messageStats(c, r, which))
		if err != nil || string(gb) != string(wb) {
			t.Fatalf("message_stats:\n got %s (%v)\nwant %s", gb, err, wb)
		}
	}
}
