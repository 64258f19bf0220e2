package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sepp-dev/sepp/internal/testserver"
)

// TestDashboardServed: the server's own port serves the dashboard: /ui/ is
// its HTML, a hashed script under /ui/assets/ is JavaScript, / and /ui
// redirect to /ui/, and the API next to it still answers.
func TestDashboardServed(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := noRedirect.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	resp, index := get("/ui/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(index, "<title>Sepp dashboard</title>") {
		t.Fatalf("GET /ui/: %d %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), index)
	}
	if resp, page := get("/ui/dead?queue=q"); resp.StatusCode != 200 || page != index {
		t.Errorf("GET /ui/dead: %d, want index.html", resp.StatusCode)
	}
	m := regexp.MustCompile(`src="(/ui/assets/index-[^"]+\.js)"`).FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("no script in index.html:\n%s", index)
	}
	resp, js := get(m[1])
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || len(js) < 1000 {
		t.Fatalf("GET %s: %d %q, %d bytes", m[1], resp.StatusCode, resp.Header.Get("Content-Type"), len(js))
	}
	for _, p := range []string{"/", "/ui"} {
		if resp, _ := get(p); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("GET %s: %d to %q, want 302 to /ui/", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := get("/metrics"); resp.StatusCode != 200 {
		t.Errorf("GET /metrics next to the dashboard: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/sepp.v1.AdminService/ListQueues", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("ListQueues over Connect JSON next to the dashboard: %d", r.StatusCode)
	}
}
