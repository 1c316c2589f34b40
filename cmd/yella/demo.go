package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/bench"
)

// The built-in demo automations of "yella serve": the benchmark suite's
// API-mixed workload (webhooks, billing syncs, document indexing and
// approvals, against simulated downstreams with realistic latencies and
// failure rates).

var demoScenario = bench.Scenario{ID: "demo", Family: "api-mixed", Concurrency: 50,
	Retry: bench.RetrySpec{Max: 2, Base: 400 * time.Millisecond}}

// registerDemo registers the demo processes on eng: the workload's, and
// a legacy export whose server is down, so the dead letters have content.
func registerDemo(eng *yella.Engine, _ any) error {
	if err := bench.NewWorkload(demoScenario, nil).Register(eng); err != nil {
		return err
	}
	return eng.Register(yella.Process{Name: "legacy-export", On: "export:requested",
		Retry: &yella.Retry{Max: 2, Backoff: yella.Exponential(400 * time.Millisecond)},
		Run: func(c *yella.Ctx) yella.Result {
			time.Sleep(50 * time.Millisecond)
			return c.Error(errors.New("legacy FTP server unreachable"))
		}})
}

// runDemo emits demo events at about rate per second (with random gaps)
// and approves deferred approvals after a minute, as a person would, until
// ctx ends.
func runDemo(ctx context.Context, eng *yella.Engine, rate float64) {
	wl := bench.NewWorkload(demoScenario, nil)
	approve := time.NewTicker(10 * time.Second)
	defer approve.Stop()
	for {
		gap := time.Duration(rand.ExpFloat64() / rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return
		case <-approve.C:
			approveOld(ctx, eng)
		case <-time.After(gap):
			if rand.IntN(40) == 0 {
				eng.Emit(ctx, "export:requested", map[string]string{"report": "monthly"})
				continue
			}
			s := wl.NextSeed()
			eng.Emit(ctx, s.Event, s.Payload)
		}
	}
}

func approveOld(ctx context.Context, eng *yella.Engine) {
	page, err := eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusDeferred}, Order: yella.OldestFirst, Limit: 50})
	if err != nil {
		return
	}
	for _, r := range page.Runs {
		if time.Since(r.CompletedAt) > time.Minute {
			eng.Resume(ctx, r.ID, map[string]string{"approvedBy": "demo"})
		}
	}
}
