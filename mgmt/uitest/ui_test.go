package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestOperatorSession walks through what an operator does in the UI, each
// step checked against the API: log in, read the overview, add a queue
// and an exchange through the forms, bind them, publish and get the
// message back, close a connection, add a user who then logs in with
// fewer rights, log out.
func TestOperatorSession(t *testing.T) {
	e := start(t, envOpts{})
	began := time.Now()

	// Some traffic to count: one client with a consumer and messages.
	conn, err := amqp091.DialConfig(e.amqp, amqp091.Config{Properties: amqp091.Table{"connection_name": "ui-client"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"orders", "invoices"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		if err := ch.Publish("", "orders", false, false, amqp091.Publishing{Body: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.Consume("invoices", "ui-consumer", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	waitAPI(t, "7 messages ready", func() bool {
		var o overview
		e.getJSON("/api/overview", &o)
		return o.QueueTotals.MessagesReady == 7
	})

	// Log in; the overview's totals are the API's.
	e.login("guest", "guest")
	if got := e.text("#username"); got != "guest" {
		t.Errorf("header user = %q", got)
	}
	var o overview
	e.getJSON("/api/overview", &o)
	want := map[string]int{
		"connections": o.ObjectTotals.Connections, "channels": o.ObjectTotals.Channels,
		"exchanges": o.ObjectTotals.Exchanges, "queues": o.ObjectTotals.Queues, "consumers": o.ObjectTotals.Consumers,
		"messages_ready": o.QueueTotals.MessagesReady, "messages_unacknowledged": o.QueueTotals.MessagesUnacknowledged,
		"messages": o.QueueTotals.Messages,
	}
	if want["connections"] != 1 || want["queues"] != 2 || want["consumers"] != 1 || want["messages"] != 7 {
		t.Fatalf("API overview before the UI checks: %+v", want)
	}
	for k, v := range want {
		if got := e.text(`[data-total="` + k + `"]`); got != strconv.Itoa(v) {
			t.Errorf("overview %s: UI shows %q, API says %d", k, got, v)
		}
	}
	if got := e.text(`table.nodes tbody tr td`); got != o.Node {
		t.Errorf("node row starts with %q, want %q", got, o.Node)
	}

	// Add a queue through the form, with a well-known argument.
	e.open("#/queues", "queues")
	e.fill(`#add-queue input[name=name]`, "ui-q")
	e.click(`#add-queue .known button[title^="How many ready"]`) // x-max-length, Number
	e.fill(`#add-queue .args-row:first-child input[aria-label="Argument value"]`, "100")
	e.click(`#add-queue button[type=submit]`)
	waitAPI(t, "queue ui-q declared", func() bool {
		code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues/%2F/ui-q", nil)
		return code == http.StatusOK
	})
	var q struct {
		Durable   bool           `json:"durable"`
		Arguments map[string]any `json:"arguments"`
		Messages  int            `json:"messages"`
	}
	e.getJSON("/api/queues/%2F/ui-q", &q)
	if !q.Durable || q.Arguments["x-max-length"] != float64(100) {
		t.Errorf("queue from the form: %+v", q)
	}
	e.waitJS("ui-q in the list", `[...document.querySelectorAll('table[data-list=queues] td[data-col=name] a')].some(a => a.textContent === 'ui-q')`)

	// A form error is shown next to the field, in the API's words.
	e.fill(`#add-queue input[name=name]`, "ui-bad")
	e.fill(`#add-queue .args-row:first-child input[aria-label="Argument key"]`, "x-max-length")
	e.fill(`#add-queue .args-row:first-child input[aria-label="Argument value"]`, "lots")
	e.choose(`#add-queue .args-row:first-child select`, "Number")
	e.click(`#add-queue button[type=submit]`)
	e.waitJS("argument error", `!document.querySelector('#add-queue [data-field=arguments] .field-error').hidden`)
	if msg := e.text(`#add-queue [data-field=arguments] .field-error`); !strings.Contains(msg, "lots") {
		t.Errorf("client-side argument error = %q", msg)
	}
	// The same value typed as a String reaches the broker, which refuses it.
	e.choose(`#add-queue .args-row:first-child select`, "String")
	e.click(`#add-queue button[type=submit]`)
	e.waitJS("API argument error", `/x-max-length/.test(document.querySelector('#add-queue [data-field=arguments] .field-error').textContent)`)
	msg := e.text(`#add-queue [data-field=arguments] .field-error`)
	code, body := e.api("guest", "guest", http.MethodPut, "/api/queues/%2F/ui-bad", map[string]any{"arguments": map[string]any{"x-max-length": "lots"}})
	var apiErr struct{ Reason string }
	json.Unmarshal(body, &apiErr)
	if code != http.StatusBadRequest || !strings.Contains(msg, apiErr.Reason) {
		t.Errorf("field error %q, API says %d %q", msg, code, apiErr.Reason)
	}

	// Add an exchange through the form.
	e.open("#/exchanges", "exchanges")
	e.fill(`#add-exchange input[name=name]`, "ui-x")
	e.choose(`#add-exchange select[name=type]`, "topic")
	e.click(`#add-exchange button[type=submit]`)
	waitAPI(t, "exchange ui-x declared", func() bool {
		code, b := e.api("guest", "guest", http.MethodGet, "/api/exchanges/%2F/ui-x", nil)
		return code == http.StatusOK && strings.Contains(string(b), `"type":"topic"`)
	})

	// Bind ui-q to ui-x from the exchange's page.
	e.open("#/exchanges/%2F/ui-x", "exchanges")
	e.fill(`#bind-form input[name=dest]`, "ui-q")
	e.fill(`#bind-form input[name=routing_key]`, "ui.#")
	e.click(`#bind-form button[type=submit]`)
	waitAPI(t, "binding ui-x -> ui-q", func() bool {
		var bs []struct {
			RoutingKey string `json:"routing_key"`
		}
		e.getJSON("/api/bindings/%2F/e/ui-x/q/ui-q", &bs)
		return len(bs) == 1 && bs[0].RoutingKey == "ui.#"
	})
	e.waitJS("binding listed", `[...document.querySelectorAll('table.bindings code')].some(c => c.textContent === 'ui.#')`)

	// Publish through the exchange's form; get it back on the queue's page.
	e.fill(`#publish input[name=routing_key]`, "ui.hello")
	e.fill(`#publish textarea[name=headers]`, "source = browser")
	e.fill(`#publish textarea[name=properties]`, "content_type = text/plain")
	e.fill(`#publish textarea[name=payload]`, "hello from the browser")
	e.click(`#publish button[type=submit]`)
	e.waitJS("published note", `[...document.querySelectorAll('#notify .note')].some(n => n.textContent === 'Message published.')`)
	waitAPI(t, "ui-q holds the message", func() bool {
		e.getJSON("/api/queues/%2F/ui-q", &q)
		return q.Messages == 1
	})
	e.open("#/queues/%2F/ui-q", "queues")
	e.choose(`#get-messages select[name=ackmode]`, "ack_requeue_false")
	e.click(`#get-messages button[type=submit]`)
	e.waitJS("message shown", `document.querySelector('.message pre.payload') !== null`)
	if got := e.text(`.message pre.payload`); got != "hello from the browser" {
		t.Errorf("payload in the UI = %q", got)
	}
	if got := e.text(`.message table.facts`); !strings.Contains(got, "source: browser") || !strings.Contains(got, "content_type: text/plain") || !strings.Contains(got, "ui.hello") {
		t.Errorf("message facts = %q", got)
	}
	waitAPI(t, "ui-q empty after ack", func() bool {
		e.getJSON("/api/queues/%2F/ui-q", &q)
		return q.Messages == 0
	})

	// Close the client's connection with a reason; the client hears it.
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	e.open("#/connections", "connections")
	e.waitJS("connection listed", `document.querySelector('table[data-list=connections] td[data-col=name] a') !== null`)
	if got := e.text(`table[data-list=connections] td[data-col=name] .sub`); got != "ui-client" {
		t.Errorf("connection_name shown = %q", got)
	}
	e.click(`table[data-list=connections] td[data-col=name] a`)
	e.waitJS("connection page", `document.querySelector('#close-connection') !== null && document.querySelector('main table.facts') !== null`)
	if got := e.text(`main .page`); !strings.Contains(got, "ui-client") || !strings.Contains(got, "publisher_confirms") {
		t.Errorf("connection page lacks the client properties: %q", got)
	}
	e.fill(`#close-connection input[name=reason]`, "closed from the UI test")
	e.click(`#close-connection button[type=submit]`)
	select {
	case ce := <-closed:
		if ce == nil || ce.Code != amqp091.ConnectionForced || !strings.Contains(ce.Reason, "closed from the UI test") {
			t.Errorf("client saw close %+v", ce)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not closed")
	}
	e.waitJS("back on the connection list", `location.hash === '#/connections' && document.querySelector('main').dataset.ready === 'connections'`)

	// Delete a queue from its page, with the keyboard: Escape on the
	// confirmation keeps it, Enter (on the focused Delete button) deletes it.
	e.open("#/queues/%2F/invoices", "queues")
	e.do("focus delete", chromedp.Focus(chromedp.CSS(`main button.danger`)), chromedp.KeyEvent(kb.Enter))
	e.waitJS("confirmation open", `document.querySelector('dialog.confirm[open]') !== null`)
	e.do("escape", chromedp.KeyEvent(kb.Escape))
	e.waitJS("confirmation closed", `document.querySelector('dialog.confirm') === null`)
	if code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues/%2F/invoices", nil); code != http.StatusOK {
		t.Fatalf("queue invoices after Escape: %d", code)
	}
	e.do("delete again", chromedp.Focus(chromedp.CSS(`main button.danger`)), chromedp.KeyEvent(kb.Enter))
	e.waitJS("confirmation open", `document.activeElement && document.activeElement.closest('dialog.confirm[open]') !== null`)
	e.do("enter", chromedp.KeyEvent(kb.Enter))
	waitAPI(t, "queue invoices deleted", func() bool {
		code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues/%2F/invoices", nil)
		return code == http.StatusNotFound
	})
	e.waitJS("back on the queue list", `location.hash === '#/queues'`)

	// Add a management user and give it the default vhost.
	e.open("#/admin/users", "admin")
	e.fill(`#add-user input[name=name]`, "ui-viewer")
	e.fill(`#add-user input[name=password]`, "s3cret pass")
	e.fill(`#add-user input[name=password2]`, "s3cret pass")
	e.fill(`#add-user input[name=tags]`, "management")
	e.click(`#add-user button[type=submit]`)
	waitAPI(t, "user ui-viewer", func() bool {
		code, b := e.api("guest", "guest", http.MethodGet, "/api/users/ui-viewer", nil)
		return code == http.StatusOK && strings.Contains(string(b), `"management"`)
	})
	e.open("#/admin/users/ui-viewer", "admin")
	e.click(`#set-permission button[type=submit]`)
	waitAPI(t, "permission for ui-viewer", func() bool {
		code, _ := e.api("guest", "guest", http.MethodGet, "/api/permissions/%2F/ui-viewer", nil)
		return code == http.StatusOK
	})

	// Log out: the credentials are gone from the tab.
	e.click(`#logout`)
	e.waitJS("login form after logout", `document.querySelector('#login') !== null`)
	if n := eval[int](e, "session storage", `sessionStorage.length`); n != 0 {
		t.Errorf("sessionStorage keeps %d entries after logout", n)
	}

	// The new user logs in and sees no Admin tab, nor the page.
	e.login("ui-viewer", "s3cret pass")
	tabs := eval[[]string](e, "tabs", `[...document.querySelectorAll('#tabs a')].map(a => a.textContent)`)
	if strings.Join(tabs, ",") != "Overview,Connections,Channels,Exchanges,Queues" {
		t.Errorf("tabs for a management user: %v", tabs)
	}
	if eval[bool](e, "nodes", `document.querySelector('table.nodes') !== null`) {
		t.Error("a management user sees the node table (monitoring only)")
	}
	e.open("#/admin/users", "admin")
	if got := e.text("main h1"); got != "Not found" {
		t.Errorf("admin page for a management user shows %q", got)
	}
	if code, _ := e.api("ui-viewer", "s3cret pass", http.MethodGet, "/api/users", nil); code != http.StatusUnauthorized {
		t.Errorf("API /api/users as ui-viewer: %d", code)
	}
	// It sees the queues of its vhost.
	e.open("#/queues", "queues")
	e.waitJS("queues for ui-viewer", `[...document.querySelectorAll('table[data-list=queues] td[data-col=name] a')].some(a => a.textContent === 'orders')`)
	e.click(`#logout`)
	e.waitJS("login form after logout", `document.querySelector('#login') !== null`)

	// A wrong password is refused on the form, in the API's words.
	e.allowErrors = true
	e.do("bad login", chromedpLogin("guest", "wrong")...)
	e.waitJS("login error", `[...document.querySelectorAll('#login .field-error')].some(el => !el.hidden && el.textContent.includes('Login failed'))`)
	if eval[int](e, "session storage", `sessionStorage.length`) != 0 {
		t.Error("a failed login left credentials in sessionStorage")
	}
	t.Logf("operator session: %v", time.Since(began).Round(time.Millisecond))
}

type overview struct {
	Node         string `json:"node"`
	ObjectTotals struct {
		Connections, Channels, Exchanges, Queues, Consumers int
	} `json:"object_totals"`
	QueueTotals struct {
		Messages               int `json:"messages"`
		MessagesReady          int `json:"messages_ready"`
		MessagesUnacknowledged int `json:"messages_unacknowledged"`
	} `json:"queue_totals"`
}

// waitAPI polls cond (an API check) until it holds, for at most 30 s.
func waitAPI(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = fmt.Sprintf
var _ = url.PathEscape
