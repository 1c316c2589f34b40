// Package httpguard is the security layer in front of Yella's HTTP surface
// (the JSON API, the dashboard and the metrics endpoint): a Host allowlist
// against DNS rebinding, bearer-token authentication compared in constant
// time (a header for programs, an HttpOnly cookie set by a login form for
// browsers; never a URL parameter), same-origin protection on every
// mutation, a request body limit and security headers.
package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// CookieName is the cookie that carries the token for browsers.
const CookieName = "yella_token"

// Options configures a Guard.
type Options struct {
	// Token, when set, is required on every request except the login page
	// and the health check: "Authorization: Bearer <token>" or the cookie
	// the login page sets.
	Token string
	// Hosts are the accepted Host header values (host names or addresses,
	// without ports). Empty means loopback only: localhost, 127.0.0.1 and
	// ::1. "*" accepts any host (only with a Token).
	Hosts []string
	// MaxBody bounds request bodies in bytes. Defaults to 2 MiB.
	MaxBody int64
	// Open lists paths served without a token (exact matches), such as a
	// health check for a load balancer.
	Open []string
}

// Guard wraps a handler with the checks in the package comment.
type Guard struct {
	opts   Options
	token  [32]byte // sha256 of the token: constant-time comparisons of equal-length values
	hosts  map[string]bool
	anyHst bool
	cop    *http.CrossOriginProtection
}

// New validates opts and returns a Guard. Accepting any host requires a
// token: without one, a DNS-rebinding page could drive the API.
func New(opts Options) (*Guard, error) {
	g := &Guard{opts: opts, hosts: map[string]bool{}, cop: http.NewCrossOriginProtection()}
	if g.opts.MaxBody <= 0 {
		g.opts.MaxBody = 2 << 20
	}
	hosts := opts.Hosts
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	for _, h := range hosts {
		h = strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]"))
		if h == "" {
			return nil, errors.New("httpguard: empty host in the allowlist")
		}
		if h == "*" {
			g.anyHst = true
			continue
		}
		g.hosts[h] = true
	}
	if g.anyHst && opts.Token == "" {
		return nil, errors.New("httpguard: accepting any Host header requires a token")
	}
	if opts.Token != "" {
		g.token = sha256.Sum256([]byte(opts.Token))
	}
	g.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny(w, r, http.StatusForbidden, "CROSS_ORIGIN", "cross-origin requests may not change anything")
	}))
	return g, nil
}

// Handler returns h behind the guard, with the login page at /login when
// a token is set.
func (g *Guard) Handler(h http.Handler) http.Handler {
	inner := g.cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "same-origin")
		hdr.Set("X-Frame-Options", "DENY")
		if !g.hostAllowed(r.Host) {
			deny(w, r, http.StatusMisdirectedRequest, "HOST_NOT_ALLOWED", fmt.Sprintf("host %q is not served here", r.Host))
			return
		}
		if r.URL.Query().Has("token") || r.URL.Query().Has("access_token") {
			deny(w, r, http.StatusBadRequest, "TOKEN_IN_URL", "tokens are never accepted in the URL (they leak into logs and history): use the Authorization header")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.opts.MaxBody)
		if g.opts.Token != "" {
			if r.URL.Path == "/login" {
				g.cop.Handler(http.HandlerFunc(g.login)).ServeHTTP(w, r)
				return
			}
			if !g.authorized(r) && !g.open(r.URL.Path) {
				if wantsHTML(r) {
					http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="yella"`)
				deny(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "a bearer token is required")
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
}

func (g *Guard) open(path string) bool {
	for _, p := range g.opts.Open {
		if p == path {
			return true
		}
	}
	return false
}

func (g *Guard) hostAllowed(hostport string) bool {
	if g.anyHst {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return g.hosts[strings.ToLower(strings.Trim(host, "[]"))]
}

// authorized compares the offered token with the configured one in
// constant time (hashing first makes the lengths equal).
func (g *Guard) authorized(r *http.Request) bool {
	offered := ""
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			offered = strings.TrimSpace(t)
		}
	} else if c, err := r.Cookie(CookieName); err == nil {
		offered = c.Value
	}
	if offered == "" {
		return false
	}
	sum := sha256.Sum256([]byte(offered))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Yella: sign in</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem">
<h1>Yella</h1>
{{if .Error}}<p role="alert"><strong>{{.Error}}</strong></p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="next" value="{{.Next}}">
<label for="token">Access token</label><br>
<input id="token" name="token" type="password" autocomplete="current-password" required style="width: 100%">
<p><button type="submit">Sign in</button></p>
</form></body></html>
`))

func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	next := r.FormValue("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	data := struct{ Next, Error string }{Next: next}
	if r.Method == http.MethodPost {
		offered := r.PostFormValue("token")
		sum := sha256.Sum256([]byte(offered))
		if subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1 {
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: offered, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		data.Error = "That token is not right."
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead {
		deny(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET or POST")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	loginPage.Execute(w, data)
}

func wantsHTML(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") && !strings.HasPrefix(r.URL.Path, "/api/")
}

// deny answers with the JSON error shape of the API, or plain text for
// browsers asking for HTML.
func deny(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	if wantsHTML(r) {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]map[string]string{"error": {"code": code, "message": msg}})
}

// IsLoopback reports whether addr (host:port, or a host) binds only the
// loopback interface. An empty host ("":3400) binds every interface.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
