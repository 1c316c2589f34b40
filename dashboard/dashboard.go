// Package dashboard is Yella's operator dashboard: server-rendered pages
// (html/template) over a *yella.Engine, with a little plain JavaScript for
// live updates from the engine's Server-Sent Events stream. Every asset is
// embedded; pages are served under a strict Content-Security-Policy with
// no inline script or style, and they work without JavaScript.
//
// Pages: the overview (/), processes and the event graph (/processes), the
// nodes sharing the store (/nodes), the flow limits (/limits), the cron
// schedules (/schedules), runs (/runs), a run (/runs/{id}), a chain's
// Gantt chart (/trace/{id}), dead letters (/dead) and an emit form (/emit).
// Operator actions (retry, requeue, cancel, resume, signal a waiting run,
// end a wait, complete an effect, requeue all dead letters, emit, pause
// and resume a schedule) are POST forms guarded by
// http.CrossOriginProtection; each redirects back with a flash message.
//
// The package depends only on the root package yella, the standard
// library and the guard in front of it (httpguard.Actor, to log who acted
// and to offer signing out). The SSE stream itself is served by another
// handler (the JSON API); Options.EventsURL tells the pages where it is.
//
// Runs of a process the serving engine does not have are marked "no
// handler in this engine" (the engine leaves them as they are), and the
// processes page lists such processes with their waiting runs.
package dashboard

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpguard"
)

