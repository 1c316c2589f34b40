// Package httpguard is the security layer in front of Yella's HTTP surface
// (the JSON API of package httpapi, the dashboard and the metrics
// endpoint): a Host allowlist against DNS rebinding, authentication (a
// bearer token compared in constant time for programs; for browsers a
// sign-in form that starts a server-side session whose random id travels
// in an HttpOnly cookie, never the token itself; never a URL parameter),
// throttled sign-in, same-origin protection on every mutation, a request
// body limit and security headers.
//
// The yella command puts it in front of everything it serves. A program
// that embeds the API and the dashboard in its own server puts it in front
// of them the same way, under a path of its choice (Options.Prefix); the
// package depends on the standard library only.
//
// Handlers behind the guard learn who made a request with Actor, to log
// what each operator changed.
package httpguard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode"
)

// HealthPath is always served without a token: a load balancer's check.
// What it answers must stay free of secrets.
const HealthPath = "/api/health"

// MinTokenLen is the shortest access token accepted.
const MinTokenLen = 16

// Defaults of Options.
const (
	DefaultMaxBody        = 2 << 20
	DefaultSessionIdle    = 12 * time.Hour
	DefaultSessionMaxAge  = 7 * 24 * time.Hour
	DefaultMaxSessions    = 1000
	DefaultLoginPerClient = 5
	DefaultLoginGlobal    = 60
)

// Options configures a Guard. Zero values mean the defaults.
type Options struct {
	// Token, when set, is required on every request except the sign-in
	// page and the open paths: "Authorization: Bearer <token>" (the scheme
	// in any case) or the session cookie the sign-in page sets. It must be
	// at least MinTokenLen characters, without spaces or control
	// characters.
	Token string
	// Hosts are the accepted Host header values (host names or addresses,
	// without ports). Empty means loopback only: localhost, 127.0.0.1 and
	// ::1. "*" accepts any host (only with a Token).
	Hosts []string
	// MaxBody bounds request bodies in bytes. Defaults to DefaultMaxBody
	// (2 MiB).
	MaxBody int64
	// Open lists more paths served without a token besides HealthPath:
	// exact matches, or, for an entry ending in "/" (such as "/hooks/"),
	// every path below it whose cleaned form is still below it (so
	// "/hooks/../api/runs" is not). Handlers there authenticate requests
	// their own way, such as webhooks by their signature.
	Open []string
	// Prefix is the path the guarded handler is mounted under when the
	// server strips it first (http.StripPrefix("/yella", guard.Handler(h))):
	// the guard matches its paths (/login, /logout, HealthPath, Open)
	// without it, and puts it in front of every address it sends a browser
	// to (the sign-in form, its redirects) and on the session cookie's
	// path, so the session is not sent to the rest of the site. It must be
	// "" (mounted at the root, the default) or a path such as "/yella"; a
	// trailing slash is dropped.
	Prefix string
	// SessionIdle signs a browser out after this long without a request.
	// Defaults to DefaultSessionIdle (12h).
	SessionIdle time.Duration
	// SessionMaxAge signs a browser out this long after it signed in,
	// however active. Defaults to DefaultSessionMaxAge (7 days).
	SessionMaxAge time.Duration
	// MaxSessions bounds the sessions kept; past it, signing in ends the
	// least recently used one. Defaults to DefaultMaxSessions (1000).
	MaxSessions int
	// LoginPerClient is how many sign-in attempts one client address may
	// make per minute (a burst of that many, then one every 60s/n), and how
	// many wrong bearer tokens it may send. Past it the answer is 429 with
	// Retry-After. Defaults to DefaultLoginPerClient (5).
	LoginPerClient int
	// LoginGlobal is how many sign-in attempts all clients together may
	// make per minute. Defaults to DefaultLoginGlobal (60).
	LoginGlobal int
	// Logger receives sign-ins, sign-outs and refused attempts. Defaults
	// to discarding them.
	Logger *slog.Logger
	// Now is the clock of sessions and throttling. Defaults to time.Now.
	Now func() time.Time
}

// Guard wraps a handler with the checks in the package comment.
type Guard struct {
	opts     Options
	token    [32]byte // sha256 of the token: constant-time comparisons of equal-length values
	hosts    map[string]bool
	anyHst   bool
	cop      *http.CrossOriginProtection
	sessions *sessions
	clients  *limiter // per client address
	global   *limiter // every sign-in attempt
}

