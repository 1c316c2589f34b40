package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// Every goroutine an engine or a handler starts must be gone at the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// fenceID is a run planted in the store as if an engine had died inside
// its effect: the engine under test finds the effect started and fences it.
const fenceID = "01900000-0000-7000-8000-00000000fe0c"

// fixture is an engine on a fake clock with one run of each kind, and the
// dashboard over it.
type fixture struct {
	t   testing.TB
	st  *memstore.Store
	eng *yella.Engine
	clk *clock.Fake
	h   http.Handler
	// Runs by role: ok (completed, with a follow-up), next (the follow-up,
	// with an effect), failed (errored), dead (dead letter), deferred.
	ok, next, failed, dead, deferred string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	plantFenced(t, st)
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	register(t, eng, clk)
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		eng.Stop(sctx)
	})
	f := &fixture{t: t, st: st, eng: eng, clk: clk}
	f.drain() // the planted run is reclaimed and fenced
	emit := func(event string, payload any) yella.Run {
		t.Helper()
		clk.Advance(time.Second)
		runs, err := eng.EmitAndWait(ctx, event, payload)
		if err != nil || len(runs) != 1 {
			t.Fatalf("emit %s: %v %v", event, runs, err)
		}
		return runs[0]
	}
	f.ok = emit("order:placed", map[string]any{"orderId": 42, "apiKey": "sk-live-123", "note": "<script>alert(1)</script>"}).ID
	chain, err := eng.Chain(ctx, f.ok)
	if err != nil || len(chain) != 2 {
		t.Fatalf("chain of %s: %v %v", f.ok, chain, err)
	}
	f.next = chain[1].ID
	f.failed = emit("signup:received", map[string]string{"email": "not-an-email"}).ID
	f.dead = emit("contact:updated", map[string]int{"contactId": 7}).ID
	f.deferred = emit("post:drafted", map[string]string{"title": "Launch"}).ID
	clk.Advance(time.Second)
	f.h, err = dashboard.NewAt(eng, dashboard.Options{Brand: "Yella"}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	f.want(f.ok, yella.StatusCompleted)
	f.want(f.next, yella.StatusCompleted)
	f.want(f.failed, yella.StatusErrored)
	f.want(f.dead, yella.StatusDead)
	f.want(f.deferred, yella.StatusDeferred)
	f.want(fenceID, yella.StatusFenced)
	return f
}

func register(t testing.TB, eng *yella.Engine, clk *clock.Fake) {
	procs := []yella.Process{
		{Name: "intake", On: "order:placed", Emits: []string{"order:accepted"}, Version: "3",
			Run: func(c *yella.Ctx) yella.Result {
				clk.Advance(30 * time.Millisecond)
				return c.OK(map[string]any{"accepted": true, "token": "tok-secret"}, yella.Then("order:accepted"))
			}},
		{Name: "ship", On: "order:accepted", Concurrency: 5, Overflow: yella.Queue(10),
			Run: func(c *yella.Ctx) yella.Result {
				c.SetContext("carrier", "ups")
				label, err := yella.Effect(c, yella.MakeKey("label", "42"), func(context.Context) (string, error) {
					clk.Advance(120 * time.Millisecond)
					return "1Z999", nil
				})
				if err != nil {
					return c.Error(err)
				}
				return c.OK(map[string]string{"label": label})
			}},
		{Name: "validate", On: "signup:received", Run: func(c *yella.Ctx) yella.Result {
			return c.Fail(errors.New("email is invalid"), yella.WithCode(yella.CodeSchemaValidationFailed))
		}},
		{Name: "sync-crm", On: "contact:updated", Retry: &yella.Retry{Max: 0},
			Run: func(c *yella.Ctx) yella.Result { return c.Error(errors.New("CRM API timeout")) }},
		{Name: "review", On: "post:drafted", Emits: []string{"post:approved"},
			Run: func(c *yella.Ctx) yella.Result {
				return c.Defer("post:approved", map[string]string{"title": "Launch post"})
			}},
		{Name: "publish", On: "post:approved", Emits: []string{"post:published"},
			Run: func(c *yella.Ctx) yella.Result {
				var in struct{ Title, Reviewer string }
				c.Decode(&in)
				return c.OK(in.Title + " approved by " + in.Reviewer)
			}},
		{Name: "charge", On: "payment:requested", Run: func(c *yella.Ctx) yella.Result {
			receipt, err := yella.Effect(c, "charge", func(context.Context) (string, error) { return "r-new", nil })
			if err != nil {
				return c.Error(err)
			}
			return c.OK(receipt)
		}},
	}
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
}

// plantFenced leaves a run claimed by an engine that is gone, inside its
// effect "charge", with an expired lease.
func plantFenced(t testing.TB, st store.Store) {
	ctx, at := context.Background(), t0.Add(-time.Minute)
	_, err := st.Admit(ctx, store.Admission{Event: "payment:requested", Payload: json.RawMessage(`{"amount":1200}`),
		Runs: []store.NewRun{{ID: fenceID, Process: "charge"}}, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Claim(ctx, store.ClaimRequest{IDs: []string{fenceID}, Owner: "engine-gone", Now: at, LeaseUntil: at.Add(30 * time.Second)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v %v", runs, err)
	}
	if err := st.StartEffect(ctx, fenceID, runs[0].Epoch, "str:charge", at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) drain() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.eng.Drain(ctx); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) want(id string, st yella.Status) yella.Run {
	f.t.Helper()
	r, err := f.eng.Run(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	if r.Status != st {
		f.t.Fatalf("run %s (%s) is %s (%s), want %s", id, r.Process, r.Status, r.Error, st)
	}
	return r
}

// response is a finished request.
type response struct {
	Code int
	Body string
	H    http.Header
	Res  *http.Response
}

func (f *fixture) do(req *http.Request) response {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return response{Code: res.StatusCode, Body: string(b), H: res.Header, Res: res}
}

func (f *fixture) get(target string) response {
	f.t.Helper()
	return f.do(httptest.NewRequest("GET", target, nil))
}

// post submits a form as a same-origin browser would.
func (f *fixture) post(target string, form url.Values) response {
	f.t.Helper()
	req := httptest.NewRequest("POST", target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://example.com") // httptest's host
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return f.do(req)
}

func contains(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}
