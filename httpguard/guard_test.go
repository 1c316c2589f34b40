package httpguard

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const tok = "s3cret-token-0123456789"

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Header().Set("X-Actor", Actor(r.Context()))
		w.Write([]byte("ok " + string(b)))
	})
}

// fakeNow is a clock the tests move by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestGuard(t *testing.T) {
	open, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{Token: tok, Hosts: []string{"yella.example.com", "127.0.0.1"}, MaxBody: 16})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(v string) map[string]string { return map[string]string{"Authorization": v} }
	cases := []struct {
		name    string
		g       *Guard
		method  string
		target  string
		host    string
		headers map[string]string
		body    string
		want    int
		actor   string
	}{
		{"loopback GET", open, "GET", "/api/runs", "127.0.0.1:3400", nil, "", 200, "anonymous"},
		{"localhost GET", open, "GET", "/", "localhost:3400", nil, "", 200, "anonymous"},
		{"ipv6 loopback", open, "GET", "/", "[::1]:3400", nil, "", 200, "anonymous"},
		{"rebinding host refused", open, "GET", "/api/runs", "evil.example:3400", nil, "", 421, ""},
		{"token in URL refused", open, "GET", "/api/runs?token=x", "127.0.0.1", nil, "", 400, ""},
		{"cross-origin POST refused", open, "POST", "/api/emit", "127.0.0.1:3400", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "{}", 403, ""},
		{"same-origin POST", open, "POST", "/api/emit", "127.0.0.1:3400", map[string]string{"Origin": "http://127.0.0.1:3400", "Sec-Fetch-Site": "same-origin"}, "{}", 200, "anonymous"},
		{"non-browser POST", open, "POST", "/api/emit", "127.0.0.1:3400", nil, "{}", 200, "anonymous"},
		{"missing token", g, "GET", "/api/runs", "yella.example.com", nil, "", 401, ""},
		{"wrong token", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer nope"), "", 401, ""},
		{"token prefix", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer " + tok[:len(tok)-1]), "", 401, ""},
		{"token with a suffix", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer " + tok + " x"), "", 401, ""},
		{"right token", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer " + tok), "", 200, "token"},
		{"scheme in lower case", g, "GET", "/api/runs", "yella.example.com", bearer("bearer " + tok), "", 200, "token"},
		{"scheme in upper case", g, "GET", "/api/runs", "yella.example.com", bearer("BEARER " + tok), "", 200, "token"},
		{"two spaces", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer  " + tok), "", 200, "token"},
		{"scheme alone", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer"), "", 401, ""},
		{"spaces for a token", g, "GET", "/api/runs", "yella.example.com", bearer("Bearer " + strings.Repeat(" ", 17)), "", 401, ""},
		{"another scheme", g, "GET", "/api/runs", "yella.example.com", bearer("Basic " + tok), "", 401, ""},
		{"raw token in the session cookie", g, "GET", "/api/runs", "yella.example.com", map[string]string{"Cookie": SessionCookie + "=" + tok}, "", 401, ""},
		{"old token cookie", g, "GET", "/api/runs", "yella.example.com", map[string]string{"Cookie": "yella_token=" + tok}, "", 401, ""},
		{"health is open", g, "GET", "/api/health", "yella.example.com", nil, "", 200, "anonymous"},
		{"health with the token", g, "GET", "/api/health", "yella.example.com", bearer("Bearer " + tok), "", 200, "token"},
		{"browser without token goes to sign-in", g, "GET", "/runs", "yella.example.com", map[string]string{"Accept": "text/html"}, "", 303, ""},
		{"sign-in page", g, "GET", "/login", "yella.example.com", nil, "", 200, ""},
		{"sign-out needs POST", g, "GET", "/logout", "yella.example.com", nil, "", 405, ""},
		{"body within limit", g, "POST", "/api/emit", "yella.example.com", bearer("Bearer " + tok), strings.Repeat("x", 16), 200, "token"},
		{"body over limit", g, "POST", "/api/emit", "yella.example.com", bearer("Bearer " + tok), strings.Repeat("x", 17), 413, ""},
		{"host not in list", g, "GET", "/api/runs", "localhost", bearer("Bearer " + tok), "", 421, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			r.Host = c.host
			r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", i+1) // wrong tokens are throttled per address
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c.g.Handler(echo()).ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body.String())
			}
			if got := w.Header().Get("X-Actor"); got != c.actor {
				t.Errorf("actor %q, want %q", got, c.actor)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("missing nosniff")
			}
			if c.want >= 400 && c.want != 413 && !strings.Contains(w.Body.String(), `"code"`) {
				t.Errorf("error body is not the JSON error shape: %s", w.Body.String())
			}
		})
	}
}

// TestTokenRules: a token of spaces (which only the sign-in form could
// ever match, since a header's spaces are trimmed), one with spaces or
// control characters, or a short one is refused.
func TestTokenRules(t *testing.T) {
	for _, bad := range []string{strings.Repeat(" ", 17), strings.Repeat("\t", 20), "a-long-token-with a-space", "token\x00with-a-nul-byte", "short"} {
		if _, err := New(Options{Token: bad}); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
	if _, err := New(Options{Token: tok}); err != nil {
		t.Error(err)
	}
}

// signIn posts the sign-in form from addr and returns the response.
func signIn(h http.Handler, token, next, addr string, tlsOn bool) *httptest.ResponseRecorder {
	form := url.Values{"token": {token}, "next": {next}}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	r.Host = "127.0.0.1:3400"
	r.RemoteAddr = addr + ":5555"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if tlsOn {
		r.TLS = &tls.ConnectionState{}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func get(h http.Handler, path string, cookie *http.Cookie) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.Host = "127.0.0.1:3400"
	r.Header.Set("Accept", "text/html")
	if cookie != nil {
		r.AddCookie(cookie)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func sessionOf(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie {
			return c
		}
	}
	t.Fatalf("no session cookie: %d %v", w.Code, w.Result().Cookies())
	return nil
}

// TestLogin: the sign-in form starts a session whose cookie holds a random
// id (never the token), marked Secure over TLS, and goes back to next only
// when next is a path on this site.
func TestLogin(t *testing.T) {
	g, _ := New(Options{Token: tok})
	h := g.Handler(echo())
	if w := signIn(h, "wrong", "/runs", "10.0.0.1", false); w.Code != 401 || len(w.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	w := signIn(h, tok, "/runs?status=idle", "10.0.0.1", false)
	c := sessionOf(t, w)
	if w.Code != 303 || w.Header().Get("Location") != "/runs?status=idle" {
		t.Fatalf("right token: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Value == tok || strings.Contains(c.Value, tok) || len(c.Value) < 32 {
		t.Fatalf("cookie %+v, want an HttpOnly SameSite=Strict cookie with a session id", c)
	}
	if w := get(h, "/runs", c); w.Code != 200 || !strings.HasPrefix(w.Header().Get("X-Actor"), "session:"+c.Value[:8]) {
		t.Fatalf("with the session: %d, actor %q", w.Code, w.Header().Get("X-Actor"))
	}
	if c2 := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", true)); !c2.Secure || c2.Value == c.Value {
		t.Fatalf("over TLS: %+v, want Secure and a new id", c2)
	}
}

// TestLoginNext: an off-site next is ignored.
func TestLoginNext(t *testing.T) {
	g, _ := New(Options{Token: tok})
	h := g.Handler(echo())
	for next, want := range map[string]string{
		"/runs":                  "/runs",
		"/runs/abc?x=1#t":        "/runs/abc?x=1#t",
		"/%5Cevil.example":       "/%5Cevil.example", // a path on this site
		"//evil.example/x":       "/",
		`/\evil.example`:         "/",
		`/\/evil.example`:        "/",
		"/\t/evil.example":       "/",
		"/\n/evil.example":       "/",
		"https://evil.example/x": "/",
		"javascript:alert(1)":    "/",
		"evil.example":           "/",
		"":                       "/",
		"/x\x00":                 "/",
	} {
		w := signIn(h, tok, next, "10.0.0.2", false)
		if w.Code != 303 || w.Header().Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, w.Code, w.Header().Get("Location"), want)
		}
	}
}

// TestSessionExpiry: a session ends after SessionIdle without a request,
// and SessionMaxAge after sign-in however active; past MaxSessions the
// least recently used ends.
func TestSessionExpiry(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	g, _ := New(Options{Token: tok, SessionIdle: time.Hour, SessionMaxAge: 3 * time.Hour, MaxSessions: 2, LoginPerClient: 100, Now: clk.now})
	h := g.Handler(echo())
	live := func(c *http.Cookie) bool { return get(h, "/runs", c).Code == 200 }

	idle := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	clk.add(59 * time.Minute)
	if !live(idle) {
		t.Fatal("a session ended before its idle time")
	}
	clk.add(time.Hour)
	if live(idle) {
		t.Fatal("a session outlived its idle time")
	}

	active := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	for range 5 {
		clk.add(30 * time.Minute)
		if !live(active) {
			t.Fatal("an active session ended early")
		}
	}
	clk.add(30 * time.Minute)
	if live(active) {
		t.Fatal("a session outlived its maximum age")
	}

	a := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	clk.add(time.Minute)
	b := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	clk.add(time.Minute)
	live(a) // b is now the least recently used
	c := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	if !live(a) || live(b) || !live(c) || g.sessions.len() != 2 {
		t.Fatalf("after a third sign-in with room for two: a %v, b %v, c %v, %d kept", live(a), live(b), live(c), g.sessions.len())
	}
}

// TestLogout: POST /logout from the same origin ends the session and
// clears the cookie; from another site it is refused.
func TestLogout(t *testing.T) {
	g, _ := New(Options{Token: tok})
	h := g.Handler(echo())
	c := sessionOf(t, signIn(h, tok, "/", "10.0.0.1", false))
	post := func(site string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/logout", nil)
		r.Host = "127.0.0.1:3400"
		r.Header.Set("Sec-Fetch-Site", site)
		r.AddCookie(c)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := post("cross-site"); w.Code != 403 || get(h, "/runs", c).Code != 200 {
		t.Fatalf("cross-site sign-out: %d", w.Code)
	}
	w := post("same-origin")
	if w.Code != 303 || w.Header().Get("Location") != "/login" || sessionOf(t, w).MaxAge >= 0 {
		t.Fatalf("sign-out: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if w := get(h, "/runs", c); w.Code != 303 {
		t.Fatalf("the session still works after sign-out: %d", w.Code)
	}
}

// TestLoginThrottle: sign-in attempts are limited per client address and
// globally, with 429 and Retry-After; a throttled attempt is refused even
// with the right token; waiting lets the client try again. Wrong bearer
// tokens are limited per address too.
func TestLoginThrottle(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	g, _ := New(Options{Token: tok, LoginPerClient: 2, LoginGlobal: 4, Now: clk.now})
	h := g.Handler(echo())
	for i := range 2 {
		if w := signIn(h, "wrong", "/", "10.0.0.1", false); w.Code != 401 {
			t.Fatalf("attempt %d: %d", i+1, w.Code)
		}
	}
	w := signIn(h, tok, "/", "10.0.0.1", false)
	if w.Code != 429 || w.Header().Get("Retry-After") != "30" || !strings.Contains(w.Body.String(), "Too many sign-in attempts") {
		t.Fatalf("third attempt: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	if w := signIn(h, tok, "/", "10.0.0.2", false); w.Code != 303 {
		t.Fatalf("another address: %d", w.Code)
	}
	clk.add(30 * time.Second)
	if w := signIn(h, tok, "/", "10.0.0.1", false); w.Code != 303 {
		t.Fatalf("after waiting: %d", w.Code)
	}
	// Globally: 4 attempts a minute from everyone (the bucket is full
	// again: refused and successful attempts do not count).
	for _, addr := range []string{"10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"} {
		if w := signIn(h, "wrong", "/", addr, false); w.Code != 401 {
			t.Fatalf("%s: %d", addr, w.Code)
		}
	}
	if w := signIn(h, "wrong", "/", "10.0.0.7", false); w.Code != 429 {
		t.Fatalf("past the global limit: %d", w.Code)
	}
	// Bearer tokens: wrong ones count per address.
	bearer := func(v string) int {
		r := httptest.NewRequest("GET", "/api/runs", nil)
		r.Host, r.RemoteAddr = "127.0.0.1", "10.0.0.9:1"
		r.Header.Set("Authorization", v)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	got := []int{bearer("Bearer " + tok), bearer("Bearer x"), bearer("Bearer y"), bearer("Bearer z"), bearer("Bearer " + tok)}
	if want := []int{200, 401, 401, 429, 429}; !slicesEqual(got, want) {
		t.Fatalf("bearer attempts: %v, want %v", got, want)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLimiterBounded(t *testing.T) {
	l := newLimiter(1, 3)
	now := time.Now()
	for i := range 10 {
		l.take(string(rune('a'+i)), now)
	}
	if len(l.buckets) > 4 { // three keys and the overflow bucket
		t.Fatalf("%d buckets", len(l.buckets))
	}
	if _, ok := l.take("zz", now); ok {
		t.Fatal("a key past the table escaped the limit")
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Options{Hosts: []string{"*"}}); err == nil {
		t.Error("any host without a token accepted")
	}
	if _, err := New(Options{Hosts: []string{" "}}); err == nil {
		t.Error("an empty host accepted")
	}
	if _, err := New(Options{Hosts: []string{"*"}, Token: tok}); err != nil {
		t.Error(err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:3400": true, "localhost:1": true, "[::1]:3400": true, "0.0.0.0:3400": false,
		":3400": false, "192.168.1.5:80": false, "example.com:80": false, "127.9.9.9:1": true} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}

// TestPrefix: a guard mounted under a prefix that the server strips sends
// the browser only to addresses under the prefix (the sign-in redirect, its
// form, the page after signing in and after signing out) and scopes the
// session cookie to it.
func TestPrefix(t *testing.T) {
	g, err := New(Options{Token: tok, Prefix: "/yella/"})
	if err != nil {
		t.Fatal(err)
	}
	site := http.NewServeMux()
	site.Handle("/yella/", http.StripPrefix("/yella", g.Handler(echo())))
	do := func(method, target string, form url.Values, cookie *http.Cookie) *http.Response {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		r := httptest.NewRequest(method, target, body)
		r.Host = "127.0.0.1"
		r.Header.Set("Accept", "text/html")
		if form != nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != nil {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		site.ServeHTTP(w, r)
		return w.Result()
	}
	if loc := do("GET", "/yella/runs?status=idle", nil, nil).Header.Get("Location"); loc != "/yella/login?next=%2Fruns%3Fstatus%3Didle" {
		t.Errorf("signed out: redirected to %q, want the sign-in page under the prefix", loc)
	}
	page := do("GET", "/yella/login?next=/runs", nil, nil)
	if b, _ := io.ReadAll(page.Body); page.StatusCode != 200 || !strings.Contains(string(b), `action="/yella/login"`) {
		t.Errorf("sign-in page: %d, want its form to post to /yella/login:\n%s", page.StatusCode, b)
	}
	in := do("POST", "/yella/login", url.Values{"token": {tok}, "next": {"/runs"}}, nil)
	if loc := in.Header.Get("Location"); in.StatusCode != http.StatusSeeOther || loc != "/yella/runs" {
		t.Errorf("signed in: %d to %q, want 303 to /yella/runs", in.StatusCode, loc)
	}
	var session *http.Cookie
	for _, c := range in.Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	if session == nil || session.Path != "/yella/" {
		t.Fatalf("session cookie %+v, want one with path /yella/", session)
	}
	if res := do("GET", "/yella/runs", nil, session); res.StatusCode != 200 || res.Header.Get("X-Actor") == "" {
		t.Errorf("with the session: %d, actor %q", res.StatusCode, res.Header.Get("X-Actor"))
	}
	out := do("POST", "/yella/logout", url.Values{}, session)
	if loc := out.Header.Get("Location"); out.StatusCode != http.StatusSeeOther || loc != "/yella/login" {
		t.Errorf("signed out: %d to %q, want 303 to /yella/login", out.StatusCode, loc)
	}
	for _, bad := range []string{"yella", "//evil.example", "/a b", "/a?b"} {
		if _, err := New(Options{Prefix: bad}); err == nil {
			t.Errorf("Prefix %q accepted", bad)
		}
	}
}

// An Open entry ending in "/" serves itself and every path below it
// without a token, but not a path that only looks below it before
// cleaning; an entry without the slash matches exactly.
func TestOpenPrefix(t *testing.T) {
	g, err := New(Options{Token: tok, Open: []string{"/hooks/", "/ping"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target string
		want   int
	}{
		{"/hooks/stripe", 200},
		{"/hooks/a/b", 200},
		{"/ping", 200},
		{"/ping/x", 401},
		{"/hooks", 401},
		{"/hooks/", 200}, // the entry itself
		{"/hooks/../api/runs", 401},
		{"/hooks/%2e%2e/api/runs", 401},
		{"/hooksx/stripe", 401},
		{"/api/runs", 401},
	} {
		r := httptest.NewRequest("POST", "http://127.0.0.1"+c.target, strings.NewReader("{}"))
		w := httptest.NewRecorder()
		g.Handler(echo()).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.target, w.Code, c.want)
		}
	}
}
