package dashboard_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// limitedEngine is a started engine on a fake clock whose runs are held
// back: the rate limit "openai" (1 per hour per tenant, shared by
// summarize and classify) holds two runs of acme and one of the empty
// key; "crawl" (one running per site, priority 3) runs one run of
// example.com and holds three; "notify" declares a bound no key is at.
// It returns the dashboard over it and the ids of a run of each limit.
func limitedEngine(t *testing.T) (get func(string) (int, string), summarize, crawl string) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ok := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	openai := func() *yella.RateLimit {
		return &yella.RateLimit{Name: "openai", Limit: 1, Per: time.Hour, Key: yella.KeyFromPayload("tenant")}
	}
	for _, p := range []yella.Process{
		{Name: "summarize", On: "doc:added", RateLimit: openai(), Run: ok},
		{Name: "classify", On: "doc:tagged", RateLimit: openai(), Run: ok},
		{Name: "crawl", On: "site:queued", Priority: 3, KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("site")},
			Run: func(c *yella.Ctx) yella.Result { <-release; return c.OK(nil) }},
		{Name: "notify", On: "notify", KeyConcurrency: &yella.KeyConcurrency{Max: 4, Key: yella.KeyFromPayload("user")}, Run: ok},
	} {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		eng.Stop(ctx)
	})
	emit := func(event string, payload any, opts ...yella.EmitOption) string {
		em, err := eng.Emit(ctx, event, payload, opts...)
		if err != nil || len(em.Runs) != 1 {
			t.Fatalf("emit %s: %v %+v", event, err, em)
		}
		return em.Runs[0]
	}
	summarize = emit("doc:added", map[string]string{"tenant": "acme"}, yella.Priority(-2))
	emit("doc:tagged", map[string]string{"tenant": "acme"})
	emit("doc:added", map[string]string{"tenant": "acme"})
	emit("doc:added", nil)
	emit("doc:added", nil)
	crawl = emit("site:queued", map[string]string{"site": "example.com"})
	for range 3 {
		emit("site:queued", map[string]string{"site": "example.com"})
	}
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Held back, and the store's counts settled (the nav shows them).
		if m.Dispatcher.RateLimited == 3 && m.Dispatcher.KeyLimited == 3 && m.Queue[yella.StatusRunning] == 1 &&
			m.Queue[yella.StatusCompleted] == 2 && m.Queue[yella.StatusIdle] == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine never held the runs back: %+v", m.Dispatcher)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h, err := dashboard.NewAt(eng, dashboard.Options{Brand: "Yella"}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return func(target string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}, summarize, crawl
}

// TestLimitsPage: the limits page lists each rate limit (limit per
// period, burst, processes, the waiting keys with their runs and next
// start) and each per-key concurrency bound (max, processes, the keys at
// their bound with running and waiting runs); the nav links to it; the
// overview counts the held runs; a run's page shows its priority and
// keys.
func TestLimitsPage(t *testing.T) {
	get, summarize, crawl := limitedEngine(t)
	code, body := get("/limits")
	if code != 200 {
		t.Fatalf("GET /limits: %d", code)
	}
	golden(t, "limits.html", normalise(body))
	contains(t, "limits page", body,
		`<a href="/limits" aria-current="page">Limits</a>`,
		`Runs held back now: 3 by a rate limit · 3 by their key's concurrency bound.`,
		`<dd>1 per 1h per key</dd>`,
		`<a href="/runs?process=classify&amp;status=idle">classify</a>, <a href="/runs?process=summarize&amp;status=idle">summarize</a>`,
		`<tr data-key="acme"><td><code>acme</code></td><td class="num">2</td><td><time datetime="2026-03-14T10:26:53Z" data-rel title="2026-03-14 10:26:53.000 UTC">in 1h</time></td></tr>`,
		`<tr data-key=""><td><code>&#34;&#34;</code></td><td class="num">1</td>`,
		`<tr data-key="example.com"><td><code>example.com</code></td><td class="num">1</td><td class="num">3</td></tr>`,
		`<dd>4 running per key</dd>`, `No key is at its bound with runs waiting.`)
	if strings.Index(body, `data-key="acme"`) > strings.Index(body, `data-key=""`) {
		t.Errorf("the key with the most waiting runs is not first")
	}
	if code, frag := get("/limits?fragment=limits"); code != 200 || !strings.Contains(frag, "example.com") || strings.Contains(frag, "<html") {
		t.Errorf("limits fragment: %d %s", code, frag)
	}
	if _, body := get("/"); !strings.Contains(body, `<a href="/limits">3 rate-limited · 3 key-limited</a>`) {
		t.Errorf("the overview does not count the held runs")
	}
	_, body = get("/runs/" + summarize)
	contains(t, "a rate-limited run", body, `<dd id="run-priority">-2</dd>`,
		`<dd id="run-rate"><a href="/limits">openai</a> <span class="muted">key</span> <code>acme</code></dd>`)
	if strings.Contains(body, "run-concurrency") {
		t.Errorf("a run without a concurrency key shows one")
	}
	_, body = get("/runs/" + crawl)
	contains(t, "a key-limited run", body, `<dd id="run-priority">3</dd>`,
		`<dd id="run-concurrency"><a href="/limits">crawl</a> <span class="muted">key</span> <code>example.com</code></dd>`)
}

// TestLimitsPageEmpty: without limits the page says no process declares
// one; on a shared store it notes that the store holds runs back, and
// lists no key.
func TestLimitsPageEmpty(t *testing.T) {
	f := newFixture(t)
	r := f.get("/limits")
	if r.Code != 200 {
		t.Fatalf("GET /limits: %d", r.Code)
	}
	golden(t, "limits-empty.html", normalise(r.Body))
	contains(t, "limits page without limits", r.Body, "No process declares a limit")
	if r := f.get("/runs/" + f.ok); strings.Contains(r.Body, "run-priority") || strings.Contains(r.Body, "run-rate") {
		t.Errorf("a run without flow limits shows a priority or a key")
	}

	st := &sharedStore{Store: memstore.New()}
	eng, err := yella.New(yella.Config{Store: st, Owner: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "crawl", On: "site:queued", KeyConcurrency: &yella.KeyConcurrency{Max: 2, Key: yella.KeyFromPayload("site")},
		Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.NewAt(eng, dashboard.Options{}, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/limits", nil))
	body := w.Body.String()
	contains(t, "limits page on a shared store", body, `id="limits-shared"`, "the store holds runs back when a node claims them", `<dd>2 running per key</dd>`)
	if w.Code != 200 || strings.Contains(body, "No key is at its bound") {
		t.Errorf("shared store: %d, or it claims no key is waiting", w.Code)
	}
}
