package uitest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestScreenshots writes a PNG of every page of the UI, with a populated
// broker under some traffic, into $WARREN_UI_SCREENSHOTS (see
// scripts/ui-screenshots.sh). Without that variable it does nothing.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("WARREN_UI_SCREENSHOTS")
	if dir == "" {
		t.Skip("set WARREN_UI_SCREENSHOTS to a directory to take the screenshots (scripts/ui-screenshots.sh)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	warm := 45 * time.Second
	if s := os.Getenv("WARREN_UI_WARMUP"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		warm = d
	}
	e := start(t, envOpts{statsInterval: time.Second})
	stop := populate(t, e)
	defer stop()

	width, height, scale := int64(1280), int64(800), 1
	shot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
		defer cancel()
		// The whole page: the viewport grows to the document's height for
		// the capture (what is beyond a viewport may not be painted).
		full, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Math.ceil(document.documentElement.scrollHeight)`))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, max(height, full), chromedp.EmulateScale(float64(scale))),
			chromedp.Evaluate[chromedp.Void](`new Promise(r => { window.scrollTo(0, 0); requestAnimationFrame(() => requestAnimationFrame(r)); })`, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height, chromedp.EmulateScale(float64(scale)))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s.png", name)
	}

	e.do("open", chromedp.Navigate(e.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#login`)))
	shot("login")
	// The charts draw the broker's history: let it gather samples before
	// the pages are opened.
	deadline := time.Now().Add(warm)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	e.login("guest", "guest")
	e.choose("#refresh", "2")
	e.open("#/", "overview")
	e.waitJS("rates drawn", `document.querySelectorAll('svg.chart path.line').length > 3`)
	shot("overview")
	e.open("#/connections", "connections")
	shot("connections")
	e.click(`table[data-list=connections] td[data-col=name] a`)
	e.waitJS("connection page", `document.querySelector('#close-connection') && document.querySelector('main table.facts')`)
	shot("connection")
	e.open("#/channels", "channels")
	shot("channels")
	e.open("#/exchanges", "exchanges")
	shot("exchanges")
	e.open("#/exchanges/%2F/orders", "exchanges")
	e.waitJS("bindings", `document.querySelector('table.bindings')`)
	shot("exchange")
	e.open("#/queues", "queues")
	shot("queues")
	e.open("#/queues/%2F/orders.shipped", "queues")
	e.choose(`#get-messages input[name=count]`, "2")
	e.click(`#get-messages button[type=submit]`)
	e.waitJS("messages", `document.querySelectorAll('.message').length === 2`)
	// A few refreshes, for the queue's charts.
	e.waitJS("queue samples", `document.querySelectorAll('main svg.chart path.line').length >= 2`)
	shot("queue")
	// A form error, in the API's words, next to its field.
	e.open("#/queues", "queues")
	e.fill(`#add-queue input[name=name]`, "bad-queue")
	e.fill(`#add-queue .args-row:first-child input[aria-label="Argument key"]`, "x-max-length")
	e.fill(`#add-queue .args-row:first-child input[aria-label="Argument value"]`, "many")
	e.click(`#add-queue button[type=submit]`)
	e.waitJS("error", `/x-max-length/.test(document.querySelector('#add-queue [data-field=arguments] .field-error').textContent)`)
	shot("queue-form-error")
	for _, p := range []string{"users", "vhosts", "policies", "limits", "definitions"} {
		e.open("#/admin/"+p, "admin")
		shot("admin-" + p)
	}
	e.open("#/admin/users/app", "admin")
	e.waitJS("permissions", `document.querySelector('main table.list')`)
	shot("admin-user")

	// Phone width.
	width, height, scale = 390, 844, 2
	e.do("phone", chromedp.EmulateViewport(width, height, chromedp.EmulateScale(2)))
	e.open("#/", "overview")
	shot("phone-overview")
	e.open("#/queues", "queues")
	shot("phone-queues")
	width, height, scale = 1280, 800, 1
	e.do("desktop", chromedp.EmulateViewport(width, height))

	// A management user: fewer tabs, its own connections.
	e.click("#logout")
	e.waitJS("login", `document.querySelector('#login')`)
	e.login("app", "app-secret")
	shot("management-user")
}

