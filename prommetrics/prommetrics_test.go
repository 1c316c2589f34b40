package prommetrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExporter(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "ok", On: "a", Run: func(c *yella.Ctx) yella.Result {
		yella.Effect(c, "fx", func(context.Context) (int, error) { return 1, nil })
		return c.OK(nil)
	}})
	eng.Register(yella.Process{Name: "bad", On: "b", Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(time.Millisecond)},
		Run: func(c *yella.Ctx) yella.Result { return c.Error(errors.New("boom")) }})
	eng.Register(yella.Process{Name: "capped", On: "c", Concurrency: 1, Overflow: yella.Drop, Run: func(c *yella.Ctx) yella.Result {
		time.Sleep(20 * time.Millisecond)
		return c.OK(nil)
	}})
	x := prommetrics.New(eng, prommetrics.Options{
		Writer: func() prommetrics.WriterStats {
			return prommetrics.WriterStats{Commits: 10, Commands: 40, Busy: 2 * time.Second, Deadlocks: 3}
		},
		Replication: func() prommetrics.ReplicationState {
			return prommetrics.ReplicationState{LastSync: time.Unix(1700000000, 0), Lag: 1500 * time.Millisecond, Stalled: true}
		},
	})
	defer x.Close()
	ctx := context.Background()
	eng.Register(yella.Process{Name: "later", On: "d", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	em, _ := eng.Emit(ctx, "d", nil) // cancelled before it runs
	if _, err := eng.Cancel(ctx, em.Runs[0]); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	for range 3 {
		eng.Emit(ctx, "a", nil)
	}
	eng.Emit(ctx, "b", nil)
	eng.Emit(ctx, "c", nil)
	eng.Emit(ctx, "c", nil) // dropped: at its cap
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`yella_runs_total{event="completed",process="ok"} 3`,
		`yella_runs_total{event="retried",process="bad"} 1`,
		`yella_runs_total{event="dead_letter",process="bad"} 1`,
		`yella_queue_runs{status="completed"} 4`,
		`yella_queue_runs{status="dead-letter"} 1`,
		`yella_queue_runs{status="cancelled"} 1`,
		`yella_queue_runs{status="errored"} 0`,
		`yella_runs_total{event="cancelled",process="later"} 1`,
		`yella_drops_total{process="capped"} 1`,
		`yella_run_duration_seconds_count{outcome="completed",process="ok"} 3`,
		`yella_effect_duration_seconds_count{outcome="completed",process="ok"} 3`,
		`yella_effects_total{outcome="completed",process="ok"} 3`,
		`yella_process_concurrency_limit{process="capped"} 1`,
		`yella_store_commits_total 10`,
		`yella_store_commands_total 40`,
		`yella_store_commit_seconds_total 2`,
		`yella_store_deadlocks_total 3`,
		`yella_replication_lag_seconds 1.5`,
		`yella_replication_last_sync_timestamp_seconds 1.7e+09`,
		`yella_replication_stalled 1`,
		`yella_up 1`,
		`yella_store_up 1`,
		`yella_store_failures_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if problems, err := testutil.GatherAndLint(x.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// heartbeatFails fails the engine's heartbeats while down is set.
type heartbeatFails struct {
	store.Store
	down *atomic.Bool
}

func (s heartbeatFails) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	if s.down.Load() {
		return nil, errors.New("connection refused")
	}
	return s.Store.Heartbeat(ctx, owner, now, until)
}

// TestStoreUp: yella_store_up is 0 while the engine's store calls fail
// (and yella_store_failures_total counts them), 1 once they succeed again.
func TestStoreUp(t *testing.T) {
	var down atomic.Bool
	eng, err := yella.New(yella.Config{Store: heartbeatFails{memstore.New(), &down}, HeartbeatInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
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
	wait := func(up bool) {
		deadline := time.Now().Add(10 * time.Second) // heartbeats come every millisecond
		for eng.StoreHealth().Up != up {
			if time.Now().After(deadline) {
				t.Fatalf("store never reported up=%v", up)
			}
			time.Sleep(time.Millisecond)
		}
	}
	down.Store(true)
	wait(false)
	if text := scrape(); !strings.Contains(text, "yella_store_up 0") || strings.Contains(text, "yella_store_failures_total 0\n") {
		t.Errorf("during the outage the exposition lacks yella_store_up 0 or a failure count")
	}
	down.Store(false)
	wait(true)
	if text := scrape(); !strings.Contains(text, "yella_store_up 1") {
		t.Errorf("after the outage the exposition lacks yella_store_up 1")
	}
}
