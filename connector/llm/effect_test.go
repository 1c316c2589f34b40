package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/llm"
	"github.com/yella-go/yella/store/memstore"
)

// runOnce runs an engine on an in-memory store with p listening to "ask",
// emits "ask" once and returns the run it admitted, once it ended.
func runOnce(t *testing.T, p yella.Process) (*yella.Engine, yella.Run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	p.Name, p.On = "agent", "ask"
	if err := eng.Register(p); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	runs, err := eng.EmitAndWait(ctx, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	return eng, runs[0]
}

// Chat is one idempotent effect: its completion is stored once whole and
// replayed by the next attempt without calling the API (or OnDelta); the
// request carried the effect's idempotency key.
func TestChatReplaysCompletion(t *testing.T) {
	fake := newFake(t, reply("Hello", " there"))
	cl := newClient(t, llm.Config{BaseURL: fake.URL, Prices: map[string]llm.Price{"fake-model": {Input: 1, Output: 2}}})
	var d deltas
	var first llm.Completion
	eng, run := runOnce(t, yella.Process{
		Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(0)},
		Run: func(c *yella.Ctx) yella.Result {
			req := hello
			req.OnDelta = d.add
			comp, err := cl.Chat(c, "answer", req)
			if err != nil {
				return connector.Outcome(c, err)
			}
			if c.Attempt() == 1 {
				first = comp
				return c.Error(errors.New("fails after the call"))
			}
			if !reflectEqual(comp, first) {
				return c.Fail(errors.New("the replay differs from the first completion"))
			}
			return c.OK(comp.Message.Content)
		},
	})
	if run.Status != yella.StatusCompleted || string(run.Output) != `"Hello there"` || run.Attempts != 2 {
		t.Fatalf("run %s %s %s after %d attempts", run.Status, run.Output, run.Error, run.Attempts)
	}
	reqs := fake.requests()
	if len(reqs) != 1 {
		t.Fatalf("the API was called %d times, want once", len(reqs))
	}
	if k := reqs[0].Header.Get("Idempotency-Key"); !strings.HasPrefix(k, "yella-"+run.ID+"-") {
		t.Errorf("Idempotency-Key %q, want the effect's key", k)
	}
	if d.String() != "Hello| there" {
		t.Errorf("OnDelta saw %q, want the pieces once", d.String())
	}
	effs, err := eng.Effects(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(effs) != 1 || effs[0].Status != yella.EffectStatusCompleted {
		t.Fatalf("effects %+v", effs)
	}
	var stored llm.Completion
	if err := json.Unmarshal(effs[0].Output, &stored); err != nil {
		t.Fatal(err)
	}
	wantCost := (10*1.0 + 2*2.0) / 1e6
	if stored.Message.Content != "Hello there" || stored.Usage.TotalTokens != 12 || stored.CostUSD != wantCost {
		t.Errorf("stored %s; want the text, usage and cost %g", effs[0].Output, wantCost)
	}
}

func reflectEqual(a, b llm.Completion) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A failed call is recorded as the effect's error and retried by the
// process's policy; a final one ends the run at once.
func TestChatErrorsDriveRetries(t *testing.T) {
	t.Run("retryable", func(t *testing.T) {
		fake := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				apiError(w, 503, "server_error", "", "overloaded")
				return
			}
			reply("fine")(n, w, r)
		})
		cl := newClient(t, llm.Config{BaseURL: fake.URL})
		_, run := runOnce(t, yella.Process{Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(0)},
			Run: func(c *yella.Ctx) yella.Result {
				comp, err := cl.Chat(c, "answer", hello)
				if err != nil {
					return connector.Outcome(c, err)
				}
				return c.OK(comp.Message.Content)
			}})
		if run.Status != yella.StatusCompleted || string(run.Output) != `"fine"` || len(fake.requests()) != 2 {
			t.Errorf("run %s %s after %d calls", run.Status, run.Output, len(fake.requests()))
		}
	})
	t.Run("final", func(t *testing.T) {
		var calls atomic.Int32
		fake := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			apiError(w, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
		})
		cl := newClient(t, llm.Config{BaseURL: fake.URL})
		_, run := runOnce(t, yella.Process{Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(0)},
			Run: func(c *yella.Ctx) yella.Result {
				_, err := cl.Chat(c, "answer", hello)
				return connector.Outcome(c, err)
			}})
		if run.Status == yella.StatusCompleted || calls.Load() != 1 || !strings.Contains(run.Error, "Incorrect API key provided") {
			t.Errorf("run %s (%s) after %d calls; want it failed once with the provider's message", run.Status, run.Error, calls.Load())
		}
	})
}

// The metrics count calls by outcome, tokens by kind and cost, per model.
func TestMetrics(t *testing.T) {
	fake := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 2:
			apiError(w, 429, "requests", "rate_limit_exceeded", "slow down")
		case 3:
			apiError(w, 400, "invalid_request_error", "", "bad")
		case 4:
			stream(w, text("half"))
			drop(w)
		default:
			reply("a", "b", "c")(n, w, r)
		}
	})
	m := llm.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, llm.Config{BaseURL: fake.URL, Metrics: m, Prices: map[string]llm.Price{"fake-model": {Input: 3, Output: 15}}})
	for range 5 {
		cl.Complete(context.Background(), hello)
	}
	want := `
# HELP yella_llm_cost_usd_total Cost of chat completions in US dollars, by model, from the configured prices.
# TYPE yella_llm_cost_usd_total counter
yella_llm_cost_usd_total{model="fake-model"} 0.00015
# HELP yella_llm_requests_total Chat completion calls by model and outcome (ok, rate_limited, retryable, permanent).
# TYPE yella_llm_requests_total counter
yella_llm_requests_total{model="fake-model",outcome="ok"} 2
yella_llm_requests_total{model="fake-model",outcome="permanent"} 1
yella_llm_requests_total{model="fake-model",outcome="rate_limited"} 1
yella_llm_requests_total{model="fake-model",outcome="retryable"} 1
# HELP yella_llm_tokens_total Tokens used by chat completions, by model and kind (prompt, completion).
# TYPE yella_llm_tokens_total counter
yella_llm_tokens_total{kind="completion",model="fake-model"} 6
yella_llm_tokens_total{kind="prompt",model="fake-model"} 20
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
