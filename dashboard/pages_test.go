package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// TestPages requests every page and checks what an operator must see.
func TestPages(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		target string
		wants  []string
	}{
		{"/", []string{"<title>Overview · Yella</title>", `data-fragment="stats"`, "Run success", "Throughput", "Recent runs",
			`data-run-id="` + f.deferred + `"`, "CRM API timeout", "email is invalid", `id="activity"`, `class="spark"`}},
		{"/?window=24h&root=1", []string{"Last 24h", `aria-checked="true"`}},
		{"/processes", []string{"intake", "order:placed", "queue 10", "none (dead-letters)", `<svg class="graph"`,
			"post:published", "no listener", `href="/emit?event=order%3aplaced"`}},
		{"/runs", []string{`data-run-id="` + f.ok + `"`, `data-run-id="` + fenceID + `"`, "of 6 runs", `data-fragment="list"`,
			`data-watch-types="run:"`, `id="filter-process"`}},
		{"/runs?status=dead-letter", []string{`data-run-id="` + f.dead + `"`, "Showing 1–1 of 1 run"}},
		{"/runs?process=ship&root=0", []string{`data-run-id="` + f.next + `"`, "of 1 run"}},
		{"/runs?root=1&order=oldest&limit=2", []string{`rel="next"`, `data-run-id="` + fenceID + `"`}},
		{"/runs/" + f.ok, []string{f.ok, "intake", "order:placed", "Payload", "Timeline", "Chain", "order:accepted",
			`href="/trace/` + f.ok + `"`, "ship", `&lt;script&gt;alert(1)&lt;/script&gt;`, "value(s) hidden"}},
		{"/runs/" + f.next, []string{"Effects", "label · 42", "1Z999", "carrier", "ups", "Parent"}},
		{"/runs/" + f.failed, []string{"email is invalid", "SCHEMA_VALIDATION_FAILED", `data-action="retry"`}},
		{"/runs/" + f.dead, []string{"CRM API timeout", `data-action="retry"`, `data-action="requeue"`}},
		{"/runs/" + f.deferred, []string{"Awaiting resume", "post:approved", `data-action="resume"`, `id="resume-payload"`}},
		{"/runs/" + fenceID, []string{"EFFECT_FENCED", `data-action="complete-effect"`, `value="str:charge"`, `data-action="retry"`}},
		{"/trace", []string{"Recent chains", `href="/trace/` + f.ok + `"`}},
		{"/trace/" + f.ok, []string{`<svg class="gantt"`, "intake", "ship", "Wall time", `class="bar st-completed"`}},
		{"/dead", []string{`data-run-id="` + f.dead + `"`, `data-action="requeue-all"`, "Requeue all 1", "1 fenced run needs a decision"}},
		{"/dead?process=sync-crm", []string{"Requeue all 1 of sync-crm", `name="process" value="sync-crm"`}},
		{"/emit", []string{`id="emit-event"`, `id="emit-payload"`, `id="emit-key"`, `id="emit-submit"`, "order:placed → intake"}},
		{"/emit?event=post:drafted", []string{`<option value="post:drafted" selected>`}},
		{"/limits", []string{"<title>Limits · Yella</title>", `data-fragment="limits"`, "No process declares a limit"}},
		{"/schedules", []string{"<title>Schedules · Yella</title>", `data-fragment="schedules"`, "No schedule is declared"}},
	}
	for _, c := range cases {
		r := f.get(c.target)
		if r.Code != 200 {
			t.Errorf("GET %s: %d\n%s", c.target, r.Code, r.Body)
			continue
		}
		if ct := r.H.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", c.target, ct)
		}
		contains(t, "GET "+c.target, r.Body, c.wants...)
	}
	for _, secret := range []string{"sk-live-123", "tok-secret"} {
		if r := f.get("/runs/" + f.ok); strings.Contains(r.Body, secret) {
			t.Errorf("the run page shows the secret %q", secret)
		}
	}
	if r := f.get("/runs/" + f.ok); strings.Contains(r.Body, "<script>alert") {
		t.Error("a payload's markup is not escaped")
	}
}