// populate declares vhosts, users, exchanges, queues, bindings and a
// policy, and starts clients that publish and consume until stop.
func populate(t *testing.T, e *env) (stop func()) {
	t.Helper()
	put := func(path string, body any) {
		t.Helper()
		if code, b := e.api("guest", "guest", http.MethodPut, path, body); code >= 300 {
			t.Fatalf("PUT %s: %d %s", path, code, b)
		}
	}
	post := func(path string, body any) {
		t.Helper()
		if code, b := e.api("guest", "guest", http.MethodPost, path, body); code >= 300 {
			t.Fatalf("POST %s: %d %s", path, code, b)
		}
	}
	put("/api/vhosts/staging", map[string]any{"description": "Pre-production", "tags": "test"})
	put("/api/users/ops", map[string]any{"password": "ops-secret", "tags": "monitoring"})
	put("/api/users/app", map[string]any{"password": "app-secret", "tags": "management"})
	put("/api/users/release", map[string]any{"password": "release-secret", "tags": "policymaker"})
	for _, u := range []string{"ops", "app", "release"} {
		put("/api/permissions/%2F/"+u, map[string]string{"configure": ".*", "write": ".*", "read": ".*"})
	}
	put("/api/permissions/staging/guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"})
	put("/api/topic-permissions/%2F/app", map[string]string{"exchange": "amq.topic", "write": "^app\\.", "read": ".*"})
	put("/api/vhost-limits/staging/max-connections", map[string]any{"value": 50})
	put("/api/vhost-limits/staging/max-queues", map[string]any{"value": 200})
	put("/api/exchanges/%2F/orders", map[string]any{"type": "topic", "durable": true})
	put("/api/exchanges/%2F/payments", map[string]any{"type": "direct", "durable": true, "arguments": map[string]any{"alternate-exchange": "unrouted"}})
	put("/api/exchanges/%2F/unrouted", map[string]any{"type": "fanout", "durable": true})
	put("/api/exchanges/%2F/audit", map[string]any{"type": "fanout", "durable": true})
	put("/api/exchanges/%2F/dlx", map[string]any{"type": "fanout", "durable": true})
	put("/api/exchanges/staging/orders", map[string]any{"type": "topic", "durable": true})
	queues := map[string]map[string]any{
		"orders.created":   {"x-dead-letter-exchange": "dlx"},
		"orders.shipped":   {"x-max-length": 50000},
		"payments.pending": {"x-message-ttl": 600000, "x-dead-letter-exchange": "dlx"},
		"payments.failed":  {},
		"audit.log":        {"x-queue-type": "quorum"},
		"dead-letters":     {},
		"email.outbox":     {"x-max-priority": 10},
		"unrouted":         {},
	}
	for q, args := range queues {
		put("/api/queues/%2F/"+q, map[string]any{"durable": true, "arguments": args})
	}
	for i := range 6 {
		put(fmt.Sprintf("/api/queues/staging/load-test-%d", i), map[string]any{"durable": false})
	}
	bind := func(x, q, key string) {
		post("/api/bindings/%2F/e/"+x+"/q/"+q, map[string]any{"routing_key": key})
	}
	bind("orders", "orders.created", "orders.created.#")
	bind("orders", "orders.shipped", "orders.shipped.*")
	bind("orders", "audit.log", "#")
	bind("payments", "payments.pending", "pending")
	bind("payments", "payments.failed", "failed")
	bind("audit", "audit.log", "")
	bind("dlx", "dead-letters", "")
	bind("unrouted", "unrouted", "")
	post("/api/bindings/%2F/e/orders/e/audit", map[string]any{"routing_key": "orders.shipped.#"})
	put("/api/policies/%2F/payments-cap", map[string]any{"pattern": "^payments\\.", "apply-to": "queues", "priority": 1, "definition": map[string]any{"max-length": 100000}})
	put("/api/policies/staging/lazy", map[string]any{"pattern": ".*", "apply-to": "queues", "definition": map[string]any{"queue-mode": "lazy"}})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	dial := func(name, user, pass string) *amqp091.Connection {
		t.Helper()
		url := e.amqp
		if user != "guest" {
			url = fmt.Sprintf("amqp://%s:%s@%s/", user, pass, e.amqp[len("amqp://guest:guest@"):len(e.amqp)-1])
		}
		c, err := amqp091.DialConfig(url, amqp091.Config{Properties: amqp091.Table{
			"connection_name": name, "product": "example " + name, "version": "2.4.1", "platform": "Go",
		}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pub := dial("order-service", "guest", "guest")
	worker := dial("billing-worker", "guest", "guest")
	auditor := dial("audit-consumer", "ops", "ops-secret")
	app := dial("web-frontend", "app", "app-secret")
	conns := []*amqp091.Connection{pub, worker, auditor, app}

	pch, _ := pub.Channel()
	pch.Confirm(false)
	confirms := pch.NotifyPublish(make(chan amqp091.Confirmation, 1024))
	go func() {
		for range confirms {
		}
	}()
	wch, _ := worker.Channel()
	wch.Qos(20, 0, false)
	deliveries, _ := wch.Consume("orders.created", "billing-1", false, false, false, false, nil)
	pay, _ := wch.Consume("payments.pending", "billing-2", false, false, false, false, nil)
	ach, _ := auditor.Channel()
	audit, _ := ach.Consume("audit.log", "audit-tail", true, false, false, false, nil)
	xch, _ := app.Channel()
	xch.Tx()
	xch.Qos(5, 0, false)
	xch.Consume("email.outbox", "mailer", false, false, false, false, nil)

	go func() {
		for d := range deliveries {
			d.Ack(false)
		}
	}()
	go func() {
		n := 0
		for d := range pay {
			// Leave some unacknowledged, as a slow worker does.
			if n++; n%5 != 0 {
				d.Ack(false)
			}
		}
	}()
	go func() {
		for range audit {
		}
	}()
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		began := time.Now()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s := time.Since(began).Seconds()
			burst := 2 + int(3*(1+math.Sin(s/6)))
			for j := range burst {
				key := "orders.created.eu"
				if j%3 == 0 {
					key = "orders.shipped.eu"
				}
				body := fmt.Sprintf(`{"order": %d, "items": %d, "total": "%d.%02d EUR"}`, i*10+j, 1+j%4, 10+j*7, j*13%100)
				pch.Publish("orders", key, false, false, amqp091.Publishing{
					ContentType: "application/json", DeliveryMode: 2, MessageId: fmt.Sprint(i*10 + j),
					Headers: amqp091.Table{"tenant": "acme", "attempt": int32(1)}, Body: []byte(body),
				})
			}
			if i%4 == 0 {
				pch.Publish("payments", "pending", false, false, amqp091.Publishing{Body: []byte(`{"payment": "pending"}`)})
			}
			if i%20 == 0 {
				pch.Publish("payments", "refund", false, false, amqp091.Publishing{Body: []byte(`{"payment": "unknown kind"}`)})
			}
		}
	}()
	return func() {
		cancel()
		<-done
		for _, c := range conns {
			c.Close()
		}
	}
}
