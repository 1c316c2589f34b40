package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the page templates; each is parsed together with the
// layout and the shared partials.
var pageNames = []string{"overview", "processes", "nodes", "limits", "schedules", "runs", "run", "trace", "tracepicker", "dead", "emit", "error"}

func (s *server) parsePages() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(s.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := base.Clone()
		if err == nil {
			t, err = t.ParseFS(templateFS, "templates/"+name+".html")
		}
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// funcs are the template helpers (format.go).
func (s *server) funcs() template.FuncMap {
	return template.FuncMap{
		"asset": s.assetURL,
		// base is the prefix every path of the dashboard starts with
		// (Options.Prefix): href="{{base}}/runs".
		"base":   func() string { return s.opts.Prefix },
		"short":  shortID,
		"ago":    func(t time.Time) string { return ago(s.now(), t) },
		"ts":     timestamp,
		"iso":    iso,
		"dur":    human,
		"pct":    percent,
		"num":    anyNumber,
		"key":    effectKey,
		"fkey":   flowKey,
		"json":   prettyJSON,
		"add":    func(a, b int) int { return a + b },
		"since":  func(a, b time.Time) time.Duration { return sinceOrZero(a, b) },
		"status": statusLabel,
		// unhandled: the engine serving the dashboard has no process of
		// this name, so it leaves the process's runs as they are.
		"unhandled": func(process string) bool { return !s.registered()[process] },
	}
}

// asset is one embedded static file.
type asset struct {
	body  []byte
	ctype string
	hash  string // of the content, for cache busting
}

func loadStatic() (map[string]asset, error) {
	out := map[string]asset{}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the host's mime tables
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		out[path.Base(p)] = asset{body: b, ctype: ct, hash: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: static assets: %w", err)
	}
	return out, nil
}

// assetURL is the address of a static file with its content hash, so it
// can be cached for good.
func (s *server) assetURL(name string) string {
	a, ok := s.static[name]
	if !ok {
		return s.opts.Prefix + "/static/" + name
	}
	return s.opts.Prefix + "/static/" + name + "?v=" + a.hash
}

// asset serves an embedded file: for a year when the URL names its current
// hash, else revalidated by ETag.
func (s *server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a, ok := s.static[name]
	if !ok || strings.HasPrefix(name, ".") {
		s.notFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", `"`+a.hash+`"`)
	if r.URL.Query().Get("v") == a.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
