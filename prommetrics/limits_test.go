package prommetrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/store/memstore"
)

// TestLimitedRunsMetrics: the runs a rate limit holds back and those
// waiting on their key's concurrency bound are reported as the dispatcher
// kinds rate_limited and key_limited, with the counts the engine reports.
func TestLimitedRunsMetrics(t *testing.T) {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	for _, p := range []yella.Process{
		{Name: "call", On: "call", RateLimit: &yella.RateLimit{Limit: 1, Per: time.Hour, Key: yella.KeyFromPayload("tenant")},
			Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
		{Name: "crawl", On: "crawl", KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("tenant")},
			Run: func(c *yella.Ctx) yella.Result { <-release; return c.OK(nil) }},
	} {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	defer close(release)
	x := prommetrics.New(eng, prommetrics.Options{})
	defer x.Close()
	for range 3 {
		eng.Emit(ctx, "call", map[string]string{"tenant": "a"})
	}
	for range 4 {
		eng.Emit(ctx, "crawl", map[string]string{"tenant": "b"})
	}
	// One call starts and two wait an hour; one crawl runs and three wait.
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Dispatcher.RateLimited == 2 && m.Dispatcher.KeyLimited == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine never held the runs back: %+v", m.Dispatcher)
		}
		time.Sleep(5 * time.Millisecond)
	}
	text := exposition(t, x)
	for _, want := range []string{`yella_dispatcher_runs{kind="rate_limited"} 2`, `yella_dispatcher_runs{kind="key_limited"} 3`} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}

// TestLimitedRunsMetricsZero: without limits both kinds are reported as 0,
// so a dashboard's query finds the series.
func TestLimitedRunsMetricsZero(t *testing.T) {
	text := scrapeText(t, memstore.New())
	for _, want := range []string{`yella_dispatcher_runs{kind="rate_limited"} 0`, `yella_dispatcher_runs{kind="key_limited"} 0`} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}

// exposition is x's text exposition.
func exposition(t *testing.T, x *prommetrics.Exporter) string {
	t.Helper()
	w := httptest.NewRecorder()
	x.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("scrape: %d", w.Code)
	}
	return w.Body.String()
}