func TestErrorsPages(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		method, target string
		code           int
		want           string
	}{
		{"GET", "/runs/no-such-run", 404, "Run not found"},
		{"GET", "/trace/no-such-run", 404, "Run not found"},
		{"GET", "/nowhere", 404, "Page not found"},
		{"GET", "/runs?status=bogus", 400, "Unknown status"},
		{"GET", "/runs?limit=0", 400, "limit must be"},
		{"GET", "/runs?cursor=garbage", 400, "malformed cursor"},
		{"GET", "/?window=2y", 400, "window must be"},
		{"GET", "/runs?fragment=nope", 400, "Unknown fragment"},
		{"GET", "/runs/" + f.dead + "/retry", 405, "Method not allowed"},
		{"GET", "/static/nope.js", 404, "Page not found"},
	}
	for _, c := range cases {
		r := f.get(c.target)
		if r.Code != c.code || !strings.Contains(r.Body, c.want) {
			t.Errorf("%s %s: %d, want %d with %q\n%.400s", c.method, c.target, r.Code, c.code, c.want, r.Body)
		}
		if strings.Contains(r.Body, "goroutine ") || strings.Contains(r.Body, ".go:") {
			t.Errorf("%s %s: the page shows a stack trace", c.method, c.target)
		}
	}
}

var (
	scriptTag = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	handler   = regexp.MustCompile(`(?i)<[^>]+\son[a-z]+\s*=`)
	styleAttr = regexp.MustCompile(`(?i)<[^>]+\sstyle\s*=`)
)

// TestSecurityHeaders: every page carries the CSP and friends, and no page
// has an inline script, inline event handler or style attribute (which the
// CSP would block anyway).
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	pages := []string{"/", "/processes", "/limits", "/schedules", "/runs", "/runs/" + f.ok, "/runs/" + f.deferred, "/runs/" + fenceID, "/trace",
		"/trace/" + f.ok, "/dead", "/emit", "/runs/missing", "/runs?fragment=list", "/static/app.js", "/ui/counts.json"}
	for _, p := range pages {
		r := f.get(p)
		h := r.H
		if got := h.Get("Content-Security-Policy"); got != "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'" {
			t.Errorf("%s: CSP %q", p, got)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", p, h)
		}
		if !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			continue
		}
		scripts := scriptTag.FindAllStringSubmatch(r.Body, -1)
		for _, m := range scripts {
			if strings.TrimSpace(m[2]) != "" || !strings.Contains(m[1], "src=") {
				t.Errorf("%s: inline script %q", p, m[0])
			}
		}
		if len(scripts) != 1 && !strings.Contains(p, "fragment") {
			t.Errorf("%s: %d script tags, want app.js only", p, len(scripts))
		}
		if m := handler.FindString(r.Body); m != "" {
			t.Errorf("%s: inline event handler in %q", p, m)
		}
		if m := styleAttr.FindString(r.Body); m != "" {
			t.Errorf("%s: style attribute in %q", p, m)
		}
		if !strings.Contains(p, "fragment") && !strings.Contains(r.Body, `<script src="/static/app.js?v=`) {
			t.Errorf("%s: app.js not loaded", p)
		}
	}
}

func TestStaticAndCounts(t *testing.T) {
	f := newFixture(t)
	r := f.get("/static/app.js")
	if r.Code != 200 || r.H.Get("Content-Type") != "text/javascript; charset=utf-8" || r.H.Get("Cache-Control") != "no-cache" || !strings.Contains(r.Body, "EventSource") {
		t.Fatalf("app.js: %d %v", r.Code, r.H)
	}
	page := f.get("/").Body
	m := regexp.MustCompile(`/static/style\.css\?v=[0-9a-f]+`).FindString(page)
	if m == "" {
		t.Fatal("no versioned stylesheet link")
	}
	if r := f.get(m); r.Code != 200 || !strings.Contains(r.H.Get("Cache-Control"), "immutable") || r.H.Get("ETag") == "" {
		t.Fatalf("style.css: %d %v", r.Code, r.H)
	}
	var counts struct {
		Queue map[string]int64
		Total int64
	}
	r = f.get("/ui/counts.json")
	if err := json.Unmarshal([]byte(r.Body), &counts); err != nil || r.Code != 200 {
		t.Fatalf("counts: %d %v %s", r.Code, err, r.Body)
	}
	if counts.Total != 6 || counts.Queue["dead-letter"] != 1 || counts.Queue["fenced"] != 1 || counts.Queue["completed"] != 2 {
		t.Fatalf("counts %+v", counts)
	}
}