// New validates opts and returns a Guard. Accepting any host requires a
// token: without one, a DNS-rebinding page could drive the API.
func New(opts Options) (*Guard, error) {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.SessionMaxAge <= 0 {
		opts.SessionMaxAge = DefaultSessionMaxAge
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.LoginPerClient <= 0 {
		opts.LoginPerClient = DefaultLoginPerClient
	}
	if opts.LoginGlobal <= 0 {
		opts.LoginGlobal = DefaultLoginGlobal
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Prefix = strings.TrimSuffix(opts.Prefix, "/")
	if opts.Prefix != "" && (safeNext(opts.Prefix) != opts.Prefix || strings.ContainsAny(opts.Prefix, "?#%\"'<> ")) {
		return nil, fmt.Errorf("httpguard: Prefix must be a path such as /yella, got %q", opts.Prefix)
	}
	g := &Guard{opts: opts, hosts: map[string]bool{}, cop: http.NewCrossOriginProtection(),
		sessions: newSessions(opts.MaxSessions, opts.SessionIdle, opts.SessionMaxAge),
		clients:  newLimiter(opts.LoginPerClient, maxClients), global: newLimiter(opts.LoginGlobal, 1)}
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
		if err := CheckToken(opts.Token); err != nil {
			return nil, err
		}
		g.token = sha256.Sum256([]byte(opts.Token))
	}
	g.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny(w, r, http.StatusForbidden, "CROSS_ORIGIN", "cross-origin requests may not change anything")
	}))
	return g, nil
}

// CheckToken refuses tokens that are short, or contain spaces or control
// characters (a token of spaces passed a length check, and a header's
// spaces are trimmed, so only the sign-in form could ever match it).
// New applies it; callers that read a token from a file or the
// environment may apply it first to name the source in their message.
func CheckToken(t string) error {
	if strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errors.New("the access token must not contain spaces or control characters")
	}
	if n := len([]rune(t)); n < MinTokenLen {
		return fmt.Errorf("the access token must be at least %d characters, got %d", MinTokenLen, n)
	}
	return nil
}

// Handler returns h behind the guard, with the sign-in page at /login and
// sign-out at POST /logout when a token is set (under Options.Prefix as the
// browser sees them).
func (g *Guard) Handler(h http.Handler) http.Handler {
	inner := g.cop.Handler(h)
	login := g.cop.Handler(http.HandlerFunc(g.login))
	logout := g.cop.Handler(http.HandlerFunc(g.logout))
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
		if g.opts.Token == "" {
			inner.ServeHTTP(w, r.WithContext(withActor(r.Context(), "anonymous")))
			return
		}
		switch r.URL.Path {
		case "/login":
			login.ServeHTTP(w, r)
			return
		case "/logout":
			logout.ServeHTTP(w, r)
			return
		}
		actor, status := g.authenticate(w, r)
		switch {
		case status == http.StatusTooManyRequests:
			deny(w, r, status, "TOO_MANY_ATTEMPTS", "too many wrong tokens from your address; wait before trying again")
			return
		case actor == "" && g.open(r.URL.Path):
			actor = "anonymous"
		case actor == "":
			if wantsHTML(r) {
				http.Redirect(w, r, g.opts.Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="yella"`)
			deny(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "a bearer token is required")
			return
		}
		inner.ServeHTTP(w, r.WithContext(withActor(r.Context(), actor)))
	})
}

func (g *Guard) open(p string) bool {
	if p == HealthPath {
		return true
	}
	for _, o := range g.opts.Open {
		if o == p || strings.HasSuffix(o, "/") && strings.HasPrefix(p, o) && strings.HasPrefix(path.Clean(p), o) {
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

// authenticate names who sent r: "token" for the bearer token, the
// session for a valid session cookie, "" for nobody. A client that sent
// too many wrong tokens gets 429 (with Retry-After set on w) until it
// waits.
func (g *Guard) authenticate(w http.ResponseWriter, r *http.Request) (string, int) {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, rest, _ := strings.Cut(a, " ")
		if !strings.EqualFold(scheme, "Bearer") { // RFC 7235: the scheme is case-insensitive
			return "", http.StatusUnauthorized
		}
		now, addr := g.opts.Now(), clientAddr(r)
		if wait, ok := g.clients.take(addr, now); !ok {
			w.Header().Set("Retry-After", seconds(wait))
			g.opts.Logger.Warn("bearer token refused: too many wrong tokens", "remote", r.RemoteAddr)
			return "", http.StatusTooManyRequests
		}
		if g.tokenMatches(strings.TrimSpace(rest)) {
			g.clients.give(addr)
			return "token", http.StatusOK
		}
		return "", http.StatusUnauthorized
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if s := g.sessions.touch(c.Value, g.opts.Now()); s != "" {
			return s, http.StatusOK
		}
	}
	return "", http.StatusUnauthorized
}

// tokenMatches compares in constant time (hashing first makes the lengths
// equal). An empty offer never matches.
func (g *Guard) tokenMatches(offered string) bool {
	if offered == "" {
		return false
	}
	sum := sha256.Sum256([]byte(offered))
	return subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
}

// clientAddr is the throttling key of r: its remote IP address (proxies'
// headers are not trusted).
func clientAddr(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
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

type actorKey struct{}

func withActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

// Actor names who made a request that passed the guard, for logs: "token"
// (the bearer token), "session:<first 8 hex digits of the session id>"
// (a signed-in browser), or "anonymous" (no token is configured, or an
// open path). It is "" for a request that did not pass a guard.
func Actor(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
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
