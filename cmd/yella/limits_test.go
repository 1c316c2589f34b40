package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// limitsServer serves the API of a started engine on a fake clock whose
// runs (all of priority 2) are held back: the rate limit "openai" (1 per
// hour per tenant, shared by two processes) holds two runs of acme and
// one of a tenant whose key has a space and a control character; "crawl"
// (one running per site) runs one run of example.com and holds two. It
// returns the server's URL and the first run's id. Without limits it
// serves an engine with none.
func limitsServer(t *testing.T, withLimits bool) (url, first string) {
	t.Helper()
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ok := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	openai := func() *yella.RateLimit {
		return &yella.RateLimit{Name: "openai", Limit: 1, Per: time.Hour, Key: yella.KeyFromPayload("tenant")}
	}
	procs := []yella.Process{{Name: "plain", On: "plain", Run: ok}}
	if withLimits {
		procs = append(procs,
			yella.Process{Name: "summarize", On: "doc:added", RateLimit: openai(), Run: ok},
			yella.Process{Name: "classify", On: "doc:tagged", RateLimit: openai(), Run: ok},
			yella.Process{Name: "crawl", On: "site:queued", KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("site")},
				Run: func(c *yella.Ctx) yella.Result { <-release; return c.OK(nil) }},
			yella.Process{Name: "notify", On: "notify", KeyConcurrency: &yella.KeyConcurrency{Max: 4, Key: yella.KeyFromPayload("user")}, Run: ok})
	}
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		close(release)
		srv.Close()
		api.Close()
		eng.Stop(ctx)
	})
	if !withLimits {
		return srv.URL, ""
	}
	for _, e := range []struct {
		event   string
		payload map[string]string
	}{
		{"doc:added", map[string]string{"tenant": "acme"}}, {"doc:tagged", map[string]string{"tenant": "acme"}},
		{"doc:added", map[string]string{"tenant": "acme"}}, {"doc:added", map[string]string{"tenant": "big co\x1b[2J"}},
		{"doc:added", map[string]string{"tenant": "big co\x1b[2J"}},
		{"site:queued", map[string]string{"site": "example.com"}}, {"site:queued", map[string]string{"site": "example.com"}},
		{"site:queued", map[string]string{"site": "example.com"}},
	} {
		em, err := eng.Emit(ctx, e.event, e.payload, yella.Priority(2))
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = em.Runs[0]
		}
	}
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Dispatcher.RateLimited == 3 && m.Dispatcher.KeyLimited == 2 &&
			m.Queue[yella.StatusRunning] == 1 && m.Queue[yella.StatusCompleted] == 2 && m.Queue[yella.StatusIdle] == 5 { // and the store's counts settled
			return srv.URL, first
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine never held the runs back: %+v", m.Dispatcher)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLimitsCommand: yella limits reads a server's limits: a table of the
// rate limits and one of the per-key concurrency bounds, each waiting key
// a line (an odd key quoted, so it neither breaks the table nor reaches
// the terminal), --top, --json; a server without limits says so; a
// database opened directly is refused with the way to ask a server; bad
// flags are usage errors naming the flag; runs show prints a run's
// priority and keys (golden transcript).
func TestLimitsCommand(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_SERVER", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	deferredDB(t, s.db)
	busy, first := limitsServer(t, true)
	none, _ := limitsServer(t, false)
	text, err := s.run("limits", "--server", busy)
	if err != nil {
		t.Fatalf("limits: %v\n%s", err, text)
	}
	for _, want := range []string{"openai", "1 per 1h", "classify, summarize", `"big co\x1b[2J"`, "example.com", "notify"} {
		if !strings.Contains(text, want) {
			t.Errorf("limits output lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("a key's control character reached the output")
	}
	for _, args := range [][]string{
		{"limits", "--server", busy, "--top", "1"},
		{"limits", "--server", busy, "--json", "--top", "1"},
		{"limits", "--server", none},
		{"limits", "--top", "5"},
		{"limits", "--server", busy, "--top", "0"},
		{"limits", "--server", busy, "--top", "101"},
		{"limits", "--server", busy, "now"},
		{"runs", "show", first, "--server", busy},
	} {
		s.run(args...)
	}
	golden(t, "limits", strings.NewReplacer(busy, "<busy>", none, "<none>").Replace(s.out.String()))
}
