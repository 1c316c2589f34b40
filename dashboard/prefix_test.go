package dashboard_test

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/yella-go/yella/dashboard"
)

// addrRe finds the addresses a page sends the browser to: links, assets,
// form actions, and the event stream and base the script uses.
var addrRe = regexp.MustCompile(`\s(href|src|action|data-events|data-base)="([^"]*)"`)

// mounted is the fixture's dashboard served by a site under /yella/, as a
// program embedding it would: the prefix stripped before the dashboard.
func mounted(t *testing.T, f *fixture) http.Handler {
	t.Helper()
	dash, err := dashboard.NewAt(f.eng, dashboard.Options{Prefix: "/yella/"}, f.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	site := http.NewServeMux()
	site.Handle("/yella/", http.StripPrefix("/yella", dash))
	site.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the site's own page, not the dashboard's: "+r.URL.Path, http.StatusTeapot)
	})
	return site
}

// TestPrefix renders every page the dashboard links to, starting from the
// overview, mounted under /yella/: every address on every page starts with
// the prefix (or is a fragment of the page itself), and each one it links
// to answers 200 through the site, so the mounted dashboard works end to
// end, its assets included.
func TestPrefix(t *testing.T) {
	f := newFixture(t)
	site := mounted(t, f)
	get := func(target string) (int, string) {
		w := httptest.NewRecorder()
		site.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	start := []string{"/yella/", "/yella/runs/" + fenceID, "/yella/runs/" + f.deferred, "/yella/runs/" + f.dead,
		"/yella/no-such-page"} // the 404 page links back too
	seen := map[string]bool{}
	queue := append([]string(nil), start...)
	for _, s := range start {
		seen[s] = true
	}
	pages := 0
	for len(queue) > 0 && pages < 400 {
		target := queue[0]
		queue = queue[1:]
		code, body := get(target)
		pages++
		if target != "/yella/no-such-page" && code != 200 {
			t.Errorf("GET %s: %d", target, code)
			continue
		}
		if !strings.Contains(body, "<html") {
			continue // an asset
		}
		for _, m := range addrRe.FindAllStringSubmatch(body, -1) {
			attr, addr := m[1], html.UnescapeString(m[2])
			switch {
			case strings.HasPrefix(addr, "#"):
				continue // a place on the page itself
			case attr == "data-base":
				if addr != "/yella" {
					t.Errorf("%s: data-base=%q, want /yella", target, addr)
				}
				continue
			case !strings.HasPrefix(addr, "/yella/"):
				t.Errorf("%s: %s=%q does not start with /yella/", target, attr, addr)
				continue
			case attr == "data-events" || attr == "action":
				continue // served by the API; a form is posted, not fetched
			}
			u, err := url.Parse(addr)
			if err != nil {
				t.Errorf("%s: %s=%q: %v", target, attr, addr, err)
				continue
			}
			if !seen[u.String()] {
				seen[u.String()] = true
				queue = append(queue, u.String())
			}
		}
	}
	if pages < 20 {
		t.Errorf("crawled %d pages and assets, want the whole dashboard (at least 20)", pages)
	}
	for _, want := range []string{"/yella/runs", "/yella/processes", "/yella/trace", "/yella/dead", "/yella/emit", "/yella/trace/" + f.ok} {
		if !seen[want] {
			t.Errorf("no page links to %s", want)
		}
	}
	if _, body := get("/yella/"); !strings.Contains(body, `data-events="/yella/api/events"`) {
		t.Error("the overview does not open the event stream under the prefix")
	}
}

// TestPrefixActions: an action posted under the prefix redirects back under
// it, with its flash message in a cookie scoped to the prefix that the
// next page shows.
func TestPrefixActions(t *testing.T) {
	f := newFixture(t)
	site := mounted(t, f)
	req := httptest.NewRequest("POST", "/yella/runs/"+f.failed+"/retry", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	w := httptest.NewRecorder()
	site.ServeHTTP(w, req)
	res := w.Result()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/yella/runs/"+f.failed {
		t.Fatalf("retry: %d to %q, want 303 to /yella/runs/%s", res.StatusCode, loc, f.failed)
	}
	var flash *http.Cookie
	for _, c := range res.Cookies() {
		if c.Path != "/yella/" {
			t.Errorf("cookie %s has path %q, want /yella/", c.Name, c.Path)
		}
		flash = c
	}
	if flash == nil {
		t.Fatal("no flash cookie")
	}
	page := httptest.NewRequest("GET", "/yella/runs/"+f.failed, nil)
	page.AddCookie(flash)
	w = httptest.NewRecorder()
	site.ServeHTTP(w, page)
	contains(t, "page after the action", w.Body.String(), `id="flash"`, "Retried run")

	// The form of the dead letters page names where to come back to; the
	// redirect puts it under the prefix too.
	form := url.Values{"next": {"/dead"}}
	req = httptest.NewRequest("POST", "/yella/runs/"+f.dead+"/requeue", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	w = httptest.NewRecorder()
	site.ServeHTTP(w, req)
	if loc := w.Result().Header.Get("Location"); loc != "/yella/dead" {
		t.Errorf("requeue with next=/dead: redirected to %q, want /yella/dead", loc)
	}
}

func TestPrefixRefused(t *testing.T) {
	f := newFixture(t)
	for _, bad := range []string{"yella", "//evil.example", "/a b", `/a"b`, "/a?b"} {
		if _, err := dashboard.New(f.eng, dashboard.Options{Prefix: bad}); err == nil {
			t.Errorf("Prefix %q accepted", bad)
		}
	}
}
