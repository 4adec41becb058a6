package uitest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// TestDefinitionsExportImport downloads the definitions from the Admin
// page, deletes a queue, and uploads the file again: the queue is back.
func TestDefinitionsExportImport(t *testing.T) {
	e := start(t, envOpts{})
	if code, b := e.api("guest", "guest", http.MethodPut, "/api/queues/%2F/exported-q", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 10}}); code != http.StatusCreated {
		t.Fatalf("declare: %d %s", code, b)
	}
	dir := t.TempDir()
	if _, err := chromedp.CallBrowser(e.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir,
	}); err != nil {
		t.Fatalf("download behaviour: %v", err)
	}
	e.login("guest", "guest")
	e.open("#/admin/definitions", "admin")
	e.fill(`#export-definitions input[name=filename]`, "defs.json")
	e.click(`#export-definitions button[type=submit]`)
	file := filepath.Join(dir, "defs.json")
	var defs []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && len(b) > 0 && strings.HasSuffix(strings.TrimSpace(string(b)), "}") {
			defs = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no download in %s: %v", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(defs), `"exported-q"`) || !strings.Contains(string(defs), `"x-max-length": 10`) {
		t.Fatalf("downloaded definitions lack the queue: %.300s", defs)
	}

	if code, _ := e.api("guest", "guest", http.MethodDelete, "/api/queues/%2F/exported-q", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	e.do("choose the file", chromedp.SetUploadFiles(chromedp.CSS(`#import-definitions input[type=file]`), []string{file}))
	e.click(`#import-definitions button[type=submit]`)
	waitAPI(t, "queue imported", func() bool {
		code, _ := e.api("guest", "guest", http.MethodGet, "/api/queues/%2F/exported-q", nil)
		return code == http.StatusOK
	})
	e.waitJS("imported note", `[...document.querySelectorAll('#notify .note')].some(n => n.textContent === 'Definitions imported.')`)

	// A file that is not JSON is refused next to the field.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	e.do("choose a bad file", chromedp.SetUploadFiles(chromedp.CSS(`#import-definitions input[type=file]`), []string{bad}))
	e.click(`#import-definitions button[type=submit]`)
	e.waitJS("file error", `/Not JSON/.test(document.querySelector('#import-definitions [data-field=file] .field-error').textContent)`)
}
