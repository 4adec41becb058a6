package uitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
)

// TestQueuesPageTenThousand renders the queue list with 10,000 queues:
// the page asks the API for one page of rows (server-side paging), so the
// browser holds 100 rows, whatever the number of queues. The time to the
// first rendered page is reported, not asserted.
func TestQueuesPageTenThousand(t *testing.T) {
	e := start(t, envOpts{statsInterval: 5 * time.Second})
	a, err := e.broker.OpenAdmin("guest", "/")
	if err != nil {
		t.Fatal(err)
	}
	n := 10000
	if raceEnabled {
		n = 2000
	}
	began := time.Now()
	for i := range n {
		if err := a.DeclareQueue(server.QueueDecl{Name: fmt.Sprintf("load-%05d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	t.Logf("declared %d queues in %v", n, time.Since(began).Round(time.Millisecond))

	apiBegan := time.Now()
	code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues?page=1&page_size=100&sort=name", nil)
	if code != http.StatusOK {
		t.Fatalf("paged queue list: %d", code)
	}
	t.Logf("API: first page of %d queues in %v (Go client)", n, time.Since(apiBegan).Round(time.Millisecond))

	e.login("guest", "guest")
	// Time from the click on the tab to 100 rows on the screen, measured in
	// the page.
	ms := eval[float64](e, "time the queues page", `new Promise((resolve) => {
		const t0 = performance.now();
		document.querySelector('#tabs a[href="#/queues"]').click();
		const check = () => {
			const rows = document.querySelectorAll('table[data-list=queues] tbody tr td[data-col=name]');
			if (rows.length === 100) requestAnimationFrame(() => resolve(performance.now() - t0));
			else setTimeout(check, 5);
		};
		check();
	})`)
	t.Logf("browser: queues page with %d queues, first 100 rows rendered in %.0f ms", n, ms)
	if got, want := e.text(`.listview .summary`), fmt.Sprintf("%s items", thousands(n)); got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	if got, want := e.text(`.listview .pageno`), fmt.Sprintf("Page 1 of %d", n/100); got != want {
		t.Errorf("pager = %q, want %q", got, want)
	}

	// Filter and sort stay on the server too.
	ms = eval[float64](e, "time a filter", `new Promise((resolve) => {
		const t0 = performance.now();
		const f = document.querySelector('.listview input.filter');
		f.value = 'load-0199';
		f.dispatchEvent(new Event('input'));
		const check = () => {
			const rows = document.querySelectorAll('table[data-list=queues] tbody tr td[data-col=name]');
			if (rows.length === 10) resolve(performance.now() - t0); else setTimeout(check, 5);
		};
		check();
	})`)
	t.Logf("browser: filter to 10 of %d queues in %.0f ms (including the 250 ms typing pause)", n, ms)
	if got, want := e.text(`.listview .summary`), fmt.Sprintf("10 items (filtered from %s)", thousands(n)); got != want {
		t.Errorf("filtered summary = %q, want %q", got, want)
	}
	e.click(`table[data-list=queues] thead th:nth-child(2) button.sort`) // Name: reverse
	e.waitJS("reverse sort", `document.querySelector('table[data-list=queues] td[data-col=name]').textContent === 'load-01999'`)
}

// thousands writes n as the UI does (en-US grouping).
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestCrossSiteRequestsCannotAct logs in, then opens a page of another
// origin in the same browser that tries to create objects through the
// API with the requests a page may send anywhere without asking: a PUT of
// a queue and a POST of definitions with a text/plain body (what a form
// can post), with credentials: "include". The browser holds no credential
// it would attach to them (no cookie, no cached Basic authentication: the
// UI sends the header itself), so the API refuses both.
func TestCrossSiteRequestsCannotAct(t *testing.T) {
	e := start(t, envOpts{})
	e.allowErrors = true // the attacker's page fails its requests
	e.login("guest", "guest")
	prompts := e.cancelAuthPrompts()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		defs := `{"queues":[{"name":"csrf-form","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`
		fmt.Fprintf(w, `<!doctype html><body><script>
const base = %s;
const opts = (method, body) => ({method, body, mode: 'no-cors', credentials: 'include', headers: {'Content-Type': 'text/plain'}});
Promise.allSettled([
  fetch(base + '/api/queues/%%2F/csrf-fetch', opts('PUT', '{}')),
  fetch(base + '/api/definitions', opts('POST', %s)),
]).then(() => { document.body.dataset.done = '1'; });
</script></body>`, jsString(e.base), jsString(defs))
	}))
	defer evil.Close()
	eval[bool](e, "open the other site", fmt.Sprintf(`location.href = %s; true`, jsString(evil.URL)))
	e.waitJS("attack done", `document.body && document.body.dataset.done === '1'`)
	for _, q := range []string{"csrf-fetch", "csrf-form"} {
		if code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues/%2F/"+q, nil); code != http.StatusNotFound {
			t.Errorf("queue %s: GET says %d: a cross-site request acted", q, code)
		}
	}
	t.Logf("the browser was challenged for credentials %d times", prompts.Load())
	// The UI's own session is still there when the tab comes back.
	eval[bool](e, "back to the UI", fmt.Sprintf(`location.href = %s; true`, jsString(e.base+"/")))
	e.waitJS("still logged in", `document.querySelector('main').dataset.ready === 'overview'`)
}