// Options configures the dashboard. The zero value is usable.
type Options struct {
	// Prefix is the path the dashboard is mounted under, for a server that
	// serves it beside other pages: "/yella" when requests for /yella/…
	// reach the dashboard with the prefix stripped (http.StripPrefix). Every
	// link, form action, redirect, asset and the events URL the pages use
	// starts with it, and its cookie is scoped to it. It must be "" (mounted
	// at the root, the default) or a path such as "/yella"; a trailing
	// slash is dropped.
	Prefix string
	// EventsURL is the path of the engine's Server-Sent Events stream under
	// Prefix (the browser opens Prefix+EventsURL), whose frames are
	// "id: <n>", "event: <yella.EventType>" and "data: <JSON event>". The
	// pages open it for live updates; without it they still work,
	// refreshed by the browser. It must be a path ("/…", not "//…"): the
	// Content-Security-Policy allows only the same origin. Defaults to
	// "/api/events", where package httpapi serves it when mounted beside
	// the dashboard.
	EventsURL string
	// Brand is the name shown in the navigation bar and page titles.
	// Defaults to "Yella".
	Brand string
	// Logger receives server errors (with the reference shown to the
	// operator) and one line per operator action. Defaults to discarding.
	Logger *slog.Logger
	// ReplicationStatus, when set, is shown on the overview. It is called
	// on every overview render, concurrently, so it must be quick and safe
	// for concurrent use.
	ReplicationStatus func() ReplicationState
	// ReadTimeout bounds the engine reads of one page: past it their store
	// queries are stopped and the page answers 503. Defaults to
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxConcurrentPages bounds how many pages (and the counts the pages
	// poll) are rendered at once; past it a page answers 503 with
	// Retry-After at once, so a burst of page loads cannot queue up reads
	// behind each other. Assets and actions are not counted. Defaults to
	// DefaultMaxConcurrentPages.
	MaxConcurrentPages int
}

// Defaults of the read bounds (Options.ReadTimeout, MaxConcurrentPages).
const (
	DefaultReadTimeout        = 10 * time.Second
	DefaultMaxConcurrentPages = 8
)

// ReplicationState is the state of off-box replication the overview shows.
type ReplicationState struct {
	LastSync  time.Time     // the last successful sync; zero before the first
	Lag       time.Duration // the time since LastSync
	LastError string        // the last error ("" if none)
	OK        bool          // replication is healthy
	Stalled   string        // why replication is stalled; "" when it is not
}

// maxBody bounds every request body (forms, JSON payloads).
const maxBody = 1 << 20

// csp is the Content-Security-Policy of every response.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// server holds the dashboard's state: the engine, the parsed page
// templates and the embedded assets.
type server struct {
	eng      *yella.Engine
	pagesNow chan struct{} // a slot per page being rendered (MaxConcurrentPages)
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	pages    map[string]*template.Template
	static   map[string]asset
	flashKey []byte
}

// New returns the dashboard for eng as an http.Handler, to be mounted at
// "/", or under Options.Prefix with the prefix stripped (its links are
// absolute paths that start with the prefix). It serves its pages, its
// POST actions and its assets under /static/, and answers any other path
// with a 404 page; route the JSON API, the event stream and /metrics to
// their own handlers before it. Every POST is refused with 403 when it comes from
// another origin (http.CrossOriginProtection), and bodies are limited to
// 1 MiB. New fails only on invalid options.
func New(eng *yella.Engine, opts Options) (http.Handler, error) {
	return newHandler(eng, opts, time.Now)
}

func newHandler(eng *yella.Engine, opts Options, now func() time.Time) (http.Handler, error) {
	if eng == nil {
		return nil, errors.New("dashboard: nil engine")
	}
	if opts.EventsURL == "" {
		opts.EventsURL = "/api/events"
	}
	if !localPath(opts.EventsURL) {
		return nil, fmt.Errorf("dashboard: EventsURL must be a same-origin path such as /api/events, got %q", opts.EventsURL)
	}
	opts.Prefix = strings.TrimSuffix(opts.Prefix, "/")
	if opts.Prefix != "" && (!localPath(opts.Prefix) || strings.ContainsAny(opts.Prefix, "?#%\\\"'<> ")) {
		return nil, fmt.Errorf("dashboard: Prefix must be a path such as /yella, got %q", opts.Prefix)
	}
	if opts.Brand == "" {
		opts.Brand = "Yella"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadTimeout < 0 || opts.MaxConcurrentPages < 0 {
		return nil, errors.New("dashboard: ReadTimeout and MaxConcurrentPages must not be negative")
	}
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.MaxConcurrentPages == 0 {
		opts.MaxConcurrentPages = DefaultMaxConcurrentPages
	}
	s := &server{eng: eng, opts: opts, log: opts.Logger, now: now, flashKey: make([]byte, 32),
		pagesNow: make(chan struct{}, opts.MaxConcurrentPages)}
	if _, err := rand.Read(s.flashKey); err != nil {
		return nil, fmt.Errorf("dashboard: flash key: %w", err)
	}
	var err error
	if s.static, err = loadStatic(); err != nil {
		return nil, err
	}
	if s.pages, err = s.parsePages(); err != nil {
		return nil, err
	}
	return s.routes(), nil
}

// routes builds the mux and wraps it: panics become a 500 page, every
// response carries the security headers, mutations must be same-origin and
// bodies are bounded.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.bounded(s.overview))
	mux.HandleFunc("GET /processes", s.bounded(s.processes))
	mux.HandleFunc("GET /nodes", s.bounded(s.nodes))
	mux.HandleFunc("GET /limits", s.bounded(s.limits))
	mux.HandleFunc("GET /schedules", s.bounded(s.schedules))
	mux.HandleFunc("GET /runs", s.bounded(s.runs))
	mux.HandleFunc("GET /runs/{id}", s.bounded(s.run))
	mux.HandleFunc("GET /trace", s.bounded(s.tracePicker))
	mux.HandleFunc("GET /trace/{id}", s.bounded(s.trace))
	mux.HandleFunc("GET /dead", s.bounded(s.dead))
	mux.HandleFunc("GET /emit", s.bounded(s.emitForm))
	mux.HandleFunc("GET /ui/counts.json", s.bounded(s.countsJSON))
	mux.HandleFunc("GET /static/{name}", s.asset)
	post := func(path string, h http.HandlerFunc) {
		mux.HandleFunc("POST "+path, h)
		mux.HandleFunc("GET "+path, s.postOnly) // a 405 page rather than the catch-all 404
	}
	post("/runs/{id}/retry", s.retry)
	post("/runs/{id}/requeue", s.requeue)
	post("/runs/{id}/cancel", s.cancel)
	post("/runs/{id}/resume", s.resume)
	post("/runs/{id}/complete-effect", s.completeEffect)
	post("/runs/{id}/signal", s.signalRun)
	post("/runs/{id}/end-wait", s.endWait)
	post("/dead/requeue-all", s.requeueAll)
	post("/schedules/{name}/pause", s.pauseSchedule)
	post("/schedules/{name}/resume", s.resumeSchedule)
	mux.HandleFunc("POST /emit", s.emitPost)
	mux.HandleFunc("/", s.notFound)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusForbidden, "Cross-origin request refused",
			"This action came from another site. Actions are accepted only from the dashboard's own pages.")
	}))
	inner := cop.Handler(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		defer s.recoverPanic(w, r)
		inner.ServeHTTP(w, r)
	})
}

