// Package ui serves the web dashboard (built from dashboard/ at the
// repository root into dist/, which is committed) under /ui/.
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Rebuild with `cd dashboard && npm ci && npm run build`; dashboard/ci.sh
// checks that the committed files match the sources.
//
//go:embed dist
var dist embed.FS

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// types are the dashboard's content types, fixed here rather than read from
// the system's mime tables (some map .js to application/x-javascript).
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
}

// Handler serves the dashboard's files under /ui/, and index.html for /ui/
// and for any path under it that names no file (the dashboard routes in the
// browser). Hashed assets are cached for good; index.html is revalidated.
func Handler() http.Handler {
	root, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded: cannot happen
	}
	index, err := fs.ReadFile(root, "index.html")
	if err != nil {
		panic("ui: dist/index.html is missing: build the dashboard (cd dashboard && npm run build)")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard answers GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		// The page runs only its own files and calls only its own origin;
		// no other site may frame it (its buttons pause queues and purge jobs).
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		if name != "" && name != "index.html" {
			if data, err := fs.ReadFile(root, name); err == nil {
				ctype := types[path.Ext(name)]
				if ctype == "" {
					ctype = mime.TypeByExtension(path.Ext(name))
				}
				if ctype == "" {
					ctype = http.DetectContentType(data)
				}
				w.Header().Set("Content-Type", ctype)
				if strings.HasPrefix(name, "assets/") {
					w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				if r.Method == http.MethodGet {
					_, _ = w.Write(data)
				}
				return
			}
			if strings.HasPrefix(name, "assets/") {
				http.NotFound(w, r) // a missing asset is an error, not a page
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		if r.Method == http.MethodGet {
			_, _ = w.Write(index)
		}
	})
}

// Mount adds the dashboard to mux: /ui/ and below, /ui and / redirecting
// to /ui/. Only the exact path / redirects: other unknown paths stay 404.
func Mount(mux *http.ServeMux) {
	mux.Handle(Prefix, Handler())
	redirect := http.RedirectHandler(Prefix, http.StatusFound)
	mux.Handle("GET /ui", redirect)
	mux.Handle("GET /{$}", redirect)
}
