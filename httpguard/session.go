package httpguard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// SessionCookie is the cookie that carries a signed-in browser's session
// id: 32 random bytes, never the token. The session itself is kept in the
// server's memory, so a restart signs everyone out.
const SessionCookie = "yella_session"

// sessions is the server-side session table, bounded in size. It is keyed
// by the sha256 of the id, so a lookup's timing says nothing about ids.
type sessions struct {
	mu           sync.Mutex
	byHash       map[[32]byte]*session
	max          int
	idle, maxAge time.Duration
}

type session struct {
	prefix          string // first 8 hex digits of the id, for logs
	created, lastAt time.Time
}

func newSessions(max int, idle, maxAge time.Duration) *sessions {
	return &sessions{byHash: map[[32]byte]*session{}, max: max, idle: idle, maxAge: maxAge}
}

func (s *sessions) expired(se *session, now time.Time) bool {
	return now.Sub(se.lastAt) >= s.idle || now.Sub(se.created) >= s.maxAge
}

// start creates a session and returns its id and its name for logs. When
// the table is full it drops expired sessions, then the least recently
// used one.
func (s *sessions) start(now time.Time) (id, name string) {
	var b [32]byte
	rand.Read(b[:])
	id = hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byHash) >= s.max {
		var lru [32]byte
		var lruAt time.Time
		for h, se := range s.byHash {
			if s.expired(se, now) {
				delete(s.byHash, h)
				continue
			}
			if lruAt.IsZero() || se.lastAt.Before(lruAt) {
				lru, lruAt = h, se.lastAt
			}
		}
		if len(s.byHash) >= s.max {
			delete(s.byHash, lru)
		}
	}
	se := &session{prefix: id[:8], created: now, lastAt: now}
	s.byHash[sha256.Sum256([]byte(id))] = se
	return id, "session:" + se.prefix
}

// touch returns the name of the live session id, or "", and records the
// request. An expired session is removed.
func (s *sessions) touch(id string, now time.Time) string {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byHash[h]
	if se == nil {
		return ""
	}
	if s.expired(se, now) {
		delete(s.byHash, h)
		return ""
	}
	se.lastAt = now
	return "session:" + se.prefix
}

// end removes a session and returns its name ("" if there was none).
func (s *sessions) end(id string) string {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.byHash[h]
	if se == nil {
		return ""
	}
	delete(s.byHash, h)
	return "session:" + se.prefix
}

func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byHash)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Yella: sign in</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem">
<h1>Yella</h1>
{{if .Error}}<p role="alert"><strong>{{.Error}}</strong></p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="next" value="{{.Next}}">
<label for="token">Access token</label><br>
<input id="token" name="token" type="password" autocomplete="current-password" required style="width: 100%">
<p><button type="submit">Sign in</button></p>
</form></body></html>
`))

// safeNext is where a sign-in goes back to, under the prefix: next when it
// is a path on this site, else "/". Browsers read "//host" and "/\host" (a backslash is a
// slash to them, and tabs and newlines are dropped) as another site.
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' || strings.ContainsAny(next, "\\\t\r\n") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.HasPrefix(u.Path, "//") || strings.HasPrefix(next, "//") {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if next[i] < 0x20 || next[i] == 0x7f {
			return "/"
		}
	}
	return next
}

func (g *Guard) sessionCookie(r *http.Request, id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: id, Path: g.opts.Prefix + "/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// login serves the sign-in form and checks it: a right token starts a
// session. Attempts are throttled per client address and globally; a
// throttled attempt is refused with 429 before the token is compared.
func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.FormValue("next"))
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	data := struct{ Action, Next, Error string }{Action: g.opts.Prefix + "/login", Next: next}
	status := http.StatusOK
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		now, addr := g.opts.Now(), clientAddr(r)
		wait, ok := g.clients.take(addr, now)
		if ok {
			var gwait time.Duration
			if gwait, ok = g.global.take("", now); !ok {
				g.clients.give(addr)
				wait = gwait
			}
		}
		if !ok {
			g.opts.Logger.Warn("sign-in refused: too many attempts", "remote", r.RemoteAddr, "retry_after", wait.Round(time.Second))
			w.Header().Set("Retry-After", seconds(wait))
			status, data.Error = http.StatusTooManyRequests, "Too many sign-in attempts. Try again in "+seconds(wait)+" seconds."
			break
		}
		if g.tokenMatches(r.PostFormValue("token")) {
			g.clients.give(addr)
			g.global.give("")
			id, name := g.sessions.start(now)
			g.opts.Logger.Info("signed in", "who", name, "remote", r.RemoteAddr)
			http.SetCookie(w, g.sessionCookie(r, id, int(g.opts.SessionMaxAge/time.Second)))
			http.Redirect(w, r, g.opts.Prefix+next, http.StatusSeeOther)
			return
		}
		g.opts.Logger.Info("sign-in failed: wrong token", "remote", r.RemoteAddr)
		status, data.Error = http.StatusUnauthorized, "That token is not right."
	default:
		w.Header().Set("Allow", "GET, POST")
		deny(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET or POST")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	loginPage.Execute(w, data)
}

// logout ends the session (POST only, same-origin like every mutation)
// and goes to the sign-in page.
func (g *Guard) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		deny(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "sign out with POST")
		return
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if name := g.sessions.end(c.Value); name != "" {
			g.opts.Logger.Info("signed out", "who", name, "remote", r.RemoteAddr)
		}
	}
	http.SetCookie(w, g.sessionCookie(r, "", -1))
	http.Redirect(w, r, g.opts.Prefix+"/login", http.StatusSeeOther)
}
