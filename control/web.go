package control

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The page is plain HTML, CSS and JavaScript: no build step, embedded in
// the binary.
//
//go:embed web
var webFS embed.FS

// webHandler serves the page at / and its assets; anything else is a
// JSON 404 like the rest of the API.
func (s *Server) webHandler() http.Handler {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/", p == "/app.js", p == "/style.css", p == "/markdown.js", p == "/simulation.js", p == "/sw.js":
		case strings.HasPrefix(p, "/vendor/") && vendored(p):
		default:
			writeError(w, http.StatusNotFound, "not found: %s", r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		if r.URL.Path == "/sw.js" {
			// A service worker is for the page's own address only.
			w.Header().Set("Service-Worker-Allowed", "/")
		}
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; font-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; worker-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		files.ServeHTTP(w, r)
	})
}

// vendored says whether path names a vendored library file (the Markdown
// renderer, KaTeX and its fonts): scripts, styles and fonts only.
func vendored(path string) bool {
	name := strings.TrimPrefix(path, "/")
	if !strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, ".css") && !strings.HasSuffix(name, ".woff2") {
		return false
	}
	_, err := fs.Stat(webFS, "web/"+name)
	return err == nil
}

// Asset returns an embedded file of the page (e.g. "vendor/katex.min.js"),
// for documents exported with the panel's renderer.
func Asset(name string) ([]byte, error) { return webFS.ReadFile("web/" + name) }
