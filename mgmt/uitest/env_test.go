// Package uitest drives the management web UI (mgmt/ui) in a real
// browser: Debian's chromium, headless, through the DevTools protocol
// (chromedp), against an in-process broker and management server.
//
// Without chromium the tests skip, except under CI=true, where they fail:
// CI installs chromium (.ci/run).
package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/server/servertest"
)

// env is a broker, its management server and a browser tab.
type env struct {
	t      testing.TB
	broker *server.Server
	amqp   string // amqp://guest:guest@host:port/
	base   string // http://127.0.0.1:port
	ctx    context.Context
	// pageErrors are exceptions and console errors of the page;
	// allowErrors is set by tests that provoke some (a failed login).
	pageErrors  lines
	allowErrors bool
}

// chromiumPath finds the browser, or skips (fails under CI).
func chromiumPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI must install it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium): the browser tests need it")
	return ""
}

type envOpts struct {
	statsInterval time.Duration
	width, height int64
}

// start runs a broker and a management server on 127.0.0.1 and opens a
// headless browser of width x height (1280 x 800 by default).
func start(t testing.TB, o envOpts) *env {
	t.Helper()
	chrome := chromiumPath(t)
	broker := servertest.StartBroker(t, server.Config{})
	b := broker.Server()
	if o.statsInterval == 0 {
		o.statsInterval = 5 * time.Second // the API's default
	}
	m := mgmt.New(b, mgmt.Options{Listen: "127.0.0.1:0", StatsInterval: o.statsInterval})
	if err := m.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mgmt serve: %v", err)
		}
	})
	if o.width == 0 {
		o.width, o.height = 1280, 800
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(int(o.width), int(o.height)),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(o.width, o.height)); err != nil {
		bcancel()
		acancel()
		t.Fatalf("start chromium: %v", err)
	}
	e := &env{t: t, broker: b, amqp: broker.URL(), base: "http://" + m.Addr().String(), ctx: bctx}
	// Exceptions in the page fail the test: the UI must not throw.
	cctx, ccancel := context.WithCancel(bctx)
	go func() {
		for msg, err := range chromedp.Console(cctx) {
			if err != nil {
				return
			}
			if msg.IsException() || (msg.Type == "error" && msg.Source != "network") {
				e.pageErrors.Add(fmt.Sprintf("%s (%s:%d)", msg.String(), msg.URL, msg.Line))
			}
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			e.failShot()
		}
		ccancel()
		bcancel()
		acancel()
		for _, m := range e.pageErrors.List() {
			if !e.allowErrors {
				t.Errorf("page error: %s", m)
			}
		}
	})
	return e
}

// failShot saves what the browser shows, for a failed test.
func (e *env) failShot() {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return
	}
	p := filepath.Join(os.TempDir(), "warren-uitest-"+strings.ReplaceAll(e.t.Name(), "/", "_")+".png")
	if os.WriteFile(p, b, 0o644) == nil {
		e.t.Logf("the page at the failure: %s", p)
	}
}

