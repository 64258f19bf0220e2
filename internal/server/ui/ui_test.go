package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/server/ui"
)

func get(t *testing.T, h http.Handler, target string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDashboardRoutes(t *testing.T) {
	mux := http.NewServeMux()
	ui.Mount(mux)

	r := get(t, mux, "/ui/")
	index := body(t, r)
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(index, `<div id="app">`) {
		t.Fatalf("GET /ui/: %d %q\n%s", r.StatusCode, r.Header.Get("Content-Type"), index)
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || r.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET /ui/: CSP %q, X-Frame-Options %q: the page must not be framed", csp, r.Header.Get("X-Frame-Options"))
	}
	// Client routing: any other path under /ui/ is the page too.
	if r := get(t, mux, "/ui/jobs/some/where"); r.StatusCode != 200 || body(t, r) != index {
		t.Fatalf("GET /ui/jobs/some/where: %d", r.StatusCode)
	}
	for _, p := range []string{"/ui", "/"} {
		if r := get(t, mux, p); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/ui/" {
			t.Fatalf("GET %s: %d to %q, want a redirect to /ui/", p, r.StatusCode, r.Header.Get("Location"))
		}
	}
	if r := get(t, mux, "/elsewhere"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /elsewhere: %d, want 404 (only / itself redirects)", r.StatusCode)
	}

	js := regexp.MustCompile(`src="(/ui/assets/[^"]+\.js)"`).FindStringSubmatch(index)
	css := regexp.MustCompile(`href="(/ui/assets/[^"]+\.css)"`).FindStringSubmatch(index)
	if js == nil || css == nil {
		t.Fatalf("index.html names no script or stylesheet:\n%s", index)
	}
	for _, c := range []struct{ path, ctype string }{{js[1], "text/javascript"}, {css[1], "text/css"}} {
		r := get(t, mux, c.path)
		b := body(t, r)
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), c.ctype) || len(b) == 0 {
			t.Fatalf("GET %s: %d %q (%d bytes), want %s", c.path, r.StatusCode, r.Header.Get("Content-Type"), len(b), c.ctype)
		}
	}
	if r := get(t, mux, "/ui/assets/missing.js"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("GET a missing asset: %d, want 404", r.StatusCode)
	}
}