// TestLiveMarkers: the pages carry what app.js needs to refresh them.
func TestLiveMarkers(t *testing.T) {
	f := newFixture(t)
	r := f.get("/runs/" + f.next)
	contains(t, "run page", r.Body, `data-events="/api/events"`, `data-watch-chain="`+f.ok+`"`)
	frag := f.get("/runs/" + f.next + "?fragment=run")
	if frag.Code != 200 || !strings.HasPrefix(strings.TrimSpace(frag.Body), `<article id="run" data-fragment="run"`) || strings.Contains(frag.Body, "<html") {
		t.Fatalf("run fragment: %d\n%.300s", frag.Code, frag.Body)
	}
	list := f.get("/runs?cursor=s3&page=2&fragment=list")
	contains(t, "later runs page", list.Body, `data-watch-runs="`)
	for _, p := range []string{"/?fragment=stats", "/?fragment=charts", "/?fragment=recent", "/?fragment=errors", "/processes?fragment=procs", "/dead?fragment=dead", "/trace/" + f.ok + "?fragment=gantt"} {
		if r := f.get(p); r.Code != 200 || !strings.Contains(r.Body, "data-fragment=") {
			t.Errorf("%s: %d", p, r.Code)
		}
	}
}

func TestOptions(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(context.Background())
	if _, err := dashboard.New(nil, dashboard.Options{}); err == nil {
		t.Error("a nil engine is accepted")
	}
	for _, bad := range []string{"https://evil.example/events", "//evil.example/events", "events"} {
		if _, err := dashboard.New(eng, dashboard.Options{EventsURL: bad}); err == nil {
			t.Errorf("EventsURL %q is accepted", bad)
		}
	}
	sync := t0.Add(-3 * time.Second)
	h, err := dashboard.NewAt(eng, dashboard.Options{EventsURL: "/stream", Brand: "Acme ops",
		ReplicationStatus: func() dashboard.ReplicationState {
			return dashboard.ReplicationState{LastSync: sync, Lag: 1500 * time.Millisecond, LastError: "s3: slow down", OK: true, Stalled: "the WAL file x was removed"}
		}},
		func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, h: h}
	r := f.get("/")
	contains(t, "overview with options", r.Body, `data-events="/stream"`, "Acme ops", "Replication", "stalled", "the WAL file x was removed", "3s ago", "1.50 s", "s3: slow down",
		"No runs yet")
	if r := f.get("/emit"); !strings.Contains(r.Body, "No processes are registered") {
		t.Error("the emit page without processes")
	}
	if r := f.get("/processes"); !strings.Contains(r.Body, "No processes registered") {
		t.Error("the processes page without processes")
	}
	if r.Code != http.StatusOK {
		t.Fatal(r.Code)
	}
}

// TestRunningRunShowsItsOwner: the page of a running run says which engine
// instance holds it and until when (Run.Owner, Run.LeaseExpires), here a
// run held by another engine on the same store.
func TestRunningRunShowsItsOwner(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	const id = "01900000-0000-7000-8000-0000000000a1"
	if _, err := st.Admit(ctx, store.Admission{Event: "report:asked", Runs: []store.NewRun{{ID: id, Process: "report"}}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "engine-b", Now: t0, LeaseUntil: t0.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.NewAt(eng, dashboard.Options{}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/runs/"+id, nil))
	if rec.Code != 200 {
		t.Fatalf("GET /runs/%s: %d\n%s", id, rec.Code, rec.Body)
	}
	contains(t, "running run", rec.Body.String(), "<dt>Lease</dt>", "engine-b", "2026-03-14 09:27:23")
}
