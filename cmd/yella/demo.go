package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/bench"
	"github.com/yella-go/yella/store/memstore"
)

// The built-in demo automations of "yella serve": the benchmark suite's
// API-mixed workload (webhooks, billing syncs, document indexing and
// approvals, against simulated downstreams with realistic latencies and
// failure rates), with approvals that wait for a person, and a legacy
// export whose server is down, so the dead letters have content.

var demoScenario = bench.Scenario{ID: "demo", Family: "api-mixed", Concurrency: 50,
	Retry: bench.RetrySpec{Max: 2, Base: 400 * time.Millisecond}}

// demoWorkload is the demo's workload: approvals defer until resumed.
func demoWorkload() *bench.Workload {
	wl := bench.NewWorkload(demoScenario, nil)
	wl.DeferApprovals = true
	return wl
}

// registerDemo registers the demo processes on eng.
func registerDemo(eng *yella.Engine) error {
	if err := demoWorkload().Register(eng); err != nil {
		return err
	}
	return eng.Register(yella.Process{Name: "legacy-export", On: "export:requested",
		Retry: &yella.Retry{Max: 2, Backoff: yella.Exponential(400 * time.Millisecond)},
		Run: func(c *yella.Ctx) yella.Result {
			time.Sleep(50 * time.Millisecond)
			return c.Error(errors.New("legacy FTP server unreachable"))
		}})
}

// demoProcessNames are the names of the demo's processes.
func demoProcessNames() []string {
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return nil
	}
	if registerDemo(eng) != nil {
		return nil
	}
	var names []string
	for _, p := range eng.Processes() {
		names = append(names, p.Name)
	}
	return names
}

// approveAfter is how long a demo approval waits before the demo's
// approver looks at it.
const approveAfter = 20 * time.Second

// runDemo emits demo events at about rate per second (with random gaps)
// and, as an approver would, resumes the deferred approvals asked by ops
// after approveAfter, until ctx ends. The others (finance's, or any
// without an actor) wait for a person: "yella resume ID".
func runDemo(ctx context.Context, eng *yella.Engine, rate float64) {
	wl := demoWorkload()
	approve := time.NewTicker(5 * time.Second)
	defer approve.Stop()
	var a approver
	for {
		gap := time.Duration(rand.ExpFloat64() / rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return
		case <-approve.C:
			a.pass(ctx, eng, time.Now())
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

// approver resumes the demo's deferred approvals that ops asked for. It
// remembers how far it has decided, so each pass reads only the new ones.
type approver struct{ after int64 }

// approvedBy is who approves an approval, "" if it waits for a person.
func approvedBy(r yella.Run) string {
	var in struct {
		Actor string `json:"actor"`
	}
	json.Unmarshal(r.Payload, &in)
	if in.Actor == "ops" {
		return "demo-approver"
	}
	return ""
}

// pass walks the deferred approvals in order and resumes those of ops
// older than approveAfter; it stops at the first one too young to decide.
func (a *approver) pass(ctx context.Context, eng *yella.Engine, now time.Time) {
	for {
		q := yella.RunQuery{Status: []yella.Status{yella.StatusDeferred}, Process: "approval-stage", Order: yella.OldestFirst, Limit: 100}
		if a.after > 0 {
			q.Cursor = "s" + strconv.FormatInt(a.after, 10) // the cursor format of RunPage.Next
		}
		page, err := eng.Runs(ctx, q)
		if err != nil || len(page.Runs) == 0 {
			return
		}
		for _, r := range page.Runs {
			by := approvedBy(r)
			if by != "" && now.Sub(r.CompletedAt) < approveAfter {
				return // decided on a later pass
			}
			if by != "" {
				eng.Resume(ctx, r.ID, map[string]string{"approvedBy": by})
			}
			a.after = r.Seq
		}
	}
}
