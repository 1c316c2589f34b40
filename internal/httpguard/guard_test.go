package httpguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Write([]byte("ok " + string(b)))
	})
}

func TestGuard(t *testing.T) {
	open, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(Options{Token: "s3cret", Hosts: []string{"yella.example.com", "127.0.0.1"}, MaxBody: 16, Open: []string{"/api/health"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		g       *Guard
		method  string
		target  string
		host    string
		headers map[string]string
		body    string
		want    int
	}{
		{"loopback GET", open, "GET", "/api/runs", "127.0.0.1:3400", nil, "", 200},
		{"localhost GET", open, "GET", "/", "localhost:3400", nil, "", 200},
		{"ipv6 loopback", open, "GET", "/", "[::1]:3400", nil, "", 200},
		{"rebinding host refused", open, "GET", "/api/runs", "evil.example:3400", nil, "", 421},
		{"token in URL refused", open, "GET", "/api/runs?token=x", "127.0.0.1", nil, "", 400},
		{"cross-origin POST refused", open, "POST", "/api/emit", "127.0.0.1:3400", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "{}", 403},
		{"same-origin POST", open, "POST", "/api/emit", "127.0.0.1:3400", map[string]string{"Origin": "http://127.0.0.1:3400", "Sec-Fetch-Site": "same-origin"}, "{}", 200},
		{"non-browser POST", open, "POST", "/api/emit", "127.0.0.1:3400", nil, "{}", 200},
		{"missing token", tok, "GET", "/api/runs", "yella.example.com", nil, "", 401},
		{"wrong token", tok, "GET", "/api/runs", "yella.example.com", map[string]string{"Authorization": "Bearer nope"}, "", 401},
		{"token prefix", tok, "GET", "/api/runs", "yella.example.com", map[string]string{"Authorization": "Bearer s3cre"}, "", 401},
		{"right token", tok, "GET", "/api/runs", "yella.example.com", map[string]string{"Authorization": "Bearer s3cret"}, "", 200},
		{"cookie token", tok, "GET", "/api/runs", "yella.example.com", map[string]string{"Cookie": CookieName + "=s3cret"}, "", 200},
		{"open path without token", tok, "GET", "/api/health", "yella.example.com", nil, "", 200},
		{"browser without token goes to login", tok, "GET", "/runs", "yella.example.com", map[string]string{"Accept": "text/html"}, "", 303},
		{"login page", tok, "GET", "/login", "yella.example.com", nil, "", 200},
		{"body within limit", tok, "POST", "/api/emit", "yella.example.com", map[string]string{"Authorization": "Bearer s3cret"}, strings.Repeat("x", 16), 200},
		{"body over limit", tok, "POST", "/api/emit", "yella.example.com", map[string]string{"Authorization": "Bearer s3cret"}, strings.Repeat("x", 17), 413},
		{"host not in list", tok, "GET", "/api/runs", "localhost", map[string]string{"Authorization": "Bearer s3cret"}, "", 421},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			r.Host = c.host
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c.g.Handler(echo()).ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body.String())
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

func TestLogin(t *testing.T) {
	g, _ := New(Options{Token: "s3cret"})
	h := g.Handler(echo())
	post := func(token, next string) *httptest.ResponseRecorder {
		form := url.Values{"token": {token}, "next": {next}}
		r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
		r.Host = "127.0.0.1:3400"
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := post("wrong", "/runs"); w.Code != 401 || len(w.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	w := post("s3cret", "//evil.example/x")
	if w.Code != 303 || w.Header().Get("Location") != "/" {
		t.Fatalf("right token: %d to %q, want 303 to / (an off-site next is ignored)", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v, want one HttpOnly SameSite=Strict cookie", c)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(Options{Hosts: []string{"*"}}); err == nil {
		t.Error("any host without a token accepted")
	}
	if _, err := New(Options{Hosts: []string{" "}}); err == nil {
		t.Error("an empty host accepted")
	}
	if _, err := New(Options{Hosts: []string{"*"}, Token: "t"}); err != nil {
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
