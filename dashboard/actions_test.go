package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/store/memstore"
)

// redirected checks a 303 to where and returns the page it leads to,
// with the flash cookie the action set.
func (f *fixture) redirected(r response, where string) response {
	f.t.Helper()
	if r.Code != http.StatusSeeOther || r.H.Get("Location") != where {
		f.t.Fatalf("got %d to %q, want 303 to %q\n%.500s", r.Code, r.H.Get("Location"), where, r.Body)
	}
	req := httptest.NewRequest("GET", where, nil)
	for _, c := range r.Res.Cookies() {
		req.AddCookie(c)
	}
	next := f.do(req)
	if next.Code != 200 {
		f.t.Fatalf("GET %s after the action: %d", where, next.Code)
	}
	cleared := false
	for _, c := range next.Res.Cookies() {
		cleared = cleared || c.Name == "yella_flash" && c.MaxAge < 0
	}
	if !cleared {
		f.t.Errorf("GET %s did not clear the flash", where)
	}
	return next
}

func timelineHas(t *testing.T, eng *yella.Engine, id, note string) {
	t.Helper()
	tl, err := eng.Timeline(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tl {
		if e.Note == note {
			return
		}
	}
	t.Errorf("run %s: no %q in its timeline %+v", id, note, tl)
}

func TestActions(t *testing.T) {
	f := newFixture(t)
	page := f.redirected(f.post("/runs/"+f.failed+"/retry", nil), "/runs/"+f.failed)
	contains(t, "after retry", page.Body, `class="flash flash-ok"`, "Retried run")
	f.drain()
	timelineHas(t, f.eng, f.failed, "manual retry")
	f.want(f.failed, yella.StatusErrored) // it fails again, as it should

	page = f.redirected(f.post("/runs/"+f.dead+"/requeue", url.Values{"next": {"/dead"}}), "/dead")
	contains(t, "after requeue", page.Body, "Requeued dead letter")
	f.drain()
	timelineHas(t, f.eng, f.dead, "requeued from dead letter")

	page = f.redirected(f.post("/runs/"+f.deferred+"/resume", url.Values{"payload": {`{"reviewer": "ada"}`}}), "/runs/"+f.deferred)
	contains(t, "after resume", page.Body, "Resumed run", "1 follow-up run admitted")
	f.drain()
	chain, _ := f.eng.Chain(context.Background(), f.deferred)
	if len(chain) != 2 || string(chain[1].Output) != `"Launch post approved by ada"` {
		t.Fatalf("chain after resume: %+v", chain)
	}

	page = f.redirected(f.post("/runs/"+fenceID+"/complete-effect", url.Values{"key": {"str:charge"}, "output": {`"r-old"`}}), "/runs/"+fenceID)
	contains(t, "after complete-effect", page.Body, "Recorded effect charge")
	f.drain()
	if r := f.want(fenceID, yella.StatusCompleted); string(r.Output) != `"r-old"` {
		t.Fatalf("fenced run after completing its effect: output %s", r.Output)
	}

	// A run in the wrong state: a flash error, nothing changed.
	page = f.redirected(f.post("/runs/"+f.ok+"/cancel", nil), "/runs/"+f.ok)
	contains(t, "cancel a completed run", page.Body, `class="flash flash-error"`, "Not done:")
	f.want(f.ok, yella.StatusCompleted)

	if r := f.post("/runs/no-such-run/retry", nil); r.Code != 404 || !strings.Contains(r.Body, "Run not found") {
		t.Fatalf("retry of an unknown run: %d", r.Code)
	}
}

func TestCancelAndRequeueAll(t *testing.T) {
	// An engine that is not started keeps its runs idle: one to cancel.
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(context.Background())
	eng.Register(yella.Process{Name: "later", On: "tick", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	em, err := eng.Emit(context.Background(), "tick", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(eng, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, eng: eng, h: h}
	contains(t, "idle run", f.get("/runs/"+em.Runs[0]).Body, `data-action="cancel"`, "data-confirm=")
	page := f.redirected(f.post("/runs/"+em.Runs[0]+"/cancel", nil), "/runs/"+em.Runs[0])
	contains(t, "after cancel", page.Body, "Cancelled run", "CANCELLED")
	if r := f.want(em.Runs[0], yella.StatusCancelled); r.ErrorCode != yella.CodeCancelled {
		t.Fatalf("cancelled run: %+v", r)
	}

	g := newFixture(t)
	page = g.redirected(g.post("/dead/requeue-all", url.Values{"next": {"/dead"}}), "/dead")
	// The engine may requeue the run again if it dies again meanwhile (see
	// the report): at least one.
	if !regexp.MustCompile(`Requeued \d+ dead letters? with a fresh retry budget`).MatchString(page.Body) {
		t.Errorf("after requeue all: no flash in\n%.2000s", page.Body)
	}
	timelineHas(t, g.eng, g.dead, "requeued from dead letter")
	g.drain()
	page = g.redirected(g.post("/dead/requeue-all", url.Values{"process": {"validate"}}), "/dead")
	contains(t, "requeue all of a process without dead letters", page.Body, "There were no dead letters of validate to requeue")
}

func TestEmit(t *testing.T) {
	f := newFixture(t)
	r := f.post("/emit", url.Values{"event": {"post:drafted"}, "payload": {`{"title": "Second"}`}, "key": {"post-2"}})
	if r.Code != http.StatusSeeOther || !strings.HasPrefix(r.H.Get("Location"), "/runs/") {
		t.Fatalf("emit: %d %q\n%.400s", r.Code, r.H.Get("Location"), r.Body)
	}
	id := strings.TrimPrefix(r.H.Get("Location"), "/runs/")
	page := f.redirected(r, "/runs/"+id)
	contains(t, "emitted run", page.Body, "Emitted post:drafted", "post-2", "Second")
	f.drain()

	again := f.post("/emit", url.Values{"event": {"post:drafted"}, "payload": {`{}`}, "key": {"post-2"}})
	page = f.redirected(again, "/runs/"+id)
	contains(t, "repeated key", page.Body, "flash-warn", "already used")

	bad := f.post("/emit", url.Values{"event": {"post:drafted"}, "payload": {`{"title": "x",}`}, "key": {"k"}})
	if bad.Code != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d", bad.Code)
	}
	contains(t, "bad JSON", bad.Body, "Not valid JSON", "line 1, column", `{&#34;title&#34;: &#34;x&#34;,}</textarea>`,
		`value="k"`, `<option value="post:drafted" selected>`, `aria-invalid="true"`)

	multi := f.post("/emit", url.Values{"event": {"post:drafted"}, "payload": {"\n{\n  \"a\": 1,\n  oops\n}"}})
	contains(t, "bad JSON on line 4 (after a blank line)", multi.Body, "line 4, column 3")

	unknown := f.post("/emit", url.Values{"event": {"no:such"}, "payload": {""}})
	if unknown.Code != http.StatusUnprocessableEntity || !strings.Contains(unknown.Body, "No process listens to") {
		t.Fatalf("unknown event: %d", unknown.Code)
	}
	missing := f.post("/emit", url.Values{"payload": {"{}"}})
	if missing.Code != http.StatusBadRequest || !strings.Contains(missing.Body, "Choose the event") {
		t.Fatalf("no event: %d", missing.Code)
	}
	two := f.post("/emit", url.Values{"event": {"post:drafted"}, "payload": {"[1] [2]"}})
	if two.Code != http.StatusBadRequest || !strings.Contains(two.Body, "after the first value") {
		t.Fatalf("two values: %d", two.Code)
	}

	req := httptest.NewRequest("POST", "/emit", strings.NewReader("event=post:drafted&payload="+strings.Repeat("x", 2<<20)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r := f.do(req); r.Code != http.StatusRequestEntityTooLarge || !strings.Contains(r.Body, "larger than 1024 KiB") {
		t.Fatalf("oversize body: %d", r.Code)
	}
}

func TestBadActionInput(t *testing.T) {
	f := newFixture(t)
	r := f.post("/runs/"+f.deferred+"/resume", url.Values{"payload": {`{"reviewer": ada}`}})
	if r.Code != http.StatusBadRequest {
		t.Fatalf("resume with bad JSON: %d", r.Code)
	}
	contains(t, "resume with bad JSON", r.Body, "Not valid JSON", `{&#34;reviewer&#34;: ada}</textarea>`, `id="resume-error"`)
	f.want(f.deferred, yella.StatusDeferred)

	r = f.post("/runs/"+fenceID+"/complete-effect", url.Values{"key": {"str:charge"}, "output": {`nope`}})
	if r.Code != http.StatusBadRequest || !strings.Contains(r.Body, `id="complete-error-0"`) {
		t.Fatalf("complete-effect with bad JSON: %d", r.Code)
	}
	r = f.post("/runs/"+fenceID+"/complete-effect", url.Values{"output": {`1`}})
	if r.Code != http.StatusBadRequest || !strings.Contains(r.Body, "Choose the effect") {
		t.Fatalf("complete-effect without a key: %d", r.Code)
	}
	f.want(fenceID, yella.StatusFenced)

	// next must stay on this site.
	r = f.post("/runs/"+f.failed+"/retry", url.Values{"next": {"//evil.example/x"}})
	if loc := r.H.Get("Location"); loc != "/runs/"+f.failed {
		t.Fatalf("open redirect to %q", loc)
	}
}

// TestCrossOrigin: a POST from another site is refused before it reaches
// the engine.
func TestCrossOrigin(t *testing.T) {
	f := newFixture(t)
	for _, target := range []string{"/runs/" + f.dead + "/requeue", "/runs/" + f.failed + "/retry", "/emit", "/dead/requeue-all"} {
		req := httptest.NewRequest("POST", target, strings.NewReader("event=post:drafted"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		r := f.do(req)
		if r.Code != http.StatusForbidden || !strings.Contains(r.Body, "Cross-origin request refused") {
			t.Errorf("POST %s cross-site: %d", target, r.Code)
		}
		if r.H.Get("Content-Security-Policy") == "" {
			t.Errorf("POST %s: the 403 page has no CSP", target)
		}
	}
	f.want(f.dead, yella.StatusDead)
	f.want(f.failed, yella.StatusErrored)
	if page, _ := f.eng.Runs(context.Background(), yella.RunQuery{Event: "post:drafted"}); len(page.Runs) != 1 {
		t.Fatalf("a cross-site emit admitted runs: %d", len(page.Runs))
	}
	// A forged flash cookie is ignored.
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(&http.Cookie{Name: "yella_flash", Value: "eyJrIjoib2siLCJtIjoiUGhpc2gifQ.bad"})
	if r := f.do(req); strings.Contains(r.Body, "Phish") {
		t.Fatal("an unsigned flash is shown")
	}
}