// do runs browser actions with a deadline.
func (e *env) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression, awaiting a promise, into T.
func eval[T any](e *env, what, js string) T {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is truthy, for at most 30
// s (CI runs it under the race detector on a shared machine); it survives a navigation (the poll starts again in the new page).
func (e *env) waitJS(what, js string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %s: %v", what, js, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// api calls the management API as user (Go's client, not the browser).
func (e *env) api(user, pass, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	code, b := e.api("guest", "guest", http.MethodGet, path, nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}

// login fills the login form as a person would and waits for the overview.
func (e *env) login(user, pass string) {
	e.t.Helper()
	e.do("open login", chromedp.Navigate(e.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#login`)))
	// Typed, and submitted with Enter, as with a keyboard.
	e.do("log in",
		chromedp.SendKeys(chromedp.CSS(`#login input[name=username]`), user),
		chromedp.SendKeys(chromedp.CSS(`#login input[name=password]`), pass+kb.Enter),
	)
	e.waitJS("overview after login", `document.querySelector('main').dataset.ready === 'overview' && !document.getElementById('header').hidden`)
	e.checkRendered("overview as " + user)
}

// open goes to a hash route and waits for its page to render.
func (e *env) open(hash, page string) {
	e.t.Helper()
	eval[bool](e, "open "+hash, fmt.Sprintf(`document.querySelector('main').dataset.ready = ''; location.hash = %s; true`, jsString(hash)))
	e.waitJS("page "+page, fmt.Sprintf(`document.querySelector('main').dataset.ready === %s`, jsString(page)))
	e.checkRendered(hash)
}

// checkRendered fails the test if the page shows a value it failed to
// render, which shows as one of these words.
func (e *env) checkRendered(what string) {
	e.t.Helper()
	if bad := eval[string](e, "rendering of "+what, `(document.querySelector('main').innerText.match(/undefined|NaN|\[object Object\]|^null$/m) || [''])[0]`); bad != "" {
		e.t.Errorf("page %s shows %q", what, bad)
	}
}

// fill types value into the control, replacing what it held.
func (e *env) fill(sel, value string) {
	e.t.Helper()
	e.setValue(sel, "")
	e.do("fill "+sel, chromedp.SendKeys(chromedp.CSS(sel), value))
}

// choose sets a <select>'s value.
func (e *env) choose(sel, value string) {
	e.t.Helper()
	e.setValue(sel, value)
}

// setValue sets a control's value from script and fires its events.
func (e *env) setValue(sel, value string) {
	e.t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el) return false;
		el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, jsString(sel), jsString(value))
	if !eval[bool](e, "set "+sel, js) {
		e.t.Fatalf("set %s: no such element", sel)
	}
}

func (e *env) click(sel string) {
	e.t.Helper()
	// The element found and clicked in one evaluation: the pages re-render
	// their tables on each refresh, and a node chromedp resolved a moment
	// before can be gone by its click ("Could not find node with given
	// id"). It waits for the element to be there and enabled.
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el || el.disabled) return false;
		el.scrollIntoView({block: 'center'}); el.click(); return true; })()`, jsString(sel))
	deadline := time.Now().Add(30 * time.Second)
	for !eval[bool](e, "click "+sel, js) {
		if time.Now().After(deadline) {
			e.t.Fatalf("click %s: no such enabled element within 30s", sel)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// text is the element's innerText.
func (e *env) text(sel string) string {
	e.t.Helper()
	return strings.TrimSpace(eval[string](e, "text of "+sel, fmt.Sprintf(`(document.querySelector(%s) || {innerText: ''}).innerText`, jsString(sel))))
}

// lines collects page errors from the console goroutine.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) Add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }

func (l *lines) List() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chromedpLogin types user and pass into the login form and submits it.
func chromedpLogin(user, pass string) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.SendKeys(chromedp.CSS(`#login input[name=username]`), user),
		chromedp.SendKeys(chromedp.CSS(`#login input[name=password]`), pass),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
	}
}

// cancelAuthPrompts answers every HTTP authentication challenge of the
// API as a person pressing Cancel on the browser's login box would, and
// returns a counter of the challenges. (A headless browser would
// otherwise leave the request waiting for an answer.)
func (e *env) cancelAuthPrompts() *atomic.Int32 {
	e.t.Helper()
	var n atomic.Int32
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	auth := chromedp.Events(ctx, fetch.AuthRequired)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		for ev, err := range auth {
			if err != nil {
				return
			}
			n.Add(1)
			chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{
				RequestID:             ev.RequestID,
				AuthChallengeResponse: &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth},
			})
		}
	}()
	yes := true
	if _, err := chromedp.Call(e.ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: e.base + "/api/*"}}, HandleAuthRequests: &yes,
	}); err != nil {
		e.t.Fatalf("Fetch.enable: %v", err)
	}
	return &n
}
