package control

import (
	"embed"
	"io/fs"
	"net/http"
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
		switch r.URL.Path {
		case "/", "/app.js", "/style.css", "/markdown.js":
		default:
			writeError(w, http.StatusNotFound, "not found: %s", r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy",
			"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		files.ServeHTTP(w, r)
	})
}
