package uitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestStreamQueuePage: a stream's page shows its partitions and consumer
// groups as the API has them (the groups once the broker's streams have
// them), and resets and deletes a group (groupActions). With
// WARREN_UI_SCREENSHOTS set it writes stream.png and stream-reset.png
// there.
func TestStreamQueuePage(t *testing.T) {
	e := start(t, envOpts{})
	conn, err := amqp091.Dial(e.amqp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	args := amqp091.Table{"x-queue-type": "stream", "x-stream-partitions": int32(3)}
	if _, err := ch.QueueDeclare("events", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		dc, err := ch.PublishWithDeferredConfirm("", "events", false, false, amqp091.Publishing{
			Body: []byte(strings.Repeat("x", 100)), Headers: amqp091.Table{"x-stream-partition-key": fmt.Sprintf("user-%d", i)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("nacked")
		}
	}
	// Two groups where the broker has them: billing's member acks half of
	// what it gets, audit's two members ack nothing.
	consume := func(tag, group string, acks int) *amqp091.Channel {
		c, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Qos(100, 0, false); err != nil {
			t.Fatal(err)
		}
		dels, err := c.Consume("events", tag, false, false, false, false, amqp091.Table{"x-stream-group": group, "x-stream-offset": "first"})
		if err != nil {
			return c
		}
		go func() {
			n := 0
			for d := range dels {
				if n++; n <= acks {
					d.Ack(false)
				}
			}
		}()
		return c
	}
	consume("billing-1", "billing", 6)
	audit := []*amqp091.Channel{consume("audit-1", "audit", 0), consume("audit-2", "audit", 0)}
	var gs []map[string]any
	e.getJSON("/api/stream-groups/%2F/events", &gs)
	groups := len(gs) > 0

	e.login("guest", "guest")
	e.open("#/queues/%2F/events", "queues")
	e.waitJS("partitions table", `document.querySelector('#stream-partitions tbody tr')`)
	var q struct {
		Raw []map[string]any `json:"partitions"`
	}
	e.getJSON("/api/queues/%2F/events", &q)
	rows := eval[[][]string](e, "partition rows", `[...document.querySelectorAll('#stream-partitions tbody tr')].map(r => [...r.cells].map(c => c.innerText))`)
	if len(rows) != len(q.Raw) || len(rows) == 0 {
		t.Fatalf("partition rows %v, API %v", rows, q.Raw)
	}
	for i, p := range q.Raw {
		for j, k := range []string{"partition", "first_offset", "next_offset", "messages", "segments"} {
			if want := fmtNumber(p[k].(float64)); rows[i][j] != want {
				t.Errorf("partition %d %s: page %q, API %q", i, k, rows[i][j], want)
			}
		}
		if want := fmtBytes(p["bytes"].(float64)); rows[i][5] != want {
			t.Errorf("partition %d bytes: page %q, API %q", i, rows[i][5], want)
		}
	}
	if !groups {
		if got := e.text("#stream-groups"); got != "… no consumer groups …" {
			t.Errorf("groups without any: %q", got)
		}
	} else {
		// The page refreshes every 5 s; wait for it to show the API's
		// groups and lags.
		e.choose("#refresh", "2")
		want := func() string {
			e.getJSON("/api/stream-groups/%2F/events", &gs)
			var b strings.Builder
			for _, g := range gs {
				for _, p := range g["partitions"].([]any) {
					p := p.(map[string]any)
					owner := "—"
					if o, ok := p["owner"].(string); ok {
						owner = o
					}
					fmt.Fprintf(&b, "%s %v %s %s|", g["name"], p["partition"], owner, fmtNumber(p["lag"].(float64)))
				}
			}
			return b.String()
		}
		page := `(() => { let g = ''; return [...document.querySelectorAll('#stream-groups tbody tr')].map(r => { const c = [...r.cells].map(x => x.innerText);
			if (c[0]) g = c[0]; return g + ' ' + c[3] + ' ' + c[4] + ' ' + c[6] + '|'; }).join(''); })()`
		deadline := time.Now().Add(30 * time.Second)
		for {
			w, got := want(), eval[string](e, "group rows", page)
			if w == got && w != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group rows:\n page %s\n API  %s", got, w)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// An owner links to its channel's page.
		href := eval[string](e, "owner link", `(document.querySelector('#stream-groups tbody td:nth-child(5) a') || {}).hash || ''`)
		if !strings.HasPrefix(href, "#/channels/") {
			t.Errorf("owner link %q, want a channel's page", href)
		}
	}
	e.checkRendered("stream page")
	streamShot(t, e)
	if groups {
		groupActions(t, e, audit)
	}
}

// streamShot writes the whole page as stream.png into
// $WARREN_UI_SCREENSHOTS, when set.
func streamShot(t *testing.T, e *env) {
	dir := os.Getenv("WARREN_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	full, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Math.ceil(document.documentElement.scrollHeight)`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, max(800, full))); err != nil {
		t.Fatal(err)
	}
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stream.png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
}

// groupActions: a group with members cannot be reset or deleted (its
// controls are disabled); once its members are gone, a reset to an offset
// and a delete each ask first, Cancel keeps the group as it was, and
// confirming does what the API then shows.
func groupActions(t *testing.T, e *env, members []*amqp091.Channel) {
	t.Helper()
	const controls = `['[data-reset="audit"]', '[data-delete-group="audit"]', '[data-reset-to="audit"]'].map(s => document.querySelector(s).disabled)`
	if got := eval[[]bool](e, "audit's controls", controls); fmt.Sprint(got) != "[true true true]" {
		t.Errorf("audit has members, yet its controls' disabled are %v", got)
	}
	for _, c := range members {
		c.Close()
	}
	type part struct {
		Partition       int     `json:"partition"`
		CommittedOffset float64 `json:"committed_offset"`
	}
	var g struct {
		Members    []any  `json:"members"`
		Partitions []part `json:"partitions"`
	}
	waitAPI(t, "audit without members", func() bool {
		e.getJSON("/api/stream-groups/%2F/events/audit", &g)
		return len(g.Members) == 0
	})
	before := fmt.Sprint(g.Partitions)
	e.waitJS("audit's controls enabled", `!document.querySelector('[data-reset="audit"]').disabled`)

	// Reset to offset 1: the input appears for an offset; Cancel first.
	e.choose(`[data-reset-to="audit"]`, "offset")
	if eval[bool](e, "offset input hidden", `document.querySelector('[data-reset-at="audit"]').hidden`) {
		t.Error("no offset input for a reset to an offset")
	}
	e.fill(`[data-reset-at="audit"]`, "1")
	e.click(`[data-reset="audit"]`)
	e.waitJS("reset confirmation", `document.querySelector('dialog.confirm[open]') !== null`)
	if got := e.text(`dialog.confirm p`); !strings.Contains(got, "group audit") || !strings.Contains(got, "offset 1") {
		t.Errorf("reset confirmation says %q", got)
	}
	if dir := os.Getenv("WARREN_UI_SCREENSHOTS"); dir != "" {
		ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
		b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stream-reset.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.click(`dialog.confirm button[value=cancel]`)
	e.waitJS("reset confirmation closed", `document.querySelector('dialog.confirm') === null`)
	if e.getJSON("/api/stream-groups/%2F/events/audit", &g); fmt.Sprint(g.Partitions) != before {
		t.Errorf("cancelled reset changed audit: %s, was %s", fmt.Sprint(g.Partitions), before)
	}
	e.click(`[data-reset="audit"]`)
	e.waitJS("reset confirmation", `document.querySelector('dialog.confirm[open]') !== null`)
	e.click(`dialog.confirm button[value=ok]`)
	var q struct {
		Partitions []struct {
			NextOffset float64 `json:"next_offset"`
		} `json:"partitions"`
	}
	e.getJSON("/api/queues/%2F/events", &q)
	waitAPI(t, "audit reset to offset 1", func() bool {
		e.getJSON("/api/stream-groups/%2F/events/audit", &g)
		for _, p := range g.Partitions {
			if p.CommittedOffset != min(1, q.Partitions[p.Partition].NextOffset) {
				return false
			}
		}
		return len(g.Partitions) == len(q.Partitions)
	})

	// Delete: Cancel keeps it, confirming deletes it and the page drops it.
	e.click(`[data-delete-group="audit"]`)
	e.waitJS("delete confirmation", `document.querySelector('dialog.confirm[open]') !== null`)
	e.click(`dialog.confirm button[value=cancel]`)
	e.waitJS("delete confirmation closed", `document.querySelector('dialog.confirm') === null`)
	if code, _ := e.api("guest", "guest", "GET", "/api/stream-groups/%2F/events/audit", nil); code != 200 {
		t.Fatalf("audit after a cancelled delete: %d", code)
	}
	e.click(`[data-delete-group="audit"]`)
	e.waitJS("delete confirmation", `document.querySelector('dialog.confirm[open]') !== null`)
	e.click(`dialog.confirm button[value=ok]`)
	waitAPI(t, "audit deleted", func() bool {
		code, _ := e.api("guest", "guest", "GET", "/api/stream-groups/%2F/events/audit", nil)
		return code == 404
	})
	e.waitJS("audit gone from the page", `document.querySelector('[data-group="audit"]') === null && document.querySelector('[data-group="billing"]') !== null`)
}