func (s *server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	ref := newRef()
	s.log.Error("dashboard: panic", "ref", ref, "method", r.Method, "path", r.URL.Path, "panic", v)
	s.errorPage(w, r, http.StatusInternalServerError, "Internal error",
		"Something went wrong while building this page. Reference: "+ref+" (in the server log).")
}

// layout is what every page template gets besides its own data.
type layout struct {
	Brand     string
	Title     string
	Nav       string // the active tab
	EventsURL string
	Flash     *flash
	Queue     map[yella.Status]int64 // nav badges; nil if the store did not answer
	Now       time.Time
	SignedIn  bool // through a sign-in session: the page offers to sign out
}

func (l *layout) base() *layout { return l }

// Count is the number of runs with status s (a nav badge).
func (l *layout) Count(s string) int64 { return l.Queue[yella.Status(s)] }

type pageData interface{ base() *layout }

// newLayout fills the common fields. The queue counts are cheap (the
// stores keep them), so every page shows them.
func (s *server) newLayout(r *http.Request, nav, title string) layout {
	l := layout{Brand: s.opts.Brand, Title: title, Nav: nav, EventsURL: s.opts.Prefix + s.opts.EventsURL, Now: s.now(),
		SignedIn: strings.HasPrefix(httpguard.Actor(r.Context()), "session:")}
	if m, err := s.eng.Metrics(r.Context()); err == nil {
		l.Queue = m.Queue
	}
	return l
}

