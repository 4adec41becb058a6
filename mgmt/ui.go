package mgmt

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The management web UI: static files embedded in the binary and served
// at / (index.html) and /ui/... (CSS, JavaScript modules). The UI is a
// client of the /api/ endpoints like any other: it logs in with a form,
// keeps the user's credentials in sessionStorage and sends them as an
// explicit Authorization header on every fetch (docs/ui.md). Nothing here
// authenticates: the files are public, the data is behind /api/.

//go:embed ui
var uiFiles embed.FS

// uiRoot is the embedded ui/ directory.
var uiRoot, _ = fs.Sub(uiFiles, "ui")

// uiCSP keeps the page to its own origin: no inline script, no framing (a
// page that cannot be framed cannot be clicked through by another site),
// no form posted elsewhere.
const uiCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

// isUIPath tells whether the escaped request path is one of the UI's.
func isUIPath(p string) bool {
	return p == "" || p == "/" || p == "/index.html" || strings.HasPrefix(p, "/ui/")
}

// serveUI answers GET and HEAD for the UI's files; anything else is 405.
func serveUI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed")
		return
	}
	var name string
	switch p := path.Clean("/" + r.URL.Path); {
	case p == "/" || p == "/index.html":
		name = "index.html"
	case strings.HasPrefix(p, "/ui/"):
		name = p[len("/ui/"):]
	}
	b, err := fs.ReadFile(uiRoot, name)
	if name == "" || err != nil {
		writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
		return
	}
	h := w.Header()
	h.Set("Content-Type", uiContentType(name))
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// The files change with the binary: revalidate rather than keep a
	// stale copy after an upgrade.
	h.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}

func uiContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	}
	return "application/octet-stream"
}
