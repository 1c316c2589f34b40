package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// limitsEngine is a started engine on a fake clock whose runs are held
// back by flow limits: "openai" (1 per hour per tenant, shared by
// summarize and classify) holds two runs of tenant acme and one of
// globex; "crawl" (one running per site) runs one run of example.com and
// holds three. It waits until the engine reports them held back.
func limitsEngine(t *testing.T) (*yella.Engine, map[string]string) {
	t.Helper()
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(t0), Owner: "test-engine"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	openai := func() *yella.RateLimit {
		return &yella.RateLimit{Name: "openai", Limit: 1, Per: time.Hour, Burst: 1, Key: yella.KeyFromPayload("tenant")}
	}
	ok := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	for _, p := range []yella.Process{
		{Name: "summarize", On: "doc:added", RateLimit: openai(), Run: ok},
		{Name: "classify", On: "doc:tagged", RateLimit: openai(), Run: ok},
		{Name: "crawl", On: "site:queued", Priority: 3, KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("site")},
			Run: func(c *yella.Ctx) yella.Result { <-release; return c.OK(nil) }},
		{Name: "plain", On: "plain", Run: ok},
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
	ids := map[string]string{}
	emit := func(name, event string, payload any, opts ...yella.EmitOption) {
		em, err := eng.Emit(ctx, event, payload, opts...)
		if err != nil || len(em.Runs) != 1 {
			t.Fatalf("emit %s: %v %+v", event, err, em)
		}
		if name != "" {
			ids[name] = em.Runs[0]
		}
	}
	emit("acme-1", "doc:added", map[string]string{"tenant": "acme"}, yella.Priority(5))
	emit("", "doc:tagged", map[string]string{"tenant": "acme"})
	emit("", "doc:added", map[string]string{"tenant": "acme"})
	emit("", "doc:added", map[string]string{"tenant": "globex"})
	emit("", "doc:added", map[string]string{"tenant": "globex"})
	for i := range 4 {
		emit(map[int]string{0: "crawl-1"}[i], "site:queued", map[string]string{"site": "example.com"})
	}
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Dispatcher.RateLimited == 3 && m.Dispatcher.KeyLimited == 3 &&
			m.Queue[yella.StatusRunning] == 1 && m.Queue[yella.StatusCompleted] == 2 && m.Queue[yella.StatusIdle] == 6 { // and the store's counts settled
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine never held the runs back: %+v", m.Dispatcher)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return eng, ids
}

// TestLimitsRoute: GET /api/limits lists each limit with its processes and
// the keys holding runs back, the most waiting first (golden file); top=
// bounds the keys per limit; /api/metrics counts the held runs; a run
// carries its priority and its keys.
func TestLimitsRoute(t *testing.T) {
	eng, ids := limitsEngine(t)
	api := httpapi.New(eng, httpapi.Options{})
	defer api.Close()
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	code, body := get("/api/limits")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	golden(t, "limits", indent(t, body))
	var all httpapi.Limits
	if err := json.Unmarshal([]byte(body), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Rate) != 1 || len(all.Rate[0].Waiting) != 2 || all.Rate[0].Waiting[0].Key != "acme" || all.Rate[0].Waiting[0].Waiting != 2 {
		t.Errorf("rate limits: %+v", all.Rate)
	}
	if len(all.Key) != 1 || len(all.Key[0].Waiting) != 1 || all.Key[0].Waiting[0] != (httpapi.ConcurrencyKeyWait{Key: "example.com", Running: 1, Waiting: 3}) {
		t.Errorf("key limits: %+v", all.Key)
	}

	code, body = get("/api/limits?top=1")
	var one httpapi.Limits
	if err := json.Unmarshal([]byte(body), &one); code != 200 || err != nil || len(one.Rate) != 1 || len(one.Rate[0].Waiting) != 1 || one.Rate[0].Waiting[0].Key != "acme" {
		t.Errorf("top=1: %d %s", code, body)
	}

	if code, body = get("/api/metrics"); code != 200 || !strings.Contains(body, `"rateLimited":3,"keyLimited":3`) {
		t.Errorf("metrics: %d %s", code, body)
	}

	for _, c := range []struct{ id, want string }{
		{ids["acme-1"], `"priority":5,"rateLimit":{"name":"openai","key":"acme"}`},
		{ids["crawl-1"], `"priority":3,"keyConcurrency":{"name":"crawl","key":"example.com"}`},
	} {
		code, body := get("/api/runs/" + c.id)
		if code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("run %s: %d, lacks %s: %s", c.id, code, c.want, body)
		}
	}
	code, body = get("/api/runs?status=idle&order=oldest&limit=1000")
	var page httpapi.RunPage
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("runs: %d %s", code, body)
	}
	flows := map[string]int{}
	for _, r := range page.Runs {
		switch {
		case r.RateLimit != nil && r.KeyConcurrency == nil && r.Priority == 0:
			flows["rate "+r.RateLimit.Name+" "+r.RateLimit.Key]++
		case r.KeyConcurrency != nil && r.RateLimit == nil && r.Priority == 3:
			flows["key "+r.KeyConcurrency.Name+" "+r.KeyConcurrency.Key]++
		default:
			t.Errorf("idle run listed with %+v", r)
		}
	}
	if want := map[string]int{"rate openai acme": 2, "rate openai globex": 1, "key crawl example.com": 3}; len(flows) != len(want) ||
		flows["rate openai acme"] != 2 || flows["rate openai globex"] != 1 || flows["key crawl example.com"] != 3 {
		t.Errorf("the idle runs' limits and keys in the listing: %v, want %v", flows, want)
	}
	// The detail of a held-back run says what holds it.
	seen := map[string]bool{}
	for _, r := range page.Runs {
		if r.Waiting != "" {
			t.Errorf("a listing carries the waiting reason: %+v", r)
		}
		_, body := get("/api/runs/" + r.ID)
		var detail httpapi.RunDetail
		if err := json.Unmarshal([]byte(body), &detail); err != nil {
			t.Fatal(err)
		}
		d := detail.Run
		switch {
		case r.RateLimit != nil && d.Waiting == "rate limit" && d.WaitingUntil != nil:
		case r.KeyConcurrency != nil && d.Waiting == "key concurrency" && d.WaitingUntil == nil:
		default:
			t.Errorf("run %s held back: waiting %q until %v", r.ID, d.Waiting, d.WaitingUntil)
		}
		seen[d.Waiting] = true
	}
	if !seen["rate limit"] || !seen["key concurrency"] {
		t.Errorf("waiting reasons seen: %v", seen)
	}
}

