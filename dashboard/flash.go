package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// flash is a one-time message shown on the page an action redirects to.
// It travels in a short-lived cookie signed with a per-process key, so no
// server-side session is needed and no other site can plant one.
type flash struct {
	Kind string `json:"k"` // ok, warn, error
	Msg  string `json:"m"`
}

const flashCookie = "yella_flash"

func (s *server) sign(b []byte) string {
	m := hmac.New(sha256.New, s.flashKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// cookiePath scopes the flash cookie to the dashboard's pages.
func (s *server) cookiePath() string { return s.opts.Prefix + "/" }

// setFlash stores a message for the next page.
func (s *server) setFlash(w http.ResponseWriter, r *http.Request, kind, msg string) {
	if len(msg) > 600 {
		msg = msg[:600] + "…"
	}
	b, _ := json.Marshal(flash{Kind: kind, Msg: msg})
	v := base64.RawURLEncoding.EncodeToString(b) + "." + s.sign(b)
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: v, Path: s.cookiePath(), MaxAge: 60,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// takeFlash returns the pending message, if any, and clears it.
func (s *server) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: s.cookiePath(), MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	payload, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || !hmac.Equal([]byte(sig), []byte(s.sign(b))) {
		return nil
	}
	var f flash
	if json.Unmarshal(b, &f) != nil || f.Msg == "" {
		return nil
	}
	switch f.Kind {
	case "ok", "warn", "error":
	default:
		f.Kind = "ok"
	}
	return &f
}

// back redirects (303) to the page an action came from: the form's "next"
// field when it is a path of the dashboard, else fallback. Both are paths
// without the prefix, which the redirect adds.
func (s *server) back(w http.ResponseWriter, r *http.Request, fallback string) {
	to := fallback
	if n := r.PostFormValue("next"); n != "" && localPath(n) && len(n) < 2048 {
		to = n
	}
	s.redirect(w, r, to)
}
