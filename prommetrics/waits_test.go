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

// TestWaitingRuns: waiting runs are a status of yella_queue_runs, and the
// waits, the signals that end them and the waits an operator ends are
// counted by process in yella_runs_total.
func TestWaitingRuns(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "approve", On: "approval", Run: func(c *yella.Ctx) yella.Result {
		var key string
		if err := c.Decode(&key); err != nil {
			return c.Fail(err)
		}
		if _, _, err := yella.WaitFor[string](c, "approval", key, 0); err != nil {
			return c.Error(err)
		}
		return c.OK(nil)
	}})
	x := prommetrics.New(eng, prommetrics.Options{})
	defer x.Close()
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	scrape := func() string {
		w := httptest.NewRecorder()
		x.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	until := func(want ...string) string {
		deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
		for {
			text := scrape()
			missing := ""
			for _, w := range want {
				if !strings.Contains(text, w+"\n") {
					missing = w
				}
			}
			if missing == "" {
				return text
			}
			if time.Now().After(deadline) {
				t.Fatalf("the exposition never had %q", missing)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var ids []string
	for _, key := range []string{"k1", "k2", "k3"} {
		em, err := eng.Emit(ctx, "approval", key)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, em.Runs[0])
	}
	until(`yella_queue_runs{status="waiting"} 3`, `yella_runs_total{event="waiting",process="approve"} 3`)
	if _, err := eng.Signal(ctx, "k1", "yes"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.EndWait(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	until(`yella_queue_runs{status="waiting"} 1`, `yella_queue_runs{status="completed"} 2`,
		`yella_runs_total{event="signalled",process="approve"} 1`, `yella_runs_total{event="wait_ended",process="approve"} 1`)
}
