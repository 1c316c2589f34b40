//go:build trust

package trust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/bench"
	"github.com/yella-go/yella/internal/tools/crashtest"
)

// T1: SIGKILL at every commit boundary (the SQLite store's crash matrix).
func TestCrashMatrix(t *testing.T) {
	r := newResult(t, "crash-matrix")
	runs, ks := 20, []int{1, 7}
	if *long {
		runs, ks = 40, []int{1, 2, 3, 7, 13, 29}
	}
	results, err := crashtest.Matrix(t.TempDir(), runs, ks)
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	fenced, held := 0, 0
	for _, res := range results {
		r.check(t, fmt.Sprintf("%s/%d", res.Point, res.K), len(res.Failures) == 0, "%s; %d held run(s) claimed again after %v %v",
			res.Report, res.Held, res.Reclaim.Round(time.Millisecond), res.Failures)
		worst = max(worst, res.Reclaim)
		fenced += res.Report.Fenced
		held += res.Held
	}
	r.figure("points", float64(len(results)))
	r.figure("held_runs", float64(held))
	r.figure("held_run_reclaimed_max_ms", float64(worst)/float64(time.Millisecond))
	r.figure("fenced_runs", float64(fenced))
}

// T2: random SIGKILLs under live api-mixed load, each followed by a
// restart on the same file, then the total-queue check.
func TestRandomKill(t *testing.T) {
	r := newResult(t, "random-kill")
	kills := 10
	if *long {
		kills = 100
	}
	seed := seedFromEnv(t, r)
	rng := rand.New(rand.NewPCG(seed, 1))
	var at []time.Duration
	next := 3 * time.Second
	for range kills {
		next += time.Duration(1500+rng.IntN(2500)) * time.Millisecond
		at = append(at, next)
	}
	load := next + 3*time.Second
	scn := bench.Scenario{ID: "trust-random-kill", Label: "Random kill -9 under live load", Family: "api-mixed", Kind: "recovery", Visibility: "internal",
		Concurrency: 50, Retry: bench.RetrySpec{Max: 3, Base: 200 * time.Millisecond},
		Phases: []bench.Phase{{Label: "load", Rate: 40, Dur: load}, {Label: "cool-down", Dur: 5 * time.Second}}}
	dir := t.TempDir()
	rep, err := bench.RunScenario(context.Background(), scn, bench.Options{Scale: 1, DBDir: dir, Kills: at, Machine: bench.MachineInfo()})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "trust-random-kill")
	chk, err := crashtest.Check(base+".db", base+".witness", base+".acks", "seed-")
	if err != nil {
		t.Fatal(err)
	}
	r.check(t, "every kill happened and was followed by a restart", rep.Totals.Restarts == kills, "%d restarts, %d kills scheduled", rep.Totals.Restarts, kills)
	r.check(t, "0 acknowledged admissions lost", len(chk.Lost) == 0, "%d of %d lost", len(chk.Lost), chk.Acked)
	r.check(t, "0 unexpected runs", len(chk.Unexpected) == 0, "%d", len(chk.Unexpected))
	r.check(t, "0 runs completed twice", len(chk.CompletedTwice) == 0, "%d", len(chk.CompletedTwice))
	r.check(t, "0 effect bodies re-run", len(chk.EffectReruns) == 0, "%v", chk.EffectReruns)
	r.check(t, "0 runs stuck (all terminal)", len(chk.NotTerminal) == 0, "%d", len(chk.NotTerminal))
	r.check(t, "fencing consistent (fenced runs hold a started effect; no completed run does)", len(chk.BadFences) == 0, "%v", chk.BadFences)
	r.check(t, "integrity_check ok", chk.Integrity == "ok", "%s", chk.Integrity)
	var recov []float64
	for _, k := range rep.Recovery.Kills {
		recov = append(recov, k.FirstRunMs)
	}
	r.check(t, "every restart resumed work within 1 s", percentile(recov, 1) <= 1000, "slowest %.0f ms", percentile(recov, 1))
	r.figure("kills", float64(len(rep.Recovery.Kills)))
	r.figure("acked_seeds", float64(chk.Acked))
	r.figure("runs", float64(chk.Runs))
	r.figure("runs_completed", float64(chk.Completed))
	r.figure("effects_fenced", float64(chk.Fenced))
	r.figure("effect_executions", float64(chk.Executions))
	r.figure("runs_failed_holding_started_effect", float64(chk.Unresolved))
	r.figure("recovery_first_run_p50_ms", percentile(recov, 0.5))
	r.figure("recovery_first_run_max_ms", percentile(recov, 1))
	r.figure("runs_reclaimed_last_restart", float64(rep.Recovery.Reclaimed))
	if dir := os.Getenv("TRUST_REPORT_DIR"); dir != "" {
		if err := rep.Write(dir); err != nil {
			t.Error(err)
		}
	}
}