// render writes a page, or the fragment named by ?fragment= when the page
// lists it (the live-update script swaps fragments in place). A full page
// consumes the flash cookie; a fragment never does.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, page string, data pageData) {
	t := s.pages[page]
	name := "layout"
	if f := r.URL.Query().Get("fragment"); f != "" {
		name = "frag-" + f
		if !fragmentAllowed(t, name) {
			s.errorPage(w, r, http.StatusBadRequest, "Unknown fragment", "This page has no fragment named "+quote(f)+".")
			return
		}
	} else {
		data.base().Flash = s.takeFlash(w, r)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		ref := newRef()
		s.log.Error("dashboard: template", "ref", ref, "page", page, "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "Internal error", "This page could not be rendered. Reference: "+ref+".")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fragmentAllowed: only templates named frag-… defined by the page itself
// can be requested.
func fragmentAllowed(t *template.Template, name string) bool {
	return strings.HasPrefix(name, "frag-") && t.Lookup(name) != nil
}

// errorData is the data of the error page.
type errorData struct {
	layout
	Status  int
	Heading string
	Message string
}

// errorPage renders a full error page with a plain message (never a stack
// trace). It does not consult the engine, so it works when the store is down.
func (s *server) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, msg string) {
	d := &errorData{layout: layout{Brand: s.opts.Brand, Title: heading, EventsURL: s.opts.Prefix + s.opts.EventsURL, Now: s.now()},
		Status: status, Heading: heading, Message: msg}
	var buf bytes.Buffer
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if err := s.pages["error"].ExecuteTemplate(&buf, "layout", d); err != nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "%d %s\n%s\n", status, heading, msg)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// engineError renders an engine error as the page it deserves: 404 for an
// unknown run, 400 for a bad query, 503 when the store or the engine is
// unavailable, else a 500 with a reference to the log line.
func (s *server) engineError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil {
		s.errorPage(w, r, http.StatusServiceUnavailable, "This page took too long",
			fmt.Sprintf("Its reads were stopped after %s. Narrow the page (filters, a smaller page size) or try again.", s.opts.ReadTimeout))
		return
	}
	switch yella.CodeOf(err) {
	case yella.CodeRunNotFound:
		s.errorPage(w, r, http.StatusNotFound, "Run not found", "No run has the id "+quote(r.PathValue("id"))+". It may have been pruned by retention.")
	case yella.CodeInvalidQuery:
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", engineMsg(err))
	case yella.CodeUnavailable, yella.CodeStopped:
		ref := newRef()
		s.log.Error("dashboard: engine unavailable", "ref", ref, "path", r.URL.Path, "err", err)
		s.errorPage(w, r, http.StatusServiceUnavailable, "Engine unavailable",
			"The engine or its store did not answer; try again shortly. Reference: "+ref+".")
	default:
		ref := newRef()
		s.log.Error("dashboard: engine error", "ref", ref, "path", r.URL.Path, "err", err)
		s.errorPage(w, r, http.StatusInternalServerError, "Internal error", "The engine returned an unexpected error. Reference: "+ref+".")
	}
}

// bounded renders a page within the read bounds: a slot among
// MaxConcurrentPages (or 503 at once) and ReadTimeout on the request's
// context, which the engine's reads pass to the store.
func (s *server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.pagesNow <- struct{}{}:
			defer func() { <-s.pagesNow }()
		default:
			w.Header().Set("Retry-After", "2")
			s.errorPage(w, r, http.StatusServiceUnavailable, "Busy",
				fmt.Sprintf("%d pages are being prepared, the most this server renders at once; try again in a moment.", cap(s.pagesNow)))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.ReadTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}
}

// engineMsg is an engine error's own message, without the underlying cause
// (which may carry store details).
func engineMsg(err error) string {
	var e *yella.Error
	if errors.As(err, &e) {
		if e.Msg != "" {
			return e.Msg
		}
		return strings.ToLower(strings.ReplaceAll(string(e.Code), "_", " "))
	}
	return "unexpected error"
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.errorPage(w, r, http.StatusNotFound, "Page not found", "There is no page at "+quote(r.URL.Path)+".")
}

func (s *server) postOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	s.errorPage(w, r, http.StatusMethodNotAllowed, "Method not allowed", "This address takes a form submission (POST) from the dashboard's buttons.")
}

func newRef() string {
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func quote(s string) string {
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// registered is the set of processes of the engine.
func (s *server) registered() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.eng.Processes() {
		out[p.Name] = true
	}
	return out
}

// who names the operator of a request for the action log: the guard's
// actor, or "unguarded" when the dashboard is served without it.
func who(r *http.Request) string {
	if a := httpguard.Actor(r.Context()); a != "" {
		return a
	}
	return "unguarded"
}

// redirect answers 303 See Other to path, a path of the dashboard: the
// browser is sent to it under the prefix.
func (s *server) redirect(w http.ResponseWriter, r *http.Request, path string) {
	http.Redirect(w, r, s.opts.Prefix+path, http.StatusSeeOther)
}

// localPath reports whether p is a path on this origin: "/…" but not
// "//host" or "/\host", which browsers treat as another origin.
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") &&
		!strings.ContainsAny(p, "\r\n\t")
}