// TestLimitsRouteEmpty: without limits the answer has empty lists (not
// null), and on a shared store it says why no key is listed.
func TestLimitsRouteEmpty(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "GET", "/api/limits", "")
	if code != 200 || body != `{"local":true,"rate":[],"key":[]}`+"\n" {
		t.Errorf("no limits: %d %q", code, body)
	}

	eng, err := yella.New(yella.Config{Store: &sharedStore{Store: memstore.New()}, Owner: "api-engine"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "crawl", On: "site:queued", KeyConcurrency: &yella.KeyConcurrency{Max: 2, Key: yella.KeyFromPayload("site")},
		Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	defer api.Close()
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/api/limits", nil))
	var got httpapi.Limits
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != 200 || err != nil || got.Local || got.Note != httpapi.SharedLimitsNote ||
		len(got.Key) != 1 || got.Key[0].Name != "crawl" || got.Key[0].Max != 2 || got.Key[0].Waiting == nil {
		t.Errorf("shared store: %d %s", w.Code, w.Body.String())
	}
}

// TestLimitsQuery: top is 1 to MaxLimitsTop, once; anything else is a 400
// INVALID_QUERY whose message names the parameter.
func TestLimitsQuery(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		query string
		want  string // "" for a 200
	}{
		{"", ""},
		{"?top=1", ""},
		{"?top=100", ""},
		{"?top=0", "top must be a number from 1 to 100"},
		{"?top=101", "top must be a number from 1 to 100"},
		{"?top=-3", "top must be a number from 1 to 100"},
		{"?top=ten", `top must be a number from 1 to 100, got "ten"`},
		{"?top=", "top must be a number from 1 to 100"},
		{"?top=99999999999999999999", "top must be a number from 1 to 100"},
		{"?top=1&top=2", "top is given 2 times"},
		{"?limit=5", `unknown parameter "limit" (limits takes top)`},
	} {
		code, body := f.do(t, "GET", "/api/limits"+c.query, "")
		var e httpapi.ErrorBody
		json.Unmarshal([]byte(body), &e)
		switch {
		case c.want == "" && code != 200:
			t.Errorf("%s: %d %s", c.query, code, body)
		case c.want != "" && (code != 400 || e.Error.Code != "INVALID_QUERY" || !strings.Contains(e.Error.Message, c.want)):
			t.Errorf("%s: %d %s, want 400 INVALID_QUERY with %q", c.query, code, body, c.want)
		}
	}
}

func FuzzParseLimitsQuery(f *testing.F) {
	for _, s := range []string{"top=10", "top=0", "top=101", "top=x", "top=1&top=1", "limit=3", "%zz", "top=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		top, err := httpapi.ParseLimitsQuery(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if top < 1 || top > httpapi.MaxLimitsTop {
			t.Fatalf("%q: top %d accepted", raw, top)
		}
	})
}
