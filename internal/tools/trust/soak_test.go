//go:build trust

package trust

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/bench"
	"github.com/yella-go/yella/internal/tools/report"
)

// TestSoak (T10) runs the api-mixed workload with retention on, in a child
// engine process on SQLite, and checks what a long run must not do: grow
// its memory, its WAL or its database without bound, or hit SQLite
// errors. The short form runs 75 s with 15 s retention; the long form runs
// at least 1,000,000 runs (about 70 minutes at 100 events/s) with 10
// minutes retention.
func TestSoak(t *testing.T) {
	r := newResult(t, "soak")
	// The warm-up ends once retention frees pages as fast as new runs take
	// them: a run is deleted by the first sweep after it has been complete
	// for the retention (sweeps come every retention/2, at most a minute
	// apart), and the database file grows only when a checkpoint copies
	// pages past its end, so the file reaches its steady size a little
	// later. The short form's file stops growing about 38 s in (2.5 times
	// its retention): its warm-up is 3 times the retention; the long form's
	// 20 minutes are twice its retention and 9 minutes past the sweep.
	rate, load, retention, warmup := 40.0, 75*time.Second, 15*time.Second, 45*time.Second
	if *long {
		rate, load, retention, warmup = 100, 70*time.Minute, 10*time.Minute, 20*time.Minute
	}
	scn := bench.Scenario{ID: "trust-soak", Label: "Soak, API mixed with retention", Family: "api-mixed", Kind: "soak", Visibility: "internal",
		Description: "The api-mixed workload at a steady rate with retention on.",
		Concurrency: 200, Retry: bench.RetrySpec{Max: 2, Base: 300 * time.Millisecond}, Retention: retention,
		Phases: []bench.Phase{{Label: "load", Rate: rate, Dur: load}, {Label: "cool-down", Dur: 10 * time.Second}}}
	rep, err := bench.RunScenario(context.Background(), scn, bench.Options{Scale: 1, DBDir: t.TempDir(), Machine: bench.MachineInfo(), Progress: progress()})
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("TRUST_REPORT_DIR"); dir != "" {
		if err := rep.Write(dir); err != nil {
			t.Error(err)
		}
	}
	var after []report.Sample // loaded samples after the warm-up
	var dbAtWarmup int64
	for _, s := range rep.Samples {
		if s.ElapsedS <= warmup.Seconds() {
			dbAtWarmup = s.DBBytes
			continue
		}
		if s.ElapsedS <= load.Seconds() {
			after = append(after, s)
		}
	}
	if len(after) == 0 {
		t.Fatal("no samples after the warm-up")
	}
	minRSS, maxRSS, maxWAL, maxDB := after[0].RSSBytes, after[0].RSSBytes, int64(0), int64(0)
	for _, s := range rep.Samples {
		maxWAL = max(maxWAL, s.WALBytes)
	}
	for _, s := range after {
		minRSS, maxRSS, maxDB = min(minRSS, s.RSSBytes), max(maxRSS, s.RSSBytes), max(maxDB, s.DBBytes)
	}
	runs := rep.Totals.RunsCompleted + rep.Totals.RunsErrored
	const mib = 1 << 20
	r.figure("runs", float64(runs))
	r.figure("runs_completed", float64(rep.Totals.RunsCompleted))
	r.figure("duration_s", rep.Totals.DurationS)
	r.figure("throughput_loaded_runs_per_s", rep.Totals.ThroughputLoad)
	r.figure("retention_s", retention.Seconds())
	r.figure("rss_min_after_warmup_mib", float64(minRSS)/mib)
	r.figure("rss_max_after_warmup_mib", float64(maxRSS)/mib)
	r.figure("wal_peak_mib", float64(maxWAL)/mib)
	r.figure("db_at_warmup_mib", float64(dbAtWarmup)/mib)
	r.figure("db_peak_after_warmup_mib", float64(maxDB)/mib)
	r.figure("sqlite_errors", float64(rep.Totals.SQLiteErrors))
	r.figure("internal_errors", float64(rep.Totals.InternalErrors))
	r.Notes = append(r.Notes, "report: "+rep.Basename())
	if *long {
		r.check(t, "at least 1,000,000 runs", runs >= 1_000_000, "%d runs", runs)
	}
	r.check(t, "RSS flat within 15% after the warm-up", float64(maxRSS) <= 1.15*float64(minRSS),
		"%.1f–%.1f MiB after %v", float64(minRSS)/mib, float64(maxRSS)/mib, warmup)
	r.check(t, "WAL at most 64 MB", maxWAL <= 64*mib, "peak %.1f MiB", float64(maxWAL)/mib)
	r.check(t, "the database is bounded by retention", dbAtWarmup > 0 && float64(maxDB) <= 1.25*float64(dbAtWarmup),
		"%.1f MiB at the end of the warm-up, at most %.1f MiB after it (bound: +25%%)", float64(dbAtWarmup)/mib, float64(maxDB)/mib)
	r.check(t, "0 SQLite errors", rep.Totals.SQLiteErrors == 0 && rep.Totals.InternalErrors == 0,
		"%d SQLite errors, %d internal errors", rep.Totals.SQLiteErrors, rep.Totals.InternalErrors)
}

// progress shows a live line for the long forms, run by hand.
func progress() io.Writer {
	if *long {
		return os.Stderr
	}
	return nil
}
